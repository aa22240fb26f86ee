"""Partition: one partition this broker hosts — its log, its leader and epoch, its ISR.

Kafka's ``Partition`` (``core/.../cluster/Partition.scala``). Handlers never reach a
``Log`` directly: they ask ``ReplicaManager.partition_or_error`` for the partition,
which fences stale callers, and call ``append_as_leader`` / ``read`` on it. So the
rules below hold in one place, on one node today and in a cluster tomorrow.

Invariants (who writes what, which epoch fences it):

- The log is appended to only here: ``append_as_leader`` while this broker leads
  (producers, the group coordinator); a follower's fetcher will append the leader's
  batches as they are (replication, a later issue).
- ``leader_epoch`` changes only in ``make_leader`` and ``make_follower``, on the
  controller's word (a cluster's LeaderAndIsr, applied only when its epoch is newer;
  on one node: once at start, to the newest epoch the log's leader-epoch cache has
  seen, or 0, so a restart fences no client). Every batch appended as leader is stamped with
  it, and the log's leader-epoch cache (``leader-epoch-checkpoint``) records where
  each epoch began.
- A request's ``current_leader_epoch`` (KIP-320) older than ours gets
  FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; -1 is not checked.
- The high watermark is the lowest log end offset among the leader and every ISR
  member; it never moves back while this broker leads. ``maybe_advance_high_watermark``
  is its only writer, called after every append and every follower fetch; when it
  moves, the ReplicaManager's purgatory wakes what waits on it. (A partition with no
  other replica lets its log move the HW to the log end inside each append,
  ``hw_follows_leo``: the same rule, without a call per produce.)
- Followers' log end offsets are learnt only from their Fetch requests (``replica_id``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from strom.broker.purgatory import DelayedOperationPurgatory
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.topic_partition import TopicPartition
from strom.storage.config import LogConfig
from strom.storage.errors import RecordValidationError, StorageError
from strom.storage.log import AppendResult, FetchIsolation, FetchResult, Log
from strom.storage.log_validator import invalid_timestamps
from strom.storage.time_index import TimestampOffset


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower: from its last Fetch."""

    replica_id: int
    log_end_offset: int = -1
    last_fetch_ms: int = 0


EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-405/1005: the earliest offset on local disk


