"""The transaction coordinator: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn.

Kafka's ``TransactionCoordinator`` (the classic protocol, "TV1", with KIP-360 and KIP-588).
Each request checks the id's metadata and prepares a transition with no ``await`` in
between (the event loop is the lock Kafka's ``inLock`` is), then appends it through the
``TransactionStateManager`` and answers only once it is durable. EndTxn answers once
Prepare* is durable; the ``TransactionMarkerChannel`` then writes the markers and
Complete*. Errors are the newest ones; the handlers rewrite them for old request versions.

Fencing a zombie: an InitProducerId for an id with an Ongoing transaction bumps the epoch
(PrepareEpochFence, in memory), aborts the transaction with the bumped epoch (so its
markers fence the old producer on every partition) and answers CONCURRENT_TRANSACTIONS;
the client retries and gets the epoch after that. The timed-out-transaction scan aborts
the same way, every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``; the
expiry scan writes a tombstone for ids idle ``transactional.id.expiration.ms``.

A crash point for tests (as ``STROM_LOAD_CRASH_AT`` in ``strom.spark.loader``):
``STROM_TXN_CRASH_AT=after-prepare-commit[:N]``, read once when the coordinator is built,
makes the broker exit at once (``os._exit(137)``, as dead as a SIGKILL) right after the Nth
(default: first) PrepareCommit is in ``__transaction_state`` and before any of its markers
is written, so a test can check the markers are written from the load after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.broker.periodic import every
from strom.broker.producer_ids import ProducerIdSource, ProducerIdsUnavailableError
from strom.broker.transaction.transaction_config import TransactionConfig
from strom.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC, TransactionState
from strom.broker.transaction.transaction_marker_channel import (
    MarkerWriter,
    TransactionMarkerChannel,
)
from strom.broker.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TxnTransitMetadata,
)
from strom.broker.transaction.transaction_state_manager import (
    TransactionStateManager,
    TxnPartitionCache,
)
from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.admin_manager import TopicAdmin
    from strom.broker.config import BrokerConfig
    from strom.broker.metadata_cache import MetadataCache
    from strom.broker.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)

S = TransactionState
CRASH_POINT_ENV = "STROM_TXN_CRASH_AT"


def _crash_countdown(point: str) -> int | None:
    """How many times ``point`` is passed before the broker exits there; None: never."""
    name, _, nth = os.environ.get(CRASH_POINT_ENV, "").partition(":")
    return (int(nth) if nth else 1) if name == point else None


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """ListTransactions' answer: the filters' unknown state names and the ids that matched."""

    error: ErrorCode
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[TransactionMetadata, ...] = ()


STATES_BY_NAME = {state.display_name: state for state in TransactionState}
"""Kafka's state names (case as Kafka spells them, as its ``TransactionState.fromName`` matches)."""


