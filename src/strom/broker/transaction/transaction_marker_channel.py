"""After a transaction's Prepare* is durable: write its markers, then its Complete*.

Kafka's ``TransactionMarkerChannelManager`` with its
``TransactionMarkerRequestCompletionHandler``. EndTxn answers the client as soon as
PrepareCommit/PrepareAbort is in ``__transaction_state``; then one task per transaction
writes a COMMIT or ABORT control batch to each partition of the transaction (through
``MarkerWriter``: the partitions led here are appended to directly, acks=-1; in a cluster,
those led elsewhere get WriteTxnMarkers from their leader) and, once every partition has
its marker, appends CompleteCommit/CompleteAbort. Until then the id's pending state is the
Complete* one, so its next InitProducerId or AddPartitionsToTxn answers
CONCURRENT_TRANSACTIONS and the client retries.

Per partition, a marker error is handled as Kafka's completion handler does: retried
after ``marker_retry_backoff_ms`` (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
NOT_ENOUGH_REPLICAS*, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, and what a remote leader
cannot be asked: COORDINATOR_NOT_AVAILABLE, NETWORK_EXCEPTION); the transaction given up
on INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED (a newer coordinator or
producer epoch owns the partition; the id stays pending until this partition of
``__transaction_state`` is reloaded, as in Kafka); the partition dropped on
UNSUPPORTED_FOR_MESSAGE_FORMAT/UNSUPPORTED_VERSION or when its topic is deleted. Any
other error is logged and retried. The sending stops as soon as this broker stops
coordinating the id at the epoch the transaction was prepared at: the new coordinator
finishes it from its own load.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from strom.broker.transaction.transaction_log import TransactionState
from strom.broker.transaction.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from strom.broker.transaction.transaction_state_manager import TransactionStateManager
from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MarkerRound:
    """The markers of one transaction still to be written, in one call."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


class MarkerWriter(Protocol):
    """Writes one round's markers: each partition's error (a partition left out is retried)."""

    def __call__(self, marker_round: MarkerRound) -> Awaitable[Mapping[TopicPartition, ErrorCode]]: ...

    def close(self) -> None:
        """Let go of what it holds (connections to other brokers)."""

RETRIABLE: Final = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION, ErrorCode.LEADER_NOT_AVAILABLE,
})
GIVE_UP: Final = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
DROP_PARTITION: Final = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})


class TransactionMarkerChannel:
    def __init__(self, state_manager: TransactionStateManager, write_markers: MarkerWriter,
                 topic_exists: Callable[[str], bool], retry_backoff_ms: int) -> None:
        self.state_manager = state_manager
        self.write_markers = write_markers
        self.topic_exists = topic_exists
        self.retry_backoff = retry_backoff_ms / 1000
        self._tasks: dict[asyncio.Task[None], str] = {}  # -> its transactional id

    @property
    def in_flight(self) -> int:
        """Transactions whose markers or Complete* are still being written."""
        return len(self._tasks)

    def add_txn_markers_to_send(self, coordinator_epoch: int, metadata: TransactionMetadata,
                                complete: TxnTransitMetadata) -> None:
        """Write the markers of ``metadata``'s Prepare* transaction, then ``complete``."""
        committed = complete.state == TransactionState.COMPLETE_COMMIT
        marker = MarkerRound(metadata.producer_id, metadata.producer_epoch, committed, coordinator_epoch,
                             tuple(sorted(metadata.partitions)))
        task = asyncio.get_running_loop().create_task(
            self._send(metadata.transactional_id, marker, complete), name=f"markers {metadata.transactional_id}")
        self._tasks[task] = metadata.transactional_id
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)

    def remove_markers_for_partition(self, partition: int) -> None:
        """This broker stopped coordinating ``__transaction_state`` partition ``partition``:
        stop sending for its ids (Kafka's ``removeMarkersForTxnTopicPartition``); the next
        coordinator writes them from its load."""
        for task, transactional_id in list(self._tasks.items()):
            if self.state_manager.partition_for(transactional_id) == partition:
                task.cancel()

    async def _send(self, transactional_id: str, marker: MarkerRound, complete: TxnTransitMetadata) -> None:
        try:
            if await self._write_all(transactional_id, marker):
                await self._write_completion(transactional_id, marker.coordinator_epoch, complete)
        except Exception:  # a bug: the id stays pending (CONCURRENT_TRANSACTIONS) rather than half-done silently
            logger.exception("%s: writing the transaction's markers failed", transactional_id)

    async def _write_all(self, transactional_id: str, marker: MarkerRound) -> bool:
        """True once every partition has its marker; False if the transaction was given up."""
        remaining = set(marker.partitions)
        while True:
            for tp in [tp for tp in remaining if not self.topic_exists(tp[0])]:
                logger.info("%s: %s-%d was deleted: no marker for it", transactional_id, *tp)
                remaining.discard(tp)
            if not remaining:
                return True
            if not self.state_manager.is_coordinator_for(transactional_id, marker.coordinator_epoch):
                logger.info("%s: no longer its coordinator at epoch %d: its markers are the next one's",
                            transactional_id, marker.coordinator_epoch)
                return False
            results = await self.write_markers(
                MarkerRound(marker.producer_id, marker.producer_epoch, marker.committed, marker.coordinator_epoch,
                            tuple(sorted(remaining))))
            for tp in list(remaining):
                error = results.get(tp, ErrorCode.REQUEST_TIMED_OUT)
                if error == ErrorCode.NONE or error in DROP_PARTITION:
                    remaining.discard(tp)
                elif error in GIVE_UP:
                    logger.warning("%s: marker for %s-%d refused (%s): giving the transaction up", transactional_id,
                                   tp[0], tp[1], error.name)
                    return False
                elif error not in RETRIABLE:
                    logger.error("%s: unexpected marker error %s for %s-%d; retrying", transactional_id,
                                 error.name, tp[0], tp[1])
            if remaining:
                await asyncio.sleep(self.retry_backoff)

    async def _write_completion(self, transactional_id: str, coordinator_epoch: int,
                                complete: TxnTransitMetadata) -> None:
        """Append Complete*; retried while the partition is only unavailable (Kafka's
        ``maybeWriteTxnCompletion`` retries COORDINATOR_NOT_AVAILABLE)."""
        while True:
            error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, complete)
            if error != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                break
            await asyncio.sleep(self.retry_backoff)
            # The failed append cleared the pending state: prepare it again, unless things moved on.
            found = self.state_manager.get_transaction_state(transactional_id)
            if isinstance(found, ErrorCode) or found[0] != coordinator_epoch or found[1] is None:
                return
            metadata = found[1]
            if metadata.pending_state is not None or metadata.state not in (
                    TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                return
            complete = metadata.prepare_complete(self.state_manager.clock_ms())
        if error:
            logger.warning("%s: writing %s failed: %s", transactional_id, complete.state.name, error.name)
        else:
            logger.debug("%s: %s", transactional_id, complete.state.name)

    async def shutdown(self) -> None:
        tasks, self._tasks = list(self._tasks), {}
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.write_markers.close()
