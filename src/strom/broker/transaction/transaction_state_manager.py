"""The coordinator's durable side: ``__transaction_state`` creation, appends, loading, unloading.

Kafka's ``TransactionStateManager``. A transactional id belongs to partition
``partition_for(id)`` of ``__transaction_state``; the broker leading that partition is
the id's coordinator, and the partition's leader epoch is the *coordinator epoch* the
markers carry. The cache holds, per partition this broker coordinates, the coordinator
epoch it was loaded at and the ids' ``TransactionMetadata``.

Every transition is appended to the id's partition with acks=-1 and applied to the cache
only once the partition's high watermark covers it (``append_transaction_to_log``); a
failed append clears the pending transition and answers Kafka's mapped error. If the
partition was unloaded or reloaded at another epoch meanwhile, the answer is
NOT_COORDINATOR and the cache is left alone (the new owner's load has the truth).

Loading a partition reads it from its log start to its end: the last value per key wins
and a tombstone deletes. Requests for its ids answer COORDINATOR_LOAD_IN_PROGRESS while it
loads and NOT_COORDINATOR once it is not led here. On one node every partition is loaded
at start (and a partition created later starts empty); in a cluster a partition is loaded
when this broker is elected its leader (``schedule_load``, in a worker thread) and dropped
when it stops leading it (``remove_partition``). Invariant: ``loading`` and ``_owned``
never share a partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from strom.broker.admin_manager import TopicAdmin
from strom.broker.metadata_cache import MetadataCache, TopicError
from strom.broker.replica_manager import ReplicaManager
from strom.broker.transaction.transaction_config import TransactionConfig
from strom.broker.transaction.transaction_log import (
    TRANSACTION_STATE_TOPIC,
    TransactionState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
    topic_configs,
)
from strom.broker.transaction.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.records import build_record_batch, decode_batch, iter_batches
from strom.storage.errors import StorageError
from strom.storage.log import Log
from strom.storage.log_results import FetchIsolation

logger = logging.getLogger(__name__)

LOAD_READ_BYTES = 5 << 20  # Kafka's transaction.state.log.load.buffer.size


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class TxnPartitionCache:
    """The ids of one coordinated partition, and the coordinator epoch it was loaded at."""

    coordinator_epoch: int
    ids: dict[str, TransactionMetadata] = field(default_factory=dict)


class TransactionStateManager:
    def __init__(self, config: TransactionConfig, metadata: MetadataCache, admin_manager: TopicAdmin,
                 replica_manager: ReplicaManager, clock_ms: Callable[[], int] = wall_clock_ms, *,
                 cluster_mode: bool = False) -> None:
        self.config = config
        self.metadata = metadata
        self.admin_manager = admin_manager
        self.replica_manager = replica_manager
        self.clock_ms = clock_ms
        self.cluster_mode = cluster_mode
        self._owned: dict[int, TxnPartitionCache] = {}
        self.loading: set[int] = set()
        self._loaded_at_start = False
        self._loads: dict[int, tuple[asyncio.Task[None], threading.Event]] = {}

    # -- the topic -----------------------------------------------------------------------
    def partition_count(self) -> int:
        topic = self.metadata.get(TRANSACTION_STATE_TOPIC)
        return topic.partitions if topic is not None else self.config.num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partition_count())

    def topic_configs(self) -> dict[str, str]:
        min_isr = min(self.config.min_isr, self.config.replication_factor) if self.cluster_mode else None
        return topic_configs(self.config.segment_bytes, min_isr)

    def ensure_topic(self) -> None:
        """One node: create ``__transaction_state`` on first need; raises TopicError."""
        if self.metadata.get(TRANSACTION_STATE_TOPIC) is not None:
            return
        self.admin_manager.create_topic(TRANSACTION_STATE_TOPIC, self.config.num_partitions, self.topic_configs(),
                                        replication_factor=self.config.replication_factor)

    # -- the cache -----------------------------------------------------------------------
    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        """May this broker answer for ``transactional_id`` now?"""
        if not self.cluster_mode:
            return ErrorCode.NONE if self._loaded_at_start else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE if partition in self._owned else ErrorCode.NOT_COORDINATOR

    def _cache_for(self, partition: int) -> TxnPartitionCache | None:
        cache = self._owned.get(partition)
        if cache is None and not self.cluster_mode and self._loaded_at_start:
            # One node: a partition of a topic created after start is empty and led here.
            hosted = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, partition)
            if hosted is not None:
                cache = self._owned[partition] = TxnPartitionCache(max(hosted.leader_epoch, 0))
        return cache

    def get_transaction_state(self, transactional_id: str) -> ErrorCode | tuple[int, TransactionMetadata | None]:
        """(coordinator epoch, the id's metadata or None), or why this broker cannot say."""
        error = self.coordinator_error(transactional_id)
        if error:
            return error
        if not self.cluster_mode:
            try:
                self.ensure_topic()
            except TopicError as exc:
                logger.error("cannot create %s: %s", TRANSACTION_STATE_TOPIC, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
        cache = self._cache_for(self.partition_for(transactional_id))
        if cache is None:
            return ErrorCode.NOT_COORDINATOR
        return cache.coordinator_epoch, cache.ids.get(transactional_id)

    def find_transaction_state(self, transactional_id: str) -> ErrorCode | tuple[int, TransactionMetadata | None]:
        """As ``get_transaction_state`` for a reader (DescribeTransactions): creates no topic,
        so with no ``__transaction_state`` yet the answer is NOT_COORDINATOR, as Kafka's."""
        error = self.coordinator_error(transactional_id)
        if error:
            return error
        if self.metadata.get(TRANSACTION_STATE_TOPIC) is None:
            return ErrorCode.NOT_COORDINATOR
        cache = self._cache_for(self.partition_for(transactional_id))
        if cache is None:
            return ErrorCode.NOT_COORDINATOR
        return cache.coordinator_epoch, cache.ids.get(transactional_id)

    def listing_error(self) -> ErrorCode:
        """May this broker list the ids it coordinates now? Not while any partition loads
        (Kafka's ``listTransactionStates``: COORDINATOR_LOAD_IN_PROGRESS)."""
        if self.loading or (not self.cluster_mode and not self._loaded_at_start):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def put_if_not_exists(self, metadata: TransactionMetadata) -> ErrorCode | tuple[int, TransactionMetadata]:
        cache = self._cache_for(self.partition_for(metadata.transactional_id))
        if cache is None:
            return ErrorCode.NOT_COORDINATOR
        return cache.coordinator_epoch, cache.ids.setdefault(metadata.transactional_id, metadata)

    def is_coordinator_for(self, transactional_id: str, coordinator_epoch: int) -> bool:
        cache = self._owned.get(self.partition_for(transactional_id))
        return cache is not None and cache.coordinator_epoch == coordinator_epoch

    def all_transactions(self) -> Iterator[tuple[int, TransactionMetadata]]:
        """(coordinator epoch, metadata) of every id this broker coordinates."""
        for cache in list(self._owned.values()):
            for metadata in list(cache.ids.values()):
                yield cache.coordinator_epoch, metadata

    # -- appends -------------------------------------------------------------------------
    async def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                        transit: TxnTransitMetadata) -> ErrorCode:
        """Append ``transit`` (a tombstone for Dead) with acks=-1, wait for its replicas, then
        apply it; Kafka's ``appendTransactionToLog`` errors otherwise."""
        partition = self.partition_for(transactional_id)
        value = None if transit.state == TransactionState.DEAD else encode_value(transit.log_value())
        batch = build_record_batch([(encode_key(transactional_id), value, (), self.clock_ms())])
        error = ErrorCode.NONE
        try:
            hosted, last_offset = self.replica_manager.append(TRANSACTION_STATE_TOPIC, partition, batch, -1)
        except StorageError as exc:
            logger.warning("appending %s of %s to %s-%d failed: %s", transit.state.name, transactional_id,
                           TRANSACTION_STATE_TOPIC, partition, exc)
            error = exc.error_code
        else:
            done, error = hosted.check_enough_replicas_reach_offset(last_offset + 1)
            if not done:
                results = await self.replica_manager.wait_for_replication(
                    [(hosted, last_offset)], self.config.append_timeout_ms / 1000)
                error = results[hosted.topic_partition]
        cache = self._owned.get(partition)
        if cache is None or cache.coordinator_epoch != coordinator_epoch:
            logger.info("%s: no longer coordinator at epoch %d after appending %s", transactional_id,
                        coordinator_epoch, transit.state.name)
            return ErrorCode.NOT_COORDINATOR
        metadata = cache.ids.get(transactional_id)
        if metadata is None:
            return ErrorCode.NOT_COORDINATOR
        if error:
            if metadata.pending_state == transit.state:
                metadata.pending_state = None
            return append_error(error)
        metadata.complete_transition(transit)
        if transit.state == TransactionState.DEAD:
            del cache.ids[transactional_id]
        return ErrorCode.NONE

    # -- loading -------------------------------------------------------------------------
    def load(self) -> None:
        """One node: read every partition of the topic (if it exists); cluster mode loads on election."""
        if self.cluster_mode:
            return
        topic = self.metadata.get(TRANSACTION_STATE_TOPIC)
        if topic is not None:
            for partition in range(topic.partitions):
                hosted = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, partition)
                if hosted is not None:
                    cache = TxnPartitionCache(max(hosted.leader_epoch, 0), read_partition(hosted.log))
                    self._owned[partition] = cache
        self._loaded_at_start = True

    def schedule_load(self, partition: int, coordinator_epoch: int,
                      on_loaded: Callable[[int, TxnPartitionCache], None]) -> None:
        """This broker now leads ``partition`` (at ``coordinator_epoch``): load it, then own it."""
        self.remove_partition(partition)  # a reload at a newer epoch starts over
        self.loading.add(partition)
        cancel = threading.Event()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # off an event loop (nothing to run a task on): load here
            hosted = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, partition)
            self.loading.discard(partition)
            ids = read_partition(hosted.log) if hosted is not None else {}
            on_loaded(partition, self._own(partition, coordinator_epoch, ids))
            return
        task = loop.create_task(self._load(partition, coordinator_epoch, cancel, on_loaded),
                                name=f"load {TRANSACTION_STATE_TOPIC}-{partition}")
        self._loads[partition] = (task, cancel)

    async def _load(self, partition: int, coordinator_epoch: int, cancel: threading.Event,
                    on_loaded: Callable[[int, TxnPartitionCache], None]) -> None:
        ids: dict[str, TransactionMetadata] = {}
        try:
            hosted = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, partition)
            if hosted is not None:
                ids = await asyncio.to_thread(read_partition, hosted.log, cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise
        except (StorageError, OSError, ProtocolError) as exc:  # as Kafka: owned with what could be read
            logger.error("loading %s-%d failed: %s", TRANSACTION_STATE_TOPIC, partition, exc)
        finally:
            entry = self._loads.get(partition)
            if entry is not None and entry[1] is cancel:
                del self._loads[partition]
        if cancel.is_set():
            return
        self.loading.discard(partition)
        on_loaded(partition, self._own(partition, coordinator_epoch, ids))

    def _own(self, partition: int, coordinator_epoch: int, ids: dict[str, TransactionMetadata]) -> TxnPartitionCache:
        cache = self._owned[partition] = TxnPartitionCache(coordinator_epoch, ids)
        logger.info("loaded %d transactional ids of %s-%d at coordinator epoch %d", len(ids),
                    TRANSACTION_STATE_TOPIC, partition, coordinator_epoch)
        return cache

    def remove_partition(self, partition: int) -> None:
        """This broker no longer leads ``partition``: stop its load, forget its ids."""
        load = self._loads.pop(partition, None)
        if load is not None:
            task, cancel = load
            cancel.set()
            task.cancel()
        self.loading.discard(partition)
        self._owned.pop(partition, None)

    async def wait_for_loads(self) -> None:
        """Until no load is in progress (loads started meanwhile too)."""
        while self._loads:
            await asyncio.gather(*(task for task, _ in list(self._loads.values())), return_exceptions=True)

    async def shutdown(self) -> None:
        loads, self._loads = list(self._loads.values()), {}
        for task, cancel in loads:
            cancel.set()
            task.cancel()
        for task, _ in loads:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def read_partition(log: Log, cancel: threading.Event | None = None) -> dict[str, TransactionMetadata]:
    """The ids in ``log`` from its start to its end: the last value per key, tombstones deleting."""
    ids: dict[str, TransactionMetadata] = {}
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end and not (cancel is not None and cancel.is_set()):
        result = log.read(offset, LOAD_READ_BYTES, isolation=FetchIsolation.LOG_END)
        if result.region is None:
            break
        buf = result.region.read(log.fs)
        next_offset = offset
        for pos, header in iter_batches(buf):
            next_offset = header.base_offset + header.last_offset_delta + 1
            if header.magic < 2 or header.is_control:
                continue
            for record in decode_batch(buf, pos).records:
                try:
                    _apply(ids, record.key, record.value)
                except ProtocolError as exc:
                    logger.warning("skipping unreadable record in %s-%d: %s", TRANSACTION_STATE_TOPIC,
                                   log.partition, exc)
        if next_offset <= offset:
            logger.error("cannot read %s-%d past offset %d", TRANSACTION_STATE_TOPIC, log.partition, offset)
            break
        offset = next_offset
    return ids


def _apply(ids: dict[str, TransactionMetadata], key: bytes | memoryview | None,
           value: bytes | memoryview | None) -> None:
    if key is None:
        raise ProtocolError("record without a key")
    transactional_id = decode_key(key)
    if transactional_id is None:
        return
    if value is None:
        ids.pop(transactional_id, None)
    else:
        ids[transactional_id] = TransactionMetadata.from_log(transactional_id, decode_value(value))


_COORDINATOR_NOT_AVAILABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
})
_NOT_COORDINATOR = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR})
_TOO_LARGE = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})


def append_error(error: ErrorCode) -> ErrorCode:
    """What a coordinator answers for a failed ``__transaction_state`` append (Kafka's
    ``appendTransactionToLog``): retriable ones are COORDINATOR_NOT_AVAILABLE, a lost
    leadership NOT_COORDINATOR, an oversized record UNKNOWN_SERVER_ERROR."""
    if error in _COORDINATOR_NOT_AVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in _NOT_COORDINATOR:
        return ErrorCode.NOT_COORDINATOR
    if error in _TOO_LARGE:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error