class TransactionCoordinator:
    def __init__(self, config: TransactionConfig, state_manager: TransactionStateManager,
                 marker_channel: TransactionMarkerChannel, producer_ids: ProducerIdSource) -> None:
        self.config = config
        self.state_manager = state_manager
        self.marker_channel = marker_channel
        self.producer_ids = producer_ids
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._prepare_commits_until_crash = _crash_countdown("after-prepare-commit")

    @classmethod
    def build(cls, config: BrokerConfig, metadata: MetadataCache, admin_manager: TopicAdmin,
              replica_manager: ReplicaManager, producer_ids: ProducerIdSource, write_markers: MarkerWriter
              ) -> TransactionCoordinator:
        """The broker's coordinator; in cluster mode it follows ``__transaction_state``'s leadership."""
        txn_config = TransactionConfig.from_broker(config)
        manager = TransactionStateManager(txn_config, metadata, admin_manager, replica_manager,
                                          cluster_mode=config.cluster_mode)
        channel = TransactionMarkerChannel(manager, write_markers, lambda topic: metadata.get(topic) is not None,
                                           txn_config.marker_retry_backoff_ms)
        coordinator = cls(txn_config, manager, channel, producer_ids)
        if config.cluster_mode:
            replica_manager.leadership_listeners.append(coordinator.on_leadership_change)
        return coordinator

    def now(self) -> int:
        return self.state_manager.clock_ms()

    # -- lifecycle -----------------------------------------------------------------------
    def load(self) -> None:
        self.state_manager.load()

    def start(self) -> None:
        """Complete what the load found half-done, and start the periodic scans."""
        for coordinator_epoch, metadata in self.state_manager.all_transactions():
            self._complete_if_prepared(coordinator_epoch, metadata)
        self._tasks = [
            asyncio.create_task(every(self.config.abort_timed_out_interval_ms, self.abort_timed_out_transactions,
                                      "transaction timeouts")),
            asyncio.create_task(every(self.config.remove_expired_interval_ms, self.expire_transactional_ids,
                                      "transactional id expiration")),
        ]

    async def shutdown(self) -> None:
        for task in [*self._tasks, *self._background]:
            task.cancel()
        for task in [*self._tasks, *self._background]:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.marker_channel.shutdown()
        await self.state_manager.shutdown()

    # -- cluster mode: gaining and losing partitions of __transaction_state -------------
    def on_leadership_change(self, now_leading: Sequence[TopicPartition],
                             stopped_leading: Sequence[TopicPartition]) -> None:
        """The ReplicaManager's leadership listener (Kafka's ``onElection``/``onResignation``)."""
        for topic, partition in stopped_leading:
            if topic == TRANSACTION_STATE_TOPIC:
                logger.info("resigned as leader of %s-%d", topic, partition)
                self.marker_channel.remove_markers_for_partition(partition)
                self.state_manager.remove_partition(partition)
        for topic, partition in now_leading:
            if topic == TRANSACTION_STATE_TOPIC:
                hosted = self.state_manager.replica_manager.get_partition(topic, partition)
                epoch = hosted.leader_epoch if hosted is not None else 0
                logger.info("elected leader of %s-%d at epoch %d: loading it", topic, partition, epoch)
                self.state_manager.schedule_load(partition, epoch, self._on_loaded)

    def _on_loaded(self, partition: int, cache: TxnPartitionCache) -> None:
        del partition
        for metadata in list(cache.ids.values()):
            self._complete_if_prepared(cache.coordinator_epoch, metadata)

    def _complete_if_prepared(self, coordinator_epoch: int, metadata: TransactionMetadata) -> None:
        """A Prepare* transaction found on load: its markers are (re)written, then Complete*."""
        if metadata.pending_state is None and metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            logger.info("%s: completing its %s transaction found on load", metadata.transactional_id,
                        metadata.state.display_name)
            complete = metadata.prepare_complete(self.now())
            self.marker_channel.add_txn_markers_to_send(coordinator_epoch, metadata, complete)

    # -- InitProducerId ------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> InitProducerIdResult:
        """A transactional producer's id and epoch (``expected``: KIP-360's current pid/epoch)."""
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        found = self.state_manager.get_transaction_state(transactional_id)
        if isinstance(found, ErrorCode):
            return InitProducerIdResult(found)
        coordinator_epoch, metadata = found
        if metadata is None:
            try:
                producer_id = await self.producer_ids.generate()
            except ProducerIdsUnavailableError as exc:
                return InitProducerIdResult(exc.error_code)
            created = TransactionMetadata(transactional_id, producer_id, txn_timeout_ms=timeout_ms,
                                          txn_last_update_timestamp=self.now())
            put = self.state_manager.put_if_not_exists(created)
            if isinstance(put, ErrorCode):
                return InitProducerIdResult(put)
            coordinator_epoch, metadata = put
        prepared = await self._prepare_init(metadata, timeout_ms, expected)
        if isinstance(prepared, ErrorCode):
            return InitProducerIdResult(prepared)
        if prepared.state == S.PREPARE_EPOCH_FENCE:
            error = await self.end_transaction(transactional_id, prepared.producer_id, prepared.producer_epoch,
                                               committed=False, from_client=False)
            return InitProducerIdResult(error or ErrorCode.CONCURRENT_TRANSACTIONS)
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, prepared)
        if error:
            logger.info("%s: InitProducerId answered %s", transactional_id, error.name)
            return InitProducerIdResult(error)
        logger.info("initialized %s with producer id %d epoch %d", transactional_id, prepared.producer_id,
                    prepared.producer_epoch)
        return InitProducerIdResult(ErrorCode.NONE, prepared.producer_id, prepared.producer_epoch)

    async def _prepare_init(self, metadata: TransactionMetadata, timeout_ms: int,
                            expected: tuple[int, int] | None) -> TxnTransitMetadata | ErrorCode:
        """Kafka's ``prepareInitProducerIdTransit``. A new producer id (epoch exhaustion) is
        drawn first, so nothing is awaited between the checks and the prepare."""
        new_producer_id: int | None = None
        if metadata.is_producer_epoch_exhausted and metadata.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            try:
                new_producer_id = await self.producer_ids.generate()
            except ProducerIdsUnavailableError as exc:
                return exc.error_code
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None and not metadata.is_valid_producer_id(*expected):
            return ErrorCode.PRODUCER_FENCED
        state = metadata.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state == S.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        if state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            logger.error("%s: InitProducerId found the illegal state %s", metadata.transactional_id, state.name)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        now = self.now()
        if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
            if new_producer_id is None:  # exhausted meanwhile (cannot happen: nothing awaited since)
                return ErrorCode.CONCURRENT_TRANSACTIONS
            logger.info("%s: epoch %d exhausted: producer id %d follows %d", metadata.transactional_id,
                        metadata.producer_epoch, new_producer_id, metadata.producer_id)
            return metadata.prepare_producer_id_rotation(new_producer_id, timeout_ms, now, expected is not None)
        bumped = metadata.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], now)
        return ErrorCode.PRODUCER_FENCED if bumped is None else bumped

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------
    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: frozenset[TopicPartition]) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        found = self.state_manager.get_transaction_state(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        coordinator_epoch, metadata = found
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending_transition_in_progress or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state == S.ONGOING and partitions <= metadata.partitions:
            return ErrorCode.NONE  # already in: nothing to write
        transit = metadata.prepare_add_partitions(partitions, self.now())
        return await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)

    def verify_partitions_in_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                         partitions: Sequence[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1 (Kafka's ``handleVerifyPartitionsInTransaction``, AddPartitionsToTxn
        v4 VerifyOnly): is each partition in the producer's ongoing transaction? Nothing is
        written: a partition not in it is TRANSACTION_ABORTABLE, the caller's to rewrite."""
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST)
        found = self.state_manager.get_transaction_state(transactional_id)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(partitions, found)
        metadata = found[1]
        if metadata is None or metadata.producer_id != producer_id:
            return dict.fromkeys(partitions, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return dict.fromkeys(partitions, ErrorCode.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(partitions, ErrorCode.CONCURRENT_TRANSACTIONS)
        return {tp: ErrorCode.NONE if metadata.state == S.ONGOING and tp in metadata.partitions
                else ErrorCode.TRANSACTION_ABORTABLE for tp in partitions}

    # -- EndTxn --------------------------------------------------------------------------
    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, *,
                              committed: bool, from_client: bool = True) -> ErrorCode:
        """Kafka's ``endTransaction``: NONE once Prepare* is durable (markers follow)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        found = self.state_manager.get_transaction_state(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        coordinator_epoch, metadata = found
        if metadata is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        prepared = self._prepare_end(metadata, producer_id, producer_epoch, committed, from_client)
        if isinstance(prepared, ErrorCode):
            return prepared
        transit, epoch_fence = prepared
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error:
            logger.info("%s: EndTxn(%s) answered %s: appending %s failed", transactional_id,
                        "commit" if committed else "abort", error.name, transit.state.name)
            if epoch_fence and self.state_manager.is_coordinator_for(transactional_id, coordinator_epoch):
                metadata.has_failed_epoch_fence = True
            return error
        return self._after_prepare(transactional_id, coordinator_epoch, producer_id, producer_epoch, committed)

    def _prepare_end(self, metadata: TransactionMetadata, producer_id: int, producer_epoch: int, committed: bool,
                     from_client: bool) -> tuple[TxnTransitMetadata, bool] | ErrorCode:
        if metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # A client's epoch must be the current one; the coordinator's own abort may be one above it.
        if (from_client and producer_epoch != metadata.producer_epoch) or producer_epoch < metadata.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        # Only the coordinator's own abort may follow its epoch fence (a client's EndTxn meeting a
        # timed-out transaction's fence before the abort is prepared waits, as for any pending state).
        if metadata.pending_transition_in_progress and (
                from_client or metadata.pending_state != S.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = metadata.state
        if state == S.ONGOING:
            epoch_fence = False
            if not committed and metadata.pending_state == S.PREPARE_EPOCH_FENCE:
                epoch_fence = True  # the fence's epoch is the one the abort is written with
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            next_state = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
            return metadata.prepare_abort_or_commit(next_state, self.now()), epoch_fence
        if metadata.pending_state == S.PREPARE_EPOCH_FENCE:  # the fenced transaction ended meanwhile
            metadata.pending_state = None
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return ErrorCode.NONE if committed == (state == S.COMPLETE_COMMIT) else self._invalid(metadata, committed)
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            matches = committed == (state == S.PREPARE_COMMIT)
            return ErrorCode.CONCURRENT_TRANSACTIONS if matches else self._invalid(metadata, committed)
        return self._invalid(metadata, committed)

    @staticmethod
    def _invalid(metadata: TransactionMetadata, committed: bool) -> ErrorCode:
        logger.info("%s: %s in state %s: INVALID_TXN_STATE", metadata.transactional_id,
                    "commit" if committed else "abort", metadata.state.display_name)
        return ErrorCode.INVALID_TXN_STATE

    def _after_prepare(self, transactional_id: str, coordinator_epoch: int, producer_id: int, producer_epoch: int,
                       committed: bool) -> ErrorCode:
        """Prepare* is durable: check nothing moved meanwhile, then hand over to the markers."""
        found = self.state_manager.get_transaction_state(transactional_id)
        if isinstance(found, ErrorCode) or found[0] != coordinator_epoch or found[1] is None:
            return ErrorCode.NOT_COORDINATOR
        metadata = found[1]
        if metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        expected = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
        if metadata.state != expected:
            return self._invalid(metadata, committed)
        complete = metadata.prepare_complete(self.now())
        if committed:
            self._maybe_crash_after_prepare_commit(transactional_id)
        self.marker_channel.add_txn_markers_to_send(coordinator_epoch, metadata, complete)
        return ErrorCode.NONE

    def _maybe_crash_after_prepare_commit(self, transactional_id: str) -> None:
        """The ``STROM_TXN_CRASH_AT`` test hook (see the module's docstring)."""
        if self._prepare_commits_until_crash is None:
            return
        self._prepare_commits_until_crash -= 1
        if self._prepare_commits_until_crash == 0:
            sys.stderr.write(f"{CRASH_POINT_ENV}: after-prepare-commit of {transactional_id}: exiting\n")
            sys.stderr.flush()
            os._exit(137)

    # -- the admin APIs (KIP-664): read only ---------------------------------------------
    def describe_transaction(self, transactional_id: str) -> ErrorCode | TransactionMetadata:
        """Kafka's ``handleDescribeTransactions``: the id's metadata, or why there is none
        (an id being expired, Dead, is not found either)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        found = self.state_manager.find_transaction_state(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        metadata = found[1]
        if metadata is None or metadata.state == S.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        return metadata

    def list_transactions(self, producer_ids: frozenset[int], state_names: frozenset[str],
                          duration_ms: int = -1) -> TransactionListing:
        """Kafka's ``listTransactionStates``: every id this broker coordinates that matches
        all filters given (an empty filter matches all; ``duration_ms`` >= 0 keeps only
        transactions started more than that long ago, KIP-994). Dead ids are left out; a
        state filter of only unknown names matches nothing."""
        error = self.state_manager.listing_error()
        if error:
            return TransactionListing(error)
        states = {STATES_BY_NAME[name] for name in state_names if name in STATES_BY_NAME}
        unknown = tuple(sorted(name for name in state_names if name not in STATES_BY_NAME))
        now = self.now()
        matched = tuple(
            metadata for _, metadata in self.state_manager.all_transactions()
            if metadata.state != S.DEAD
            and (not producer_ids or metadata.producer_id in producer_ids)
            and (not state_names or metadata.state in states)
            and (duration_ms < 0 or now - metadata.txn_start_timestamp > duration_ms)
        )
        return TransactionListing(ErrorCode.NONE, unknown, matched)

    # -- periodic scans ------------------------------------------------------------------
    def abort_timed_out_transactions(self) -> None:
        """Abort (with an epoch bump) every Ongoing transaction older than its timeout."""
        now = self.now()
        for _, metadata in self.state_manager.all_transactions():
            if (metadata.state != S.ONGOING or metadata.pending_transition_in_progress
                    or metadata.txn_start_timestamp + metadata.txn_timeout_ms >= now):
                continue
            logger.info("%s: transaction of producer %d epoch %d timed out after %d ms: aborting it",
                        metadata.transactional_id, metadata.producer_id, metadata.producer_epoch,
                        metadata.txn_timeout_ms)
            fence = metadata.prepare_fence_producer_epoch()
            self._in_background(self._abort(metadata.transactional_id, fence))

    async def _abort(self, transactional_id: str, fence: TxnTransitMetadata) -> None:
        error = await self.end_transaction(transactional_id, fence.producer_id, fence.producer_epoch,
                                           committed=False, from_client=False)
        if error:
            logger.info("%s: aborting the timed-out transaction answered %s", transactional_id, error.name)

    def expire_transactional_ids(self) -> None:
        """Tombstones for ids idle ``transactional.id.expiration.ms`` with nothing open."""
        now = self.now()
        for coordinator_epoch, metadata in self.state_manager.all_transactions():
            if (metadata.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                    and not metadata.pending_transition_in_progress
                    and metadata.txn_last_update_timestamp <= now - self.config.transactional_id_expiration_ms):
                dead = metadata.prepare_dead()
                self._in_background(self._expire(metadata.transactional_id, coordinator_epoch, dead))

    async def _expire(self, transactional_id: str, coordinator_epoch: int, dead: TxnTransitMetadata) -> None:
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, dead)
        if error:
            logger.info("%s: expiring the id failed: %s", transactional_id, error.name)
        else:
            logger.info("%s: expired after %d ms idle", transactional_id, self.config.transactional_id_expiration_ms)

    def _in_background(self, work: object) -> None:
        assert asyncio.iscoroutine(work)
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