class Partition:
    def __init__(self, topic: str, index: int, log: Log, local_broker_id: int,
                 high_watermark_purgatory: DelayedOperationPurgatory | None = None) -> None:
        self.topic = topic
        self.index = index
        self.topic_partition: TopicPartition = (topic, index)
        self.log = log
        self.local_broker_id = local_broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = 0
        self.replicas: tuple[int, ...] = (local_broker_id,)
        self.isr: frozenset[int] = frozenset({local_broker_id})
        self.followers: dict[int, FollowerState] = {}
        # The ReplicaManager's purgatory: told when the high watermark moves.
        self._purgatory = high_watermark_purgatory

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={sorted(self.isr)})")

    # -- leadership ----------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    def make_leader(self, leader_epoch: int, replicas: tuple[int, ...], isr: frozenset[int],
                    partition_epoch: int = 0, *, record_epoch_start: bool = True) -> bool:
        """Lead the partition from ``leader_epoch`` on (the controller's word); True if this
        broker did not lead it before.

        The new epoch is written into the leader-epoch cache at the log end at once
        (KAFKA-7415), not at the first append: a follower or consumer asking
        OffsetForLeaderEpoch in between must learn where the previous epoch ended. One
        node's start-up (``record_epoch_start=False``) keeps the epoch the log already
        has, so nothing is written there.
        """
        was_leader = self.is_leader
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = replicas
        self.isr = isr
        self.followers = {r: FollowerState(r) for r in replicas if r != self.local_broker_id}
        if record_epoch_start:
            self.log.leader_epoch_cache.assign(leader_epoch, self.log.log_end_offset)
        # A partition with no other replica: the HW is the log end offset, so the log
        # moves it inside each append (one node's hot path: no call of ours per produce).
        self.log.hw_follows_leo = not self.followers
        self.maybe_advance_high_watermark()
        return not was_leader

    def make_follower(self, leader: int, leader_epoch: int, replicas: tuple[int, ...], isr: frozenset[int],
                      partition_epoch: int = 0) -> None:
        """Follow ``leader`` from ``leader_epoch`` on (the controller's word; -1: no leader,
        the partition is offline).

        A follower appends nothing from clients and serves no reads (NOT_LEADER_OR_FOLLOWER
        from ``ReplicaManager.partition_or_error``); its high watermark will come from the
        leader's fetch responses once followers fetch (replication, part 2).
        """
        self.leader_id = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = replicas
        self.isr = isr
        self.followers = {}
        self.log.hw_follows_leo = False

    def stop_leading(self) -> bool:
        """StopReplica without deletion: keep the log and the epoch, serve nothing (no leader
        known here); True if this broker led the partition."""
        was_leader = self.is_leader
        self.leader_id = -1
        self.followers = {}
        self.log.hw_follows_leo = False
        return was_leader

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320 fencing: a client's view of the leader epoch against ours (-1: no check)."""
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if 0 <= current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.NONE

    # -- the high watermark --------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def maybe_advance_high_watermark(self) -> bool:
        """HW = the lowest LEO among the leader and the ISR; True when it moved up."""
        log = self.log
        new_hw = log.log_end_offset
        for replica_id in self.isr:
            follower = self.followers.get(replica_id)
            if follower is not None and follower.log_end_offset < new_hw:
                new_hw = follower.log_end_offset
        if new_hw <= log.high_watermark:
            return False
        log.update_high_watermark(new_hw)
        self._high_watermark_moved()
        return True

    def _high_watermark_moved(self) -> None:
        purgatory = self._purgatory
        if purgatory is not None and purgatory.watchers:
            purgatory.check_and_complete(self.topic_partition)

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """An acks=-1 produce up to ``required_offset``: (done, its error code).

        Done once the high watermark reaches it; if the ISR shrank below
        ``min.insync.replicas`` meanwhile, the records are in but under-replicated:
        NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka answers.
        """
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.isr) < self.log.config.min_insync_replicas:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE

    # -- append --------------------------------------------------------------------------
    def append_as_leader(self, records: bytes | bytearray | memoryview, required_acks: int = 1,
                         *, from_client: bool = True) -> AppendResult:
        """Append a producer's batches stamped with our epoch; raises ``StorageError``."""
        if self.leader_id != self.local_broker_id:  # not is_leader: a call less per produce
            raise StorageError(f"broker {self.local_broker_id} does not lead {self.topic}-{self.index}",
                               ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log = self.log
        config = log.config
        if required_acks == -1 and len(self.isr) < config.min_insync_replicas:
            raise StorageError(
                f"{self.topic}-{self.index} has {len(self.isr)} in-sync replicas, "
                f"min.insync.replicas is {config.min_insync_replicas}", ErrorCode.NOT_ENOUGH_REPLICAS)
        if config.compacts or config.bounds_timestamps:
            _validate_records(self.topic, self.index, records, config, log.clock())
        result = log.append(records, leader_epoch=self.leader_epoch, from_client=from_client)
        if self.followers:
            self.maybe_advance_high_watermark()
        elif self._purgatory is not None and self._purgatory.watchers:
            # Without followers the log moved the HW itself (see make_leader).
            self._purgatory.check_and_complete(self.topic_partition)
        return result

    # -- read ----------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, isolation: FetchIsolation, replica_id: int = -1,
             min_one_message: bool | None = None) -> FetchResult:
        """Records from ``offset``: consumers to the HW (or LSO), followers to the log end.

        A follower's fetch offset is its log end offset (Kafka's follower fetch state),
        so the read also records its progress and may move the high watermark.
        ``min_one_message``: the first batch comes whole whatever ``max_bytes`` (KIP-74's
        first partition with data); by default only when ``max_bytes`` leaves room.
        """
        if min_one_message is None:
            min_one_message = max_bytes > 0
        if replica_id < 0:
            return self.log.read(offset, max_bytes, isolation=isolation, min_one_message=min_one_message)
        follower = self.followers.get(replica_id)
        if follower is None or not self.is_leader:
            raise StorageError(f"fetch from broker {replica_id}, not a replica of {self.topic}-{self.index}",
                               ErrorCode.NOT_LEADER_OR_FOLLOWER)
        result = self.log.read(offset, max_bytes, isolation=FetchIsolation.LOG_END,
                               min_one_message=min_one_message)
        self.update_follower_fetch_state(follower, offset)
        return result

    def update_follower_fetch_state(self, follower: FollowerState, fetch_offset: int) -> None:
        follower.log_end_offset = fetch_offset
        follower.last_fetch_ms = time.monotonic_ns() // 1_000_000
        self.maybe_advance_high_watermark()


    # -- offsets -------------------------------------------------------------------------
    def fetch_offset_for_timestamp(self, timestamp: int, committed: bool) -> TimestampOffset | None:
        """ListOffsets: earliest (-2, and -4 earliest local), latest (-1), max timestamp (-3),
        or the first record at or after ``timestamp``, within what consumers may read;
        None if there is none."""
        log = self.log
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):  # no tiered storage: the same
            return TimestampOffset(-1, log.log_start_offset)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampOffset(-1, log.last_stable_offset if committed else log.high_watermark)
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp()
        if timestamp < 0:
            raise StorageError(f"no such ListOffsets timestamp {timestamp}", ErrorCode.INVALID_REQUEST)
        return log.offset_for_timestamp(timestamp)

    def _max_timestamp(self) -> TimestampOffset | None:
        """KIP-734: the record with the largest timestamp, if consumers may read it.

        A segment only knows the last offset of the batch that reached its largest
        timestamp, so the batch is decoded to name the first record that carries it, as
        Kafka does since KAFKA-16310; like Kafka, an answer at or past the high
        watermark is no answer rather than the next-largest timestamp.
        """
        log = self.log
        start = log.log_start_offset
        live = [s for s in log.segments if s.max_timestamp >= 0 and s.next_offset > start]
        if not live:
            return None
        segment = max(live, key=lambda s: s.max_timestamp)  # the first of equals, as maxBy
        found = segment.find_offset_by_timestamp(segment.max_timestamp, start)
        return found if found is not None and found.offset < log.high_watermark else None

    def last_offset_for_leader_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= ``leader_epoch``, where it ends)."""
        return self.log.end_offset_for_epoch(leader_epoch)

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up (-1: to the HW); the new one."""
        log = self.log
        if not log.config.deletes:
            raise StorageError(f"{self.topic}-{self.index} has cleanup.policy={log.config.cleanup_policy}",
                               ErrorCode.POLICY_VIOLATION)
        return log.delete_records(log.high_watermark if offset == -1 else offset)


