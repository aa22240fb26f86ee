"""One classic consumer group: its state, generation, members and committed offsets.

Kafka's ``GroupMetadata``/``MemberMetadata``. The states and their moves::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                 ▲    │ (no member left)                       │ leader's SyncGroup
      └─────────────────┼────┘                                        ▼
                        └───────── join, leave, expiry ───────────  Stable
    any ──delete / offsets gone──▶ Dead

Invariants: ``leader_id`` is a member (or None when there are none); a member awaiting
a JoinGroup answer has ``join_future`` set, one awaiting SyncGroup ``sync_future``;
``static_members`` maps each ``group.instance.id`` to the one member id that owns it.
This is plain state: the coordinator decides the moves and owns the timers.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from strom.broker.group.offsets_topic import GroupMetadataValue, MemberMetadataValue
from strom.protocol import consumer_protocol
from strom.protocol.errors import ProtocolError
from strom.protocol.topic_partition import TopicPartition


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinResult:
    """What a JoinGroup answer carries; ``members`` only for the leader."""

    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class AppendedOffset:
    """A committed offset and where its batch is in ``__consumer_offsets`` (the batch's
    last offset): Kafka's ``CommitRecordMetadataAndOffset``. Of two commits of one
    partition, the one in the later batch wins, whatever order they complete in."""

    offset: OffsetAndMetadata
    batch_offset: int


@dataclass(slots=True, eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    # monotonic seconds after which the member is gone unless it heartbeats
    heartbeat_deadline: float = 0.0
    timer: asyncio.TimerHandle | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.supported_protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """Its most preferred protocol among those every member supports."""
        for name in self.protocol_names():
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True, eq=False)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: dict[str, asyncio.TimerHandle | None] = field(default_factory=dict)
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # where each committed offset's batch is in the log, when known
    offset_batches: dict[TopicPartition, int] = field(default_factory=dict)
    # plain commits appended but not yet replicated, per partition (Kafka's pendingOffsetCommits)
    pending_offset_commits: Counter[TopicPartition] = field(default_factory=Counter)
    # TxnOffsetCommit's offsets per producer id, invisible until their transaction commits
    pending_txn_offsets: dict[int, dict[TopicPartition, AppendedOffset]] = field(default_factory=dict)
    current_state_timestamp: int = -1
    # the JoinGroup wait of the current rebalance (Kafka's DelayedJoin/InitialDelayedJoin)
    join_timer: asyncio.TimerHandle | None = None
    initial_delay: bool = False  # the wait is the initial delay: do not end it early
    new_member_added: bool = False

    # -- states ------------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.current_state_timestamp = now_ms

    # -- members -----------------------------------------------------------------------
    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, new_member_id: str) -> MemberMetadata:
        """The member of ``instance_id`` takes ``new_member_id``; the old id is fenced."""
        old_member_id = self.static_members[instance_id]
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member presenting a member id that is no longer its instance's."""
        if instance_id is None:
            return False
        owner = self.static_members.get(instance_id)
        return owner is not None and owner != member_id

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.is_awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ---------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        counts: Counter[str] = Counter()
        for member in self.members.values():
            counts.update(set(member.protocol_names()))
        return {name for name, count in counts.items() if count == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        candidates = self.candidate_protocols()
        return self.protocol_type == protocol_type and any(name in candidates for name in protocols)

    def select_protocol(self) -> str:
        """Each member votes for its preferred common protocol; most votes wins."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id} has no protocol every member supports")
        votes = Counter(member.vote(candidates) for member in self.members.values())
        best = max(votes.values())
        # ties go to the protocol the longest-standing member prefers, for determinism
        for member in self.members.values():
            choice = member.vote(candidates)
            if votes[choice] == best:
                return choice
        raise AssertionError("unreachable")

    def subscribed_topics(self) -> set[str] | None:
        """Topics of a ``consumer`` group's subscriptions; None if they cannot be known."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            found = _subscription_topics(member.metadata(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return topics

    # -- offsets -----------------------------------------------------------------------
    def apply_offset(self, tp: TopicPartition, appended: AppendedOffset) -> bool:
        """Make ``appended`` the committed offset of ``tp`` unless a commit in a later batch
        already is (Kafka's ``olderThan``); whether it was applied."""
        current = self.offset_batches.get(tp)
        if current is not None and tp in self.offsets and current > appended.batch_offset:
            return False
        self.offsets[tp] = appended.offset
        self.offset_batches[tp] = appended.batch_offset
        return True

    def has_pending_offset_commit(self, tp: TopicPartition) -> bool:
        """An offset of ``tp`` waits for its replication or its transaction's end
        (OffsetFetch's RequireStable answers UNSTABLE_OFFSET_COMMIT for it; Kafka's
        ``hasPendingOffsetCommitsForTopicPartition``)."""
        return tp in self.pending_offset_commits or any(tp in pending for pending in self.pending_txn_offsets.values())

    def complete_pending_txn_offsets(self, producer_id: int, committed: bool) -> int:
        """The transaction of ``producer_id`` ended (its marker is on this group's offsets
        partition): a commit makes its offsets the committed ones, where not older than
        them; an abort drops them. Kafka's ``completePendingTxnOffsetCommit``. Returns the
        number of offsets made visible."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if not committed:
            return 0
        return sum(self.apply_offset(tp, appended) for tp, appended in pending.items())

    def drop_pending_txn_offsets(self, partitions: Iterable[TopicPartition]) -> None:
        """Forget every producer's pending offset of ``partitions`` (OffsetDelete): their
        transaction's commit will not bring them back."""
        for tp in partitions:
            for pending in self.pending_txn_offsets.values():
                pending.pop(tp, None)

    def remove_offset(self, tp: TopicPartition) -> None:
        self.offsets.pop(tp, None)
        self.offset_batches.pop(tp, None)

    # -- persistence -------------------------------------------------------------------
    def to_record(self, assignments: Mapping[str, bytes] | None = None) -> GroupMetadataValue:
        """The group as its ``__consumer_offsets`` value; ``assignments`` (member id →
        assignment) stand for the members' own while a SyncGroup's are being stored."""
        protocol = self.protocol_name
        members = tuple(
            MemberMetadataValue(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=m.assignment if assignments is None else assignments.get(m.member_id, b""),
                rebalance_timeout=m.rebalance_timeout_ms,
                group_instance_id=m.group_instance_id,
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            members=members,
            current_state_timestamp=self.current_state_timestamp,
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> GroupMetadata:
        """A loaded group: Stable with its members if it had any, else Empty (as Kafka)."""
        group = cls(
            group_id,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            current_state_timestamp=value.current_state_timestamp,
        )
        for record in value.members:
            protocols = [(value.protocol, record.subscription)] if value.protocol is not None else []
            group.add(
                MemberMetadata(
                    member_id=record.member_id,
                    group_instance_id=record.group_instance_id,
                    client_id=record.client_id,
                    client_host=record.client_host,
                    rebalance_timeout_ms=record.rebalance_timeout,
                    session_timeout_ms=record.session_timeout,
                    protocol_type=value.protocol_type,
                    supported_protocols=protocols,
                    assignment=record.assignment,
                )
            )
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        return group


def _subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription; None when the bytes cannot be read."""
    try:
        return set(consumer_protocol.decode_subscription(metadata).topics)
    except ProtocolError:
        return None
