"""ReplicaManager: the partitions this broker hosts, and the requests waiting on them.

Kafka's ``ReplicaManager``: it owns one ``Partition`` per hosted partition and is the
one way a handler reaches one (``partition_or_error``: unknown partitions, a broker
that does not lead, and stale or future leader epochs are refused there, with Kafka's
error codes). It also keeps the delayed operations ("purgatory"):

- a **Fetch** from a consumer that has not got ``fetch.min.bytes`` waits until the
  high watermark of one of its partitions moves (the last stable offset moves only
  with it), or ``fetch.max.wait.ms`` passes;
- a Fetch from a **follower** (``replica_id`` >= 0) reads to the log end offset and
  waits for appends instead;
- an ``acks=-1`` **Produce** waits until the high watermark passes its last offset
  (on one node the ISR is this broker alone, so at once), or its timeout, then
  answers REQUEST_TIMED_OUT.

A follower's fetch whose ``last_fetched_epoch`` (Fetch v12+) does not match this log
is answered at once with the epoch and end offset to truncate to (``diverging_epoch``)
and no records. In cluster mode the leaders' ISR changes go to the controller through
``alter_partition`` (the AlterPartitionManager, set by ``enable_isr_changes``), and
``maybe_shrink_isr`` runs every ``replica.lag.time.max.ms``/2 (periodic.py).

In cluster mode it also applies the controller's word (Kafka's
``becomeLeaderOrFollower``, ``stopReplicas`` and ``maybeUpdateMetadataCache``): which
partitions this broker hosts, leads or follows, fenced by the controller epoch and
each partition's leader epoch, and tells ``leadership_listeners`` (the group
coordinator) which partitions it now leads and which it stopped leading. On one node
it leads every partition it has a log for, from start-up on.

Everything here runs on the broker's event loop, so no locks: the loop is the one
owner of this state (as kfake's single goroutine is).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.broker.metadata_cache import MetadataCache
from strom.broker.partition import Partition
from strom.broker.partition_state import DEFAULT_REPLICA_LAG_TIME_MAX_MS, AlterPartitionSink
from strom.broker.purgatory import DelayedOperationPurgatory
from strom.broker.replica_fetch_state import InitialFetchState
from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition
from strom.storage.errors import KafkaStorageError, StorageError
from strom.storage.log import Log
from strom.storage.log_manager import LogManager
from strom.storage.log_results import FetchIsolation, FetchResult, FileRegion
from strom.storage.partition_metadata import read_topic_id, write_topic_id

if TYPE_CHECKING:
    from strom.broker.fetch_session import FetchTarget
    from strom.broker.replica_fetcher_manager import ReplicaFetcherManager

logger = logging.getLogger(__name__)

# Below this, a fetched region is read into memory and copied into the response; above
# it, the response carries the region and the network layer sendfile()s it.
SENDFILE_MIN_BYTES = 4096


NO_EPOCH = -1  # StopReplica before v3 carries no leader epoch: not checked
EPOCH_DURING_DELETE = -2  # Kafka's LeaderAndIsr.EpochDuringDelete: the topic is being deleted


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartition:
    """One partition's state in a LeaderAndIsr request, as ``become_leader_or_follower`` applies it."""

    topic: str
    index: int
    leader: int  # -1: no leader (the partition is offline)
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int = 0  # the state znode's version
    topic_id: uuid.UUID | None = None  # None: the request has none (before v5, or the zero id)
    is_new: bool = False


@dataclass(frozen=True, slots=True)
class StopReplicaPartition:
    """One partition of a StopReplica request."""

    topic: str
    index: int
    leader_epoch: int = NO_EPOCH
    delete: bool = False


@dataclass(frozen=True, slots=True)
class PartitionRead:
    error_code: ErrorCode
    result: FetchResult | None = None
    records: bytes | FileRegion | None = None
    # A follower's log diverges from ours: (epoch, end offset) to truncate to (Fetch v12+).
    diverging_epoch: tuple[int, int] | None = None

    @property
    def size(self) -> int:
        return 0 if self.records is None else len(self.records)


LeadershipListener = Callable[[Sequence[TopicPartition], Sequence[TopicPartition]], None]
"""Called with (partitions this broker now leads, partitions it no longer leads)."""


