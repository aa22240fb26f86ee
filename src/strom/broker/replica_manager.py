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

Everything here runs on the broker's event loop, so no locks: the loop is the one
owner of this state (as kfake's single goroutine is).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.broker.partition import Partition
from strom.broker.purgatory import DelayedOperationPurgatory
from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition
from strom.storage.errors import StorageError
from strom.storage.log import FetchIsolation, FetchResult, FileRegion, Log
from strom.storage.log_manager import LogManager

if TYPE_CHECKING:
    from strom.broker.fetch_session import FetchTarget

logger = logging.getLogger(__name__)

# Below this, a fetched region is read into memory and copied into the response; above
# it, the response carries the region and the network layer sendfile()s it.
SENDFILE_MIN_BYTES = 4096


@dataclass(frozen=True, slots=True)
class PartitionRead:
    error_code: ErrorCode
    result: FetchResult | None = None
    records: bytes | FileRegion | None = None

    @property
    def size(self) -> int:
        return 0 if self.records is None else len(self.records)


class ReplicaManager:
    def __init__(self, log_manager: LogManager, local_broker_id: int) -> None:
        self.log_manager = log_manager
        self.local_broker_id = local_broker_id
        self.partitions: dict[TopicPartition, Partition] = {}
        # Consumers' fetches and acks=-1 produces wait for the high watermark;
        # followers' fetches for appends.
        self.high_watermark_purgatory = DelayedOperationPurgatory("high watermark")
        self.log_end_purgatory = DelayedOperationPurgatory("log end offset")

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
        self.log_manager.delete_log(topic, index)
        self.high_watermark_purgatory.check_and_complete((topic, index))
        self.log_end_purgatory.check_and_complete((topic, index))

    def _host(self, topic: str, index: int, log: Log) -> Partition:
        partition = Partition(topic, index, log, self.local_broker_id, self.high_watermark_purgatory)
        me = self.local_broker_id
        partition.make_leader(max(log.leader_epoch_cache.latest_epoch, 0), (me,), frozenset({me}))
        self.partitions[(topic, index)] = partition
        return partition

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def partition_or_error(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        """The partition this broker leads; raises ``StorageError`` with Kafka's code if not."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise StorageError(f"no partition {topic}-{index}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if current_leader_epoch >= 0:
            fenced = partition.check_leader_epoch(current_leader_epoch)
            if fenced:
                raise StorageError(f"{topic}-{index} is at leader epoch {partition.leader_epoch}, "
                                   f"the request at {current_leader_epoch}", fenced)
        return partition

    # -- produce -------------------------------------------------------------------------
    def append(self, topic: str, index: int, records: bytes | bytearray | memoryview,
               required_acks: int = 1) -> tuple[Partition, int]:
        """Append as leader; (partition, last offset). Raises ``StorageError``."""
        partition = self.partition_or_error(topic, index)
        result = partition.append_as_leader(records, required_acks)
        self.appended(partition)
        return partition, result.last_offset

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
            if total >= min_bytes or remaining <= 0 or any(r.error_code for r in reads):
                return reads
            await purgatory.wait(_keys(targets), remaining)

    # -- other partition operations --------------------------------------------------------
    def delete_records(self, topic: str, index: int, offset: int) -> int:
        """DeleteRecords on the leader; the new log start offset is checkpointed first."""
        partition = self.partition_or_error(topic, index)
        low_watermark = partition.delete_records_on_leader(offset)
        self.log_manager.checkpoint_log_start_offsets()
        return low_watermark


def _keys(targets: Iterable[FetchTarget]) -> list[TopicPartition]:
    return [(t.topic, t.partition) for t in targets if t.topic is not None]


def _bounds(log: Log) -> FetchResult:
    """Offsets for an error answer (OFFSET_OUT_OF_RANGE still reports the log's range)."""
    return FetchResult(
        -1, None, log.high_watermark, log.last_stable_offset, log.log_start_offset, log.log_end_offset
    )


def _records(log: Log, region: FileRegion | None) -> bytes | FileRegion | None:
    if region is None or region.length == 0:
        return None
    if region.length < SENDFILE_MIN_BYTES:
        return region.read(log.fs)
    return region