def _validate_records(topic: str, index: int, records: bytes | bytearray | memoryview, config: LogConfig,
                      now_ms: int) -> None:
    """The per-record rules of a topic (Kafka's LogValidator.validateRecord): a compacted
    topic refuses keyless records, a topic with timestamp bounds records outside them.
    Every offending record is named (KIP-467); a timestamp among them makes the answer
    INVALID_TIMESTAMP, else INVALID_RECORD, as Kafka's processRecordErrors."""
    errors: list[tuple[int, str]] = []
    try:
        if config.compacts:
            # numpy (record_scan's vectorised key scan): imported only once a compacted topic needs it
            from strom.compaction.record_scan import keyless_records

            why = f"Compacted topic cannot accept message without key in topic partition {topic}-{index}"
            errors += [(i, why) for i in keyless_records(records)]
        late = (invalid_timestamps(records, now_ms, config.timestamp_before_max_ms, config.timestamp_after_max_ms)
                if config.bounds_timestamps else [])
    except ProtocolError as exc:
        raise StorageError(str(exc), ErrorCode(exc.error_code)) from exc
    if errors or late:
        code = ErrorCode.INVALID_TIMESTAMP if late else ErrorCode.INVALID_RECORD
        raise RecordValidationError(sorted(errors + late), code)
