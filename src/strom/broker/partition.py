"""Partition: one partition this broker hosts — its log, its leader and epoch, its ISR.

Kafka's ``Partition`` (``core/.../cluster/Partition.scala``). Handlers never reach a
``Log`` directly: they ask ``ReplicaManager.partition_or_error`` for the partition,
which fences stale callers, and call ``append_as_leader`` / ``read`` on it. So the
rules below hold in one place, on one node today and in a cluster tomorrow.

Invariants (who writes what, which epoch fences it):

- The log is appended to by ``append_as_leader`` while this broker leads (producers,
  the group coordinator), and, while it follows, only by its replica fetcher, which
  appends the leader's batches as they are (``Log.append_as_follower``).
- ``leader_epoch`` changes only in ``make_leader`` and ``make_follower``, on the
  controller's word (a cluster's LeaderAndIsr, applied only when its epoch is newer;
  on one node: once at start, to the newest epoch the log's leader-epoch cache has
  seen, or 0, so a restart fences no client). Every batch appended as leader is stamped with
  it, and the log's leader-epoch cache (``leader-epoch-checkpoint``) records where
  each epoch began.
- A request's ``current_leader_epoch`` (KIP-320) older than ours gets
  FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; -1 is not checked.
- The ISR (Kafka's ``PartitionState``): ``partition_state`` is the committed ISR (the
  controller's word, from LeaderAndIsr or an AlterPartition answer) or one pending change
  proposed to the controller (``PendingExpandIsr`` / ``PendingShrinkIsr``; never more than
  one in flight). Nothing is applied before the controller commits it; meanwhile the
  *maximal ISR* (a pending expansion included, a pending shrink's leavers still counted)
  is what the high watermark and acks=-1 wait for, so the pending change can only make
  them stricter (KIP-497). A follower joins when its LEO reaches the HW and the start of
  the current leader epoch (KAFKA-7128); it leaves when it has not caught up to the
  leader's LEO for ``replica.lag.time.max.ms`` (``maybe_shrink_isr``, periodic).
- The high watermark is the lowest log end offset among the leader, the maximal ISR and
  any follower caught up within the lag time (Kafka's maybeIncrementLeaderHW: one about
  to join holds it back, so it can join), and it does not move while the committed ISR is
  below ``min.insync.replicas`` (KAFKA-15583); it never moves back while this broker
  leads. ``maybe_advance_high_watermark`` is its only writer, called after every append,
  follower fetch and ISR change; when it moves, the ReplicaManager's purgatory wakes what
  waits on it. (A partition with no other replica lets its log move the HW to the log end
  inside each append, ``hw_follows_leo``: the same rule, without a call per produce.)
- Followers' log end offsets are learnt only from their Fetch requests (``replica_id``);
  a fetch whose ``last_fetched_epoch`` diverges from this log gets the epoch and end
  offset to truncate to (``diverging_epoch``) and records nothing of the follower.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from strom.broker.partition_state import (
    AWAIT_METADATA,
    DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    NOT_ATTEMPTED,
    UNKNOWN_OFFSET,
    AlterPartitionSink,
    CommittedPartitionState,
    FollowerState,
    PartitionState,
    PendingExpandIsr,
    PendingPartitionChange,
    PendingShrinkIsr,
    wall_clock_ms,
)
from strom.broker.purgatory import DelayedOperationPurgatory
from strom.broker.transaction.verification import Verification, VerificationGuards
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.topic_partition import TopicPartition
from strom.storage.config import LogConfig
from strom.storage.errors import RecordValidationError, StorageError
from strom.storage.log import Log
from strom.storage.log_results import AppendResult, FetchIsolation, FetchResult
from strom.storage.log_validator import invalid_timestamps
from strom.storage.time_index import TimestampOffset

if TYPE_CHECKING:
    from strom.cluster.zk_data import LeaderAndIsr

logger = logging.getLogger(__name__)

ALTER_PARTITION_RETRY_BACKOFF_MS = 100  # Kafka's retry.backoff.ms default

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-405/1005: the earliest offset on local disk


class Partition:
    def __init__(self, topic: str, index: int, log: Log, local_broker_id: int,
                 high_watermark_purgatory: DelayedOperationPurgatory | None = None, *,
                 replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
                 alter_partition: AlterPartitionSink | None = None,
                 is_broker_alive: Callable[[int], bool] | None = None,
                 clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.topic = topic
        self.index = index
        self.topic_partition: TopicPartition = (topic, index)
        self.log = log
        self.local_broker_id = local_broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        # Where this leader's epoch began (KAFKA-7128, KIP-207); None unless leading.
        self.leader_epoch_start_offset: int | None = None
        self.partition_epoch = 0
        self.replicas: tuple[int, ...] = (local_broker_id,)
        self.partition_state: PartitionState = CommittedPartitionState(frozenset({local_broker_id}))
        self.followers: dict[int, FollowerState] = {}
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        # Cluster mode: the AlterPartitionManager (None: no ISR change is ever proposed) and
        # whether the controller reports a broker alive (Kafka's ZK-mode isReplicaIsrEligible).
        self.alter_partition = alter_partition
        self._is_broker_alive = is_broker_alive
        self._clock_ms = clock_ms
        # The ReplicaManager's purgatory: told when the high watermark moves.
        self._purgatory = high_watermark_purgatory
        # KIP-890 part 1: the guards of the producers' verifications under way, each
        # dropped by the producer's next append (strom.broker.transaction.verification).
        self.verification_guards = VerificationGuards(log)

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={sorted(self.isr)}, state={self.partition_state})")

    @property
    def isr(self) -> frozenset[int]:
        """The committed ISR (what the controller agreed; empty on a follower, as Kafka)."""
        return self.partition_state.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The committed ISR with a pending expansion (a pending shrink's leavers kept)."""
        return self.partition_state.maximal_isr

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
        has, so nothing is written there. The controller's ISR replaces any pending
        change (its answer, if it still comes, is ignored); a new epoch resets what is
        known of the followers, as Kafka's makeLeader.
        """
        was_leader = self.is_leader
        is_new_epoch = leader_epoch > self.leader_epoch or self.leader_epoch_start_offset is None
        me = self.local_broker_id
        known = self.followers
        self.followers = {r: known.get(r) or FollowerState(r) for r in replicas if r != me}
        self.replicas = replicas
        self.partition_state = CommittedPartitionState(isr)
        self.leader_id = me
        if is_new_epoch:
            start = self.log.log_end_offset
            if record_epoch_start:
                self.log.leader_epoch_cache.assign(leader_epoch, start)
            if self.followers:
                now = self._clock_ms()
                for follower in self.followers.values():
                    follower.reset(now, start, not was_leader, follower.replica_id in isr)
            self.leader_epoch = leader_epoch
            self.leader_epoch_start_offset = start
        self.partition_epoch = partition_epoch
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
        from ``ReplicaManager.partition_or_error``); its high watermark comes from the
        leader's fetch responses. It keeps no ISR (Kafka's makeFollower), so a pending
        change of its time as leader is dropped.
        """
        self.leader_id = leader
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = None
        self.partition_epoch = partition_epoch
        self.replicas = replicas
        self.partition_state = CommittedPartitionState(frozenset())
        self.followers = {}
        self.log.hw_follows_leo = False
        self.verification_guards.guards.clear()

    def stop_leading(self) -> bool:
        """StopReplica without deletion: keep the log and the epoch, serve nothing (no leader
        known here); True if this broker led the partition."""
        was_leader = self.is_leader
        self.leader_id = -1
        self.leader_epoch_start_offset = None
        self.partition_state = CommittedPartitionState(frozenset())
        self.followers = {}
        self.log.hw_follows_leo = False
        self.verification_guards.guards.clear()
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

    def _effective_min_isr(self) -> int:
        """min.insync.replicas, but never more than the replicas there are (Kafka's effectiveMinIsr)."""
        return min(self.log.config.min_insync_replicas, len(self.followers) + 1)

    def maybe_advance_high_watermark(self) -> bool:
        """HW = the lowest LEO among the leader, the maximal ISR and any follower caught up
        within the lag time; True when it moved up. It stays while the committed ISR is
        below min.insync.replicas (KAFKA-15583: nothing commits that the ISR could lose)."""
        log = self.log
        followers = self.followers
        new_hw = log.log_end_offset
        if followers:
            if len(self.partition_state.isr) < self._effective_min_isr():
                return False
            leader_end = new_hw
            maximal_isr = self.partition_state.maximal_isr
            now = -1
            for replica_id, follower in followers.items():
                end = follower.log_end_offset
                if end >= new_hw:
                    continue
                if replica_id not in maximal_isr:
                    if now < 0:
                        now = self._clock_ms()
                    if not (follower.is_caught_up(leader_end, now, self.replica_lag_time_max_ms)
                            and self._is_isr_eligible(replica_id)):
                        continue
                new_hw = end
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

        Done once the high watermark reaches it; if the maximal ISR is below
        ``min.insync.replicas`` by then, the records are in but under-replicated:
        NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka answers.
        """
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.partition_state.maximal_isr) < self.log.config.min_insync_replicas:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE

    # -- the ISR -------------------------------------------------------------------------
    def _is_isr_eligible(self, replica_id: int) -> bool:
        """ZooKeeper mode's rule: a replica may join (or hold the HW as about to join) only
        while the controller reports its broker alive."""
        alive = self._is_broker_alive
        return alive is None or alive(replica_id)

    def maybe_expand_isr(self, follower: FollowerState) -> bool:
        """Propose ``follower`` for the ISR if it has caught up; True if proposed.

        It must have reached the HW and the start of this leader's epoch (KAFKA-7128:
        else committed records between the HW and the LEO could be lost were it elected
        before fetching them). One change at a time; none without a controller to ask.
        """
        state = self.partition_state
        replica_id = follower.replica_id
        if (self.alter_partition is None or not isinstance(state, CommittedPartitionState)
                or replica_id in state.isr or not self.is_leader):
            return False
        start = self.leader_epoch_start_offset
        end = follower.log_end_offset
        if start is None or end < start or end < self.log.high_watermark or not self._is_isr_eligible(replica_id):
            return False
        logger.info("%s-%d: expanding the ISR from %s to add %d", self.topic, self.index, sorted(state.isr), replica_id)
        proposed = PendingExpandIsr(replica_id, self._leader_and_isr(state.isr | {replica_id}), state)
        self._submit(proposed)
        return True

    def out_of_sync_replicas(self, now_ms: int, lag_ms: int) -> frozenset[int]:
        """ISR members that have not caught up to the leader's LEO for ``lag_ms``
        (none while a change is in flight); a member never heard of is out of sync."""
        state = self.partition_state
        if state.is_inflight:
            return frozenset()
        leader_end = self.log.log_end_offset
        out = set()
        for replica_id in state.isr:
            if replica_id == self.local_broker_id:
                continue
            follower = self.followers.get(replica_id)
            if follower is None or not follower.is_caught_up(leader_end, now_ms, lag_ms):
                out.add(replica_id)
        return frozenset(out)

    def maybe_shrink_isr(self, now_ms: int | None = None, lag_ms: int | None = None) -> bool:
        """Propose the out-of-sync members' removal (Kafka's maybeShrinkIsr, periodic);
        True if proposed. The HW keeps waiting for them until the controller commits it."""
        state = self.partition_state
        if self.alter_partition is None or not self.is_leader or not isinstance(state, CommittedPartitionState):
            return False
        now = self._clock_ms() if now_ms is None else now_ms
        out = self.out_of_sync_replicas(now, self.replica_lag_time_max_ms if lag_ms is None else lag_ms)
        if not out:
            return False
        logger.info("%s-%d: shrinking the ISR from %s to %s (leader LEO %d, HW %d; out of sync: %s)",
                    self.topic, self.index, sorted(state.isr), sorted(state.isr - out),
                    self.log.log_end_offset, self.log.high_watermark,
                    ", ".join(f"{r} (LEO {self._follower_end(r)}, caught up at {self._follower_caught_up(r)})"
                              for r in sorted(out)))
        proposed = PendingShrinkIsr(out, self._leader_and_isr(state.isr - out), state)
        self._submit(proposed)
        return True

    def _follower_end(self, replica_id: int) -> int:
        follower = self.followers.get(replica_id)
        return UNKNOWN_OFFSET if follower is None else follower.log_end_offset

    def _follower_caught_up(self, replica_id: int) -> int:
        follower = self.followers.get(replica_id)
        return 0 if follower is None else follower.last_caught_up_ms

    def _leader_and_isr(self, isr: frozenset[int]) -> LeaderAndIsr:
        # Imported here: only a cluster's leader proposes ISR changes, and one node never
        # loads strom.cluster.
        from strom.cluster.zk_data import LeaderAndIsr

        return LeaderAndIsr(self.local_broker_id, self.leader_epoch, tuple(sorted(isr)), self.partition_epoch)

    def _submit(self, proposed: PendingPartitionChange) -> None:
        """Make ``proposed`` the pending state and send it; its answer is applied only if
        the state is still this proposal by then (a LeaderAndIsr may have replaced it)."""
        sink = self.alter_partition
        assert sink is not None
        self.partition_state = proposed
        future = sink.submit(self.topic_partition, proposed.sent_leader_and_isr)
        future.add_done_callback(lambda done: self._on_alter_partition_answer(proposed, done))

    def _on_alter_partition_answer(self, proposed: PendingPartitionChange,
                                   done: asyncio.Future[LeaderAndIsr | ErrorCode]) -> None:
        if done.cancelled() or self.partition_state is not proposed:
            return
        answer = done.result()
        if isinstance(answer, ErrorCode):
            if self._alter_partition_failed(proposed, answer):
                # The same proposal again, after retry.backoff.ms: a controller that keeps
                # refusing (one lagging behind ZooKeeper says NOT_CONTROLLER) is not hammered.
                asyncio.get_running_loop().call_later(ALTER_PARTITION_RETRY_BACKOFF_MS / 1000,
                                                      self._retry_alter_partition, proposed)
            return
        if answer.leader_epoch != self.leader_epoch:
            logger.info("%s-%d: ignoring the committed ISR %s: leader epoch %d, ours is %d",
                        self.topic, self.index, answer.isr, answer.leader_epoch, self.leader_epoch)
            return
        if answer.partition_epoch < self.partition_epoch:
            logger.info("%s-%d: ignoring the committed ISR %s: partition epoch %d, ours is %d",
                        self.topic, self.index, answer.isr, answer.partition_epoch, self.partition_epoch)
            return
        self.partition_state = CommittedPartitionState(frozenset(answer.isr))
        self.partition_epoch = answer.partition_epoch
        logger.info("%s-%d: ISR is now %s (partition epoch %d)", self.topic, self.index, sorted(answer.isr),
                    answer.partition_epoch)
        self.maybe_advance_high_watermark()

    def _retry_alter_partition(self, proposed: PendingPartitionChange) -> None:
        if self.partition_state is proposed and self.alter_partition is not None:
            self._submit(proposed)

    def _alter_partition_failed(self, proposed: PendingPartitionChange, error: ErrorCode) -> bool:
        """Kafka's handleAlterPartitionError: True to send the same proposal again."""
        if error in NOT_ATTEMPTED:
            self.partition_state = proposed.last_committed_state
            logger.info("%s-%d: ISR change %s not attempted (%s); free to propose again",
                        self.topic, self.index, proposed.sent_leader_and_isr.isr, error.name)
            return False
        if error in AWAIT_METADATA:
            logger.info("%s-%d: ISR change %s refused (%s); waiting for the controller's LeaderAndIsr",
                        self.topic, self.index, proposed.sent_leader_and_isr.isr, error.name)
            return False
        logger.warning("%s-%d: ISR change %s failed with %s; retrying", self.topic, self.index,
                       proposed.sent_leader_and_isr.isr, error.name)
        return True

    # -- append --------------------------------------------------------------------------
    def append_as_leader(self, records: bytes | bytearray | memoryview, required_acks: int = 1,
                         verification: Verification | None = None, *, from_client: bool = True) -> AppendResult:
        """Append a producer's batches stamped with our epoch; raises ``StorageError``.

        acks=-1 is refused before appending while the committed ISR is below
        ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS; a pending expansion does not count).
        A verified transactional batch (``verification``, KIP-890) is refused with
        INVALID_TXN_STATE unless its transaction is open here or its guard still stands.
        """
        if self.leader_id != self.local_broker_id:  # not is_leader: a call less per produce
            raise StorageError(f"broker {self.local_broker_id} does not lead {self.topic}-{self.index}",
                               ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log = self.log
        config = log.config
        if required_acks == -1 and len(self.partition_state.isr) < config.min_insync_replicas:
            raise StorageError(
                f"{self.topic}-{self.index} has {len(self.partition_state.isr)} in-sync replicas, "
                f"min.insync.replicas is {config.min_insync_replicas}", ErrorCode.NOT_ENOUGH_REPLICAS)
        if config.compacts or config.bounds_timestamps:
            _validate_records(self.topic, self.index, records, config, log.clock())
        if verification is not None:
            self.verification_guards.check(verification, self.topic, self.index)
        result = log.append(records, leader_epoch=self.leader_epoch, from_client=from_client)
        if self.verification_guards.guards:  # a producer's append (a marker too) ends its guard
            self.verification_guards.appended(records)
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
        follower = self._follower_or_error(replica_id)
        # The LEO before the read: appends after it must not keep the follower from catching up.
        leader_end = self.log.log_end_offset
        result = self.log.read(offset, max_bytes, isolation=FetchIsolation.LOG_END,
                               min_one_message=min_one_message)
        self.update_follower_fetch_state(follower, offset, leader_end)
        return result

    def _follower_or_error(self, replica_id: int) -> FollowerState:
        follower = self.followers.get(replica_id)
        if follower is None or not self.is_leader:
            raise StorageError(f"fetch from broker {replica_id}, not a replica of {self.topic}-{self.index}",
                               ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return follower

    def diverging_epoch(self, replica_id: int, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """A follower's fetch checked against this log (Kafka's readRecords, Fetch v12+):
        (epoch, end offset) to truncate to if its ``last_fetched_epoch`` ended here before
        ``fetch_offset`` or is not an epoch of ours, else None. Raises OFFSET_OUT_OF_RANGE
        when the epoch's end cannot be known or the offset is below the log start."""
        self._follower_or_error(replica_id)
        log = self.log
        epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0 or end_offset < 0:
            raise StorageError(f"{self.topic}-{self.index}: no end offset for epoch {last_fetched_epoch}",
                               ErrorCode.OFFSET_OUT_OF_RANGE)
        if fetch_offset < log.log_start_offset:
            raise StorageError(f"{self.topic}-{self.index}: fetch offset {fetch_offset} is below the log "
                               f"start {log.log_start_offset}", ErrorCode.OFFSET_OUT_OF_RANGE)
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def update_follower_fetch_state(self, follower: FollowerState, fetch_offset: int,
                                    leader_end_offset: int | None = None) -> None:
        """A follower fetched from ``fetch_offset`` (its LEO) when ours was
        ``leader_end_offset``: record it, maybe propose it for the ISR, maybe move the HW."""
        previous_end = follower.log_end_offset
        leader_end = self.log.log_end_offset if leader_end_offset is None else leader_end_offset
        follower.update_fetch_state(fetch_offset, self._clock_ms(), leader_end)
        if follower.replica_id not in self.partition_state.isr:
            self.maybe_expand_isr(follower)
        if previous_end != fetch_offset:
            self.maybe_advance_high_watermark()


    # -- offsets -------------------------------------------------------------------------
    def fetch_offset_for_timestamp(self, timestamp: int, committed: bool, *,
                                   client: bool = True) -> TimestampOffset | None:
        """ListOffsets: earliest (-2, and -4 earliest local), latest (-1), max timestamp (-3),
        or the first record at or after ``timestamp``, within what consumers may read;
        None if there is none.

        KIP-207: while this leader's HW is still below the start of its epoch (just
        elected, its followers not caught up), a client asking for the latest offset, or
        for a record that exists only past the HW, gets OFFSET_NOT_AVAILABLE rather than
        an offset that would go backwards once the HW catches up (Kafka's
        fetchOffsetForTimestamp; ``client=False``, the debugging replica, is not checked).
        """
        log = self.log
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):  # no tiered storage: the same
            return TimestampOffset(-1, log.log_start_offset)
        if timestamp < 0 and timestamp not in (LATEST_TIMESTAMP, MAX_TIMESTAMP):
            raise StorageError(f"no such ListOffsets timestamp {timestamp}", ErrorCode.INVALID_REQUEST)
        start = self.leader_epoch_start_offset
        lagging = client and start is not None and start > log.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            if lagging:
                self._offset_not_available()
            if not client:  # a follower (or the debugging replica) reads to the log end, as Kafka's
                return TimestampOffset(-1, log.log_end_offset)  # isolation level None
            return TimestampOffset(-1, log.last_stable_offset if committed else log.high_watermark)
        if timestamp == MAX_TIMESTAMP:
            found = self._max_timestamp()
            if found is not None and found.offset >= log.high_watermark:
                if lagging:
                    self._offset_not_available()
                return None
            return found
        found = log.offset_for_timestamp(timestamp)  # None also when the record is past the HW
        if found is None and lagging and any(s.max_timestamp >= timestamp and s.next_offset > log.log_start_offset
                                             for s in log.segments):
            self._offset_not_available()
        return found

    def _offset_not_available(self) -> None:
        raise StorageError(
            f"{self.topic}-{self.index}: the high watermark {self.log.high_watermark} is below the start "
            f"{self.leader_epoch_start_offset} of leader epoch {self.leader_epoch}", ErrorCode.OFFSET_NOT_AVAILABLE)

    def _max_timestamp(self) -> TimestampOffset | None:
        """KIP-734: the record with the largest timestamp (the caller drops it if consumers
        may not read it yet).

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
        return segment.find_offset_by_timestamp(segment.max_timestamp, start)

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