class ReplicaManager:
    def __init__(self, log_manager: LogManager, local_broker_id: int, metadata: MetadataCache | None = None) -> None:
        self.log_manager = log_manager
        self.local_broker_id = local_broker_id
        # The cluster's partitions (hosted here or not): a known one not hosted here is
        # NOT_LEADER_OR_FOLLOWER rather than UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
        self.metadata = metadata if metadata is not None else MetadataCache()
        self.partitions: dict[TopicPartition, Partition] = {}
        # Cluster mode: the highest controller epoch seen (Kafka starts at 0; every
        # control request raises it or is refused) and who hears of leadership changes.
        self.controller_epoch = 0
        self.leadership_listeners: list[LeadershipListener] = []
        # Consumers' fetches and acks=-1 produces wait for the high watermark;
        # followers' fetches for appends.
        self.high_watermark_purgatory = DelayedOperationPurgatory("high watermark")
        self.log_end_purgatory = DelayedOperationPurgatory("log end offset")
        # Cluster mode (``enable_isr_changes``): where leaders send ISR changes, and the lag
        # after which a follower leaves the ISR. None on one node: no ISR change ever.
        self.alter_partition: AlterPartitionSink | None = None
        self.replica_lag_time_max_ms = DEFAULT_REPLICA_LAG_TIME_MAX_MS
        # Cluster mode: the fetchers copying the partitions this broker follows (set by
        # strom.cluster's ZkBroker); None on one node, where nothing is followed.
        self.replica_fetcher_manager: ReplicaFetcherManager | None = None
        # Cluster mode: what to do once the log dir fails (Kafka's LogDirFailureChannel; the
        # broker halts, its only dir gone). None on one node: the partition answers
        # KAFKA_STORAGE_ERROR and the broker serves on, as before.
        self.log_dir_failure_handler: Callable[[str], None] | None = None

    # -- hosting partitions --------------------------------------------------------------
    def startup(self) -> None:
        """Lead every partition the LogManager loaded (one node: this broker leads all)."""
        for (topic, index), log in sorted(self.log_manager.logs.items()):
            self._host(topic, index, log)

    def create_partition(self, topic: str, index: int) -> Partition:
        """The partition, with its log created empty if missing (idempotent)."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            partition = self._host(topic, index, self.log_manager.create_log(topic, index))
        return partition

    def delete_partition(self, topic: str, index: int) -> None:
        """Stop hosting the partition and delete its log; its waiters re-check and fail."""
        self.partitions.pop((topic, index), None)
        if self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.remove_partitions([(topic, index)])
        self.log_manager.delete_log(topic, index)
        self.high_watermark_purgatory.check_and_complete((topic, index))
        self.log_end_purgatory.check_and_complete((topic, index))

    def _host(self, topic: str, index: int, log: Log) -> Partition:
        """One node: lead the partition at the epoch its log already has (or 0)."""
        partition = Partition(topic, index, log, self.local_broker_id, self.high_watermark_purgatory)
        me = self.local_broker_id
        partition.make_leader(max(log.leader_epoch_cache.latest_epoch, 0), (me,), frozenset({me}),
                              record_epoch_start=False)
        self.partitions[(topic, index)] = partition
        return partition

    def host_replica(self, topic: str, index: int) -> Partition:
        """Cluster mode: the partition object for a LeaderAndIsr, its log created if missing;
        it neither leads nor follows until told (``make_leader``/``make_follower``)."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            log = self.log_manager.create_log(topic, index)
            partition = Partition(topic, index, log, self.local_broker_id, self.high_watermark_purgatory,
                                  replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                                  alter_partition=self.alter_partition, is_broker_alive=self._is_broker_alive)
            self.partitions[(topic, index)] = partition
        return partition

    def enable_isr_changes(self, alter_partition: AlterPartitionSink, replica_lag_time_max_ms: int) -> None:
        """Cluster mode: leaders propose ISR changes to ``alter_partition`` (the broker's
        AlterPartitionManager), and followers lagging ``replica_lag_time_max_ms`` leave."""
        self.alter_partition = alter_partition
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        for partition in self.partitions.values():
            partition.alter_partition = alter_partition
            partition.replica_lag_time_max_ms = replica_lag_time_max_ms

    def _is_broker_alive(self, broker_id: int) -> bool:
        """ZooKeeper mode's ISR eligibility: the controller's UpdateMetadata lists the broker."""
        return self.metadata.live_broker(broker_id) is not None

    def maybe_shrink_isr(self) -> int:
        """Every replica.lag.time.max.ms/2 (Kafka's isr-expiration task): each partition led
        here proposes dropping its followers that have not caught up for the lag time;
        returns how many proposed a change."""
        if self.alter_partition is None:
            return 0
        proposed = 0
        for partition in self.partitions.values():
            if partition.followers and partition.is_leader and partition.maybe_shrink_isr():
                proposed += 1
        return proposed

    def wake_waiters(self, topic_partition: TopicPartition) -> None:
        """Leadership moved: produces and fetches waiting on the partition re-check now
        (and fail with NOT_LEADER_OR_FOLLOWER) rather than at their timeout, as Kafka's
        ``completeDelayedFetchOrProduceRequests``."""
        self.high_watermark_purgatory.check_and_complete(topic_partition)
        self.log_end_purgatory.check_and_complete(topic_partition)

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def partition_or_error(self, topic: str, index: int, current_leader_epoch: int = -1, *,
                           require_leader: bool = True) -> Partition:
        """The partition this broker leads; raises ``StorageError`` with Kafka's code if not.

        Kafka's ``getPartitionOrException`` then ``localLogWithEpochOrThrow``, in its order:
        not hosted here is NOT_LEADER_OR_FOLLOWER if the cluster has the partition
        (another broker hosts it), else UNKNOWN_TOPIC_OR_PARTITION; then the client's
        leader epoch (KIP-320); then, unless ``require_leader`` is off (ListOffsets from
        the debugging replica), a partition this broker only follows is
        NOT_LEADER_OR_FOLLOWER.
        """
        partition = self.partitions.get((topic, index))
        if partition is None:
            if self.metadata.contains_partition(topic, index):
                raise StorageError(f"broker {self.local_broker_id} does not host {topic}-{index}",
                                   ErrorCode.NOT_LEADER_OR_FOLLOWER)
            raise StorageError(f"no partition {topic}-{index}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if current_leader_epoch >= 0:
            fenced = partition.check_leader_epoch(current_leader_epoch)
            if fenced:
                raise StorageError(f"{topic}-{index} is at leader epoch {partition.leader_epoch}, "
                                   f"the request at {current_leader_epoch}", fenced)
        if require_leader and partition.leader_id != self.local_broker_id:
            raise StorageError(f"broker {self.local_broker_id} does not lead {topic}-{index} "
                               f"(leader {partition.leader_id})", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition

    # -- the controller's word (cluster mode) ---------------------------------------------
    def become_leader_or_follower(self, controller_epoch: int, states: Sequence[LeaderAndIsrPartition]
                                  ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """LeaderAndIsr (Kafka's ``becomeLeaderOrFollower``): (request error, each partition's).

        A controller epoch older than the highest seen refuses the whole request
        (STALE_CONTROLLER_EPOCH, nothing applied). Per partition, only a leader epoch
        newer than the partition's is applied (equal or older: STALE_CONTROLLER_EPOCH), and
        only if this broker is among its replicas (else UNKNOWN_TOPIC_OR_PARTITION); a
        topic id other than the log's is INCONSISTENT_TOPIC_ID. An applied partition gets
        its log (created if missing, with the topic id in ``partition.metadata``) and
        becomes leader or follower; then every leadership listener hears once.
        """
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH, {(s.topic, s.index): ErrorCode.STALE_CONTROLLER_EPOCH
                                                      for s in states}
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, ErrorCode] = {}
        apply: list[LeaderAndIsrPartition] = []
        for state in states:
            error = self._check_leader_and_isr(state)
            if error is None:
                apply.append(state)
            else:
                errors[(state.topic, state.index)] = error
        now_leading: list[TopicPartition] = []
        now_following: list[TopicPartition] = []
        fetch: dict[TopicPartition, InitialFetchState] = {}
        for state in apply:
            key = (state.topic, state.index)
            try:
                partition = self.host_replica(state.topic, state.index)
                if state.topic_id is not None:
                    write_topic_id(partition.log.directory, state.topic_id)
            except (StorageError, OSError) as exc:
                logger.error("LeaderAndIsr for %s-%d: cannot open its log: %s", state.topic, state.index, exc)
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            isr = frozenset(state.isr)
            if state.leader == self.local_broker_id:
                self._stop_fetching([key])  # before leading: no follower append after this
                if partition.make_leader(state.leader_epoch, state.replicas, isr, state.partition_epoch):
                    now_leading.append(key)
            else:
                partition.make_follower(state.leader, state.leader_epoch, state.replicas, isr, state.partition_epoch)
                now_following.append(key)
                if state.leader >= 0:
                    fetch[key] = InitialFetchState(state.leader, state.leader_epoch, _initial_fetch_offset(partition.log))
                else:
                    self._stop_fetching([key])  # offline: nobody to copy from
            errors[key] = ErrorCode.NONE
            self.wake_waiters(key)
        if fetch and self.replica_fetcher_manager is not None:
            # Every epoch change re-adds the partition (KAFKA-7164): its next fetch carries
            # last_fetched_epoch, so the leader's DivergingEpoch says what to truncate.
            self.replica_fetcher_manager.add_partitions(fetch)
        self._tell_listeners(now_leading, now_following)
        return ErrorCode.NONE, errors

    def _stop_fetching(self, partitions: Sequence[TopicPartition]) -> None:
        if self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.remove_partitions(partitions)

    def _check_leader_and_isr(self, state: LeaderAndIsrPartition) -> ErrorCode | None:
        """None if the partition's state is to be applied, else the partition's error."""
        partition = self.partitions.get((state.topic, state.index))
        current_epoch = -1 if partition is None else partition.leader_epoch
        log_topic_id = read_topic_id(self._partition_dir(state.topic, state.index))
        if state.topic_id is not None and log_topic_id is not None and log_topic_id != state.topic_id:
            logger.error("LeaderAndIsr for %s-%d names topic id %s; its log has %s",
                         state.topic, state.index, state.topic_id, log_topic_id)
            return ErrorCode.INCONSISTENT_TOPIC_ID
        if state.leader_epoch > current_epoch:
            if self.local_broker_id not in state.replicas:
                logger.warning("LeaderAndIsr for %s-%d ignored: broker %d is not among its replicas %s",
                               state.topic, state.index, self.local_broker_id, state.replicas)
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return None
        if partition is not None and state.leader_epoch == current_epoch and state.topic_id is not None \
                and log_topic_id is None:
            # The controller giving an old topic its id, epoch unchanged: take it (as Kafka).
            write_topic_id(partition.log.directory, state.topic_id)
            return ErrorCode.NONE
        logger.info("LeaderAndIsr for %s-%d ignored: leader epoch %d, the partition's is %d",
                    state.topic, state.index, state.leader_epoch, current_epoch)
        return ErrorCode.STALE_CONTROLLER_EPOCH

    def stop_replicas(self, controller_epoch: int, states: Sequence[StopReplicaPartition]
                      ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """StopReplica (Kafka's ``stopReplicas``): (request error, each partition's).

        A stale controller epoch refuses the whole request with no partition errors.
        A hosted partition is stopped only if the request's leader epoch is newer than
        its own, or is -1 (no epoch: StopReplica before v3) or -2 (the topic is being
        deleted); else FENCED_LEADER_EPOCH. Stopping keeps the log unless the partition
        is to be deleted; a partition not hosted here still has its log deleted (a topic
        deleted while this broker was down). Leadership listeners hear of every stopped
        partition.
        """
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH, {}
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, ErrorCode] = {}
        stopped: list[TopicPartition] = []
        for state in states:
            key = (state.topic, state.index)
            partition = self.partitions.get(key)
            epoch = state.leader_epoch
            if partition is not None and epoch not in (NO_EPOCH, EPOCH_DURING_DELETE) \
                    and epoch <= partition.leader_epoch:
                logger.info("StopReplica for %s-%d ignored: leader epoch %d, the partition's is %d",
                            state.topic, state.index, epoch, partition.leader_epoch)
                errors[key] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            try:
                if state.delete:
                    self.delete_partition(state.topic, state.index)
                elif partition is not None:
                    self._stop_fetching([key])
                    partition.stop_leading()
                    self.wake_waiters(key)
            except (StorageError, OSError) as exc:
                logger.error("StopReplica for %s-%d failed: %s", state.topic, state.index, exc)
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            errors[key] = ErrorCode.NONE
            stopped.append(key)
        self._tell_listeners([], stopped)
        return ErrorCode.NONE, errors

    def maybe_update_metadata_cache(self, controller_epoch: int, update: Callable[[MetadataCache], list[TopicPartition]]
                                    ) -> tuple[ErrorCode, list[TopicPartition]]:
        """UpdateMetadata (Kafka's ``maybeUpdateMetadataCache``): apply ``update`` to the
        cache unless the controller epoch is stale; (error, the partitions it deleted)."""
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH, []
        deleted = update(self.metadata)
        self.controller_epoch = controller_epoch
        return ErrorCode.NONE, deleted

    def _tell_listeners(self, now_leading: Sequence[TopicPartition], stopped_leading: Sequence[TopicPartition]) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(now_leading, stopped_leading)
            except Exception:  # one listener's bug must not undo what was applied, nor stop the others
                logger.exception("leadership listener %r failed", listener)

    def _partition_dir(self, topic: str, index: int) -> str:
        return os.path.join(self.log_manager.data_dir, f"{topic}-{index}")

    # -- produce -------------------------------------------------------------------------
    def append(self, topic: str, index: int, records: bytes | bytearray | memoryview,
               required_acks: int = 1) -> tuple[Partition, int]:
        """Append as leader; (partition, last offset). Raises ``StorageError``."""
        partition = self.partition_or_error(topic, index)
        try:
            result = partition.append_as_leader(records, required_acks)
        except KafkaStorageError as exc:  # ENOSPC, EIO: the producer gets KAFKA_STORAGE_ERROR
            self.log_dir_failed(f"appending to {topic}-{index}", exc)
            raise
        self.appended(partition)
        return partition, result.last_offset

    def log_dir_failed(self, what: str, exc: KafkaStorageError) -> None:
        """``what`` failed with ``exc``: if the disk under the log dir did (an ``OSError``:
        ENOSPC, EIO), tell the handler, once (Kafka's ``maybeAddOfflineLogDir``). A log that
        is only closed (a shutdown racing a request) is no disk failure."""
        if not isinstance(exc.__cause__, OSError):
            return
        handler, self.log_dir_failure_handler = self.log_dir_failure_handler, None
        if handler is not None:
            handler(f"{what}: {exc}")

    def appended(self, partition: Partition) -> None:
        """The partition's log end moved: wake followers long-polling it, if any."""
        if self.log_end_purgatory.watchers:
            self.log_end_purgatory.check_and_complete(partition.topic_partition)

    async def wait_for_replication(self, pending: Sequence[tuple[Partition, int]], timeout: float
                                   ) -> dict[TopicPartition, ErrorCode]:
        """DelayedProduce for acks=-1: each partition's answer once its HW passes the offset.

        ``pending`` holds (partition, last offset appended). A partition still short
        of it at the timeout answers REQUEST_TIMED_OUT, as in Kafka.
        """
        deadline = time.monotonic() + timeout
        results: dict[TopicPartition, ErrorCode] = {}
        while True:
            waiting = []
            for partition, last_offset in pending:
                key = partition.topic_partition
                if key not in results:
                    done, error = partition.check_enough_replicas_reach_offset(last_offset + 1)
                    if done:
                        results[key] = error
                    else:
                        waiting.append(key)
            remaining = deadline - time.monotonic()
            if not waiting or remaining <= 0:
                for key in waiting:
                    results[key] = ErrorCode.REQUEST_TIMED_OUT
                return results
            await self.high_watermark_purgatory.wait(waiting, remaining)

    # -- fetch ---------------------------------------------------------------------------
    def read(self, target: FetchTarget, max_bytes: int, isolation: FetchIsolation,
             replica_id: int = -1, min_one_message: bool | None = None) -> PartitionRead:
        """One partition's part of a Fetch; errors become the partition's error code."""
        if target.topic is None:
            return PartitionRead(ErrorCode.UNKNOWN_TOPIC_ID)
        try:
            partition = self.partition_or_error(target.topic, target.partition, target.current_leader_epoch)
        except StorageError as exc:
            return PartitionRead(exc.error_code)
        try:
            if replica_id >= 0 and target.last_fetched_epoch >= 0:
                diverging = partition.diverging_epoch(replica_id, target.fetch_offset, target.last_fetched_epoch)
                if diverging is not None:  # no records, and nothing learnt of the follower
                    return PartitionRead(ErrorCode.NONE, _bounds(partition.log, target.fetch_offset),
                                         diverging_epoch=diverging)
            result = partition.read(target.fetch_offset, max_bytes, isolation, replica_id, min_one_message)
        except StorageError as exc:
            return PartitionRead(exc.error_code, _bounds(partition.log))
        return PartitionRead(ErrorCode.NONE, result, _records(partition.log, result.region))

    def read_all(self, targets: Sequence[FetchTarget], max_bytes: int, isolation: FetchIsolation,
                 replica_id: int) -> tuple[list[PartitionRead], int]:
        """One pass over the partitions within the response's ``max_bytes``."""
        budget = max_bytes
        total = 0
        reads = []
        for target in targets:
            # KIP-74: until a partition has returned records, a partition's first batch comes
            # whole even past the budget or its own max bytes (0 included), as Kafka's
            # ReplicaManager.readFromLocalLog (minOneMessage).
            read = self.read(target, min(target.max_bytes, budget), isolation, replica_id, min_one_message=total == 0)
            budget = max(0, budget - read.size)
            total += read.size
            reads.append(read)
        return reads, total

    async def fetch_messages(self, targets: Sequence[FetchTarget], *, max_bytes: int, min_bytes: int,
                             max_wait_ms: int, isolation: FetchIsolation, replica_id: int = -1
                             ) -> list[PartitionRead]:
        """Read now; below ``min_bytes``, wait in purgatory for the data to move, then read again."""
        deadline = time.monotonic() + max(max_wait_ms, 0) / 1000
        if replica_id >= 0:
            isolation = FetchIsolation.LOG_END
        purgatory = self.log_end_purgatory if replica_id >= 0 else self.high_watermark_purgatory
        while True:
            reads, total = self.read_all(targets, max_bytes, isolation, replica_id)
            remaining = deadline - time.monotonic()
            if total >= min_bytes or remaining <= 0 or any(r.error_code or r.diverging_epoch for r in reads):
                return reads
            await purgatory.wait(_keys(targets), remaining)

    # -- other partition operations --------------------------------------------------------
    def delete_records(self, topic: str, index: int, offset: int) -> int:
        """DeleteRecords on the leader; the new log start offset is checkpointed first."""
        partition = self.partition_or_error(topic, index)
        low_watermark = partition.delete_records_on_leader(offset)
        self.log_manager.checkpoint_log_start_offsets()
        return low_watermark


def _initial_fetch_offset(log: Log) -> int:
    """Where a new follower starts (Kafka's ``initialFetchOffset``): its log end when the log
    has leader epochs (the leader's DivergingEpoch then says what to cut), else its high
    watermark (what is below it is committed; the fetcher truncates to it first)."""
    return log.log_end_offset if log.latest_epoch >= 0 else log.high_watermark


def _keys(targets: Iterable[FetchTarget]) -> list[TopicPartition]:
    return [(t.topic, t.partition) for t in targets if t.topic is not None]


def _bounds(log: Log, fetch_offset: int = -1) -> FetchResult:
    """Offsets for an answer without records (OFFSET_OUT_OF_RANGE still reports the log's
    range; a diverging epoch the HW and log start the follower needs)."""
    return FetchResult(
        fetch_offset, None, log.high_watermark, log.last_stable_offset, log.log_start_offset, log.log_end_offset
    )


def _records(log: Log, region: FileRegion | None) -> bytes | FileRegion | None:
    if region is None or region.length == 0:
        return None
    if region.length < SENDFILE_MIN_BYTES:
        return region.read(log.fs)
    return region
