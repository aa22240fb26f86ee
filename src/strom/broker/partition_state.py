"""The leader's view of replication for one partition: each follower's fetch state and the
ISR as Kafka's ``Partition`` keeps it (``Replica``, ``CommittedPartitionState``,
``PendingExpandIsr``, ``PendingShrinkIsr``), and the seam ISR changes leave through.

The ISR is either committed (the controller's word) or has exactly one change in flight
to the controller (KIP-497). The *maximal ISR* is what the high watermark and acks=-1
wait for: a pending expansion is counted at once (waiting for one more replica is always
safe), a pending shrink's leavers are still counted until the controller commits it (a
leader that stopped waiting for them first could acknowledge a record only it has, then
lose it to a controller that kept them in). ``Partition`` holds these and moves between
them; nothing here does I/O.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.cluster.zk_data import LeaderAndIsr

UNKNOWN_OFFSET = -1  # a follower's LEO before its first fetch to this leader
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000  # replica.lag.time.max.ms


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower: from its Fetch requests (Kafka's ``Replica``).

    ``last_caught_up_ms`` is the last time the follower had everything the leader had:
    a fetch at or past the leader's LEO at that moment makes it now; a fetch at or past
    the LEO the leader had at the follower's previous fetch makes it that fetch's time.
    """

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET

    def update_fetch_state(self, fetch_offset: int, fetch_ms: int, leader_end_offset: int) -> None:
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, fetch_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_ms = fetch_ms

    def reset(self, now_ms: int, leader_end_offset: int, is_new_leader: bool, in_sync: bool) -> None:
        """A new leader epoch: an ISR member counts as caught up now, anyone else not at all
        (so a follower out of the ISR does not hold the HW back before it fetches)."""
        self.last_caught_up_ms = now_ms if in_sync else 0
        if is_new_leader:  # what the follower had from an earlier reign of ours is stale
            self.log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_ms = 0
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_ms = now_ms if in_sync else 0

    def is_caught_up(self, leader_end_offset: int, now_ms: int, lag_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_ms <= lag_ms


# -- the ISR state (Kafka's PartitionState) ------------------------------------------------
@dataclass(frozen=True, slots=True)
class CommittedPartitionState:
    """The ISR the controller committed; no change in flight."""

    isr: frozenset[int]

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr

    @property
    def is_inflight(self) -> bool:
        return False


@dataclass(frozen=True, slots=True, eq=False)
class PendingExpandIsr:
    """``new_in_sync_replica_id`` proposed to join: counted at once (waiting for it is safe)."""

    new_in_sync_replica_id: int
    sent_leader_and_isr: LeaderAndIsr
    last_committed_state: CommittedPartitionState

    @property
    def isr(self) -> frozenset[int]:
        return self.last_committed_state.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr | {self.new_in_sync_replica_id}

    @property
    def is_inflight(self) -> bool:
        return True


@dataclass(frozen=True, slots=True, eq=False)
class PendingShrinkIsr:
    """``out_of_sync_replica_ids`` proposed to leave: still counted until committed (a leader
    that stopped waiting for them before the controller agreed could lose acked records)."""

    out_of_sync_replica_ids: frozenset[int]
    sent_leader_and_isr: LeaderAndIsr
    last_committed_state: CommittedPartitionState

    @property
    def isr(self) -> frozenset[int]:
        return self.last_committed_state.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr

    @property
    def is_inflight(self) -> bool:
        return True


PendingPartitionChange = PendingExpandIsr | PendingShrinkIsr
PartitionState = CommittedPartitionState | PendingPartitionChange


class AlterPartitionSink(Protocol):
    """Where ISR changes go (``AlterPartitionManager``): the future has the committed state
    or the partition's error."""

    def submit(self, topic_partition: TopicPartition, leader_and_isr: LeaderAndIsr
               ) -> asyncio.Future[LeaderAndIsr | ErrorCode]: ...


# Errors after which the proposal stays pending until the controller's LeaderAndIsr
# replaces it (Kafka's handleAlterPartitionError): our view is stale, retrying cannot help.
AWAIT_METADATA = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.INVALID_REQUEST, ErrorCode.NEW_LEADER_ELECTED,
})
# Errors that mean "not done, nothing changed": back to the committed state, free to propose again.
NOT_ATTEMPTED = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000
