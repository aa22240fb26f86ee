"""The consumer group's partition assignors, under the Java client's names and results.

In the classic group protocol the broker only relays: the group leader's client runs
the assignor every member named in common and sends the result in its SyncGroup. So
a Strom consumer in a group with Java (or librdkafka) consumers must assign exactly as
they would, or members would disagree on who owns what. Each assignor here is a pure
function from the members' subscriptions and the topics' partition counts to each
member's partitions, so it is tested without a broker.

Members are ordered as Java's ``MemberInfo``: static members (with a
``group.instance.id``) first, by instance id, then dynamic members by member id. A
static member keeps its place across restarts, and with it its partitions.

``cooperative-sticky`` (KIP-429) follows the cooperative protocol's two-step rule: a
partition whose owner changes is left out of this generation's assignment; the owner
sees it missing, revokes it and rejoins, and the follow-up rebalance hands it, now
unowned, to its new member. Nobody consumes a partition while another still does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol

from strom.protocol import consumer_protocol
from strom.protocol.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member told the group in JoinGroup (a decoded ConsumerProtocolSubscription)."""

    topics: frozenset[str]
    owned_partitions: frozenset[TopicPartition] = frozenset()
    generation: int = -1
    group_instance_id: str | None = None


Assignment = dict[str, frozenset[TopicPartition]]


class PartitionAssignor(Protocol):
    """An assignor as the coordinator runs it on the leader."""

    name: ClassVar[str]
    #: Whether it can run under the cooperative protocol (KIP-429).
    supports_cooperative: ClassVar[bool]

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> Assignment: ...


def member_order(member_id: str, subscription: Subscription) -> tuple[int, str]:
    """Java's ``MemberInfo`` order: static members by instance id, then dynamic ones by id."""
    if subscription.group_instance_id is not None:
        return (0, subscription.group_instance_id)
    return (1, member_id)


def _sorted_members(subscriptions: Mapping[str, Subscription]) -> list[str]:
    return sorted(subscriptions, key=lambda m: member_order(m, subscriptions[m]))


def _topic_partitions(topics: Iterable[str], partitions_per_topic: Mapping[str, int]) -> list[TopicPartition]:
    return [(topic, p) for topic in sorted(topics) for p in range(partitions_per_topic.get(topic, 0))]


class RangeAssignor:
    """Per topic, contiguous ranges over the topic's subscribers; the first get one extra."""

    name: ClassVar[str] = "range"
    supports_cooperative: ClassVar[bool] = False

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> Assignment:
        result: dict[str, set[TopicPartition]] = {member: set() for member in subscriptions}
        members = _sorted_members(subscriptions)
        topics = {topic for s in subscriptions.values() for topic in s.topics}
        for topic in sorted(topics):
            count = partitions_per_topic.get(topic, 0)
            subscribers = [m for m in members if topic in subscriptions[m].topics]
            per_member, extra = divmod(count, len(subscribers))
            for i, member in enumerate(subscribers):
                start = i * per_member + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                result[member].update((topic, p) for p in range(start, start + length))
        return {member: frozenset(tps) for member, tps in result.items()}


class RoundRobinAssignor:
    """Every topic-partition in order, dealt in turn to the next member subscribed to it."""

    name: ClassVar[str] = "roundrobin"
    supports_cooperative: ClassVar[bool] = False

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> Assignment:
        result: dict[str, set[TopicPartition]] = {member: set() for member in subscriptions}
        members = _sorted_members(subscriptions)
        if not members:
            return {}
        topics = {topic for s in subscriptions.values() for topic in s.topics}
        turn = 0
        for topic, partition in _topic_partitions(topics, partitions_per_topic):
            while topic not in subscriptions[members[turn % len(members)]].topics:
                turn += 1
            result[members[turn % len(members)]].add((topic, partition))
            turn += 1
        return {member: frozenset(tps) for member, tps in result.items()}


class CooperativeStickyAssignor:
    """Balanced, moving as few partitions as it can, revoking before reassigning."""

    name: ClassVar[str] = "cooperative-sticky"
    supports_cooperative: ClassVar[bool] = True

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> Assignment:
        members = _sorted_members(subscriptions)
        owned = valid_owned_partitions(partitions_per_topic, subscriptions)
        topic_sets = {s.topics for s in subscriptions.values()}
        if len(topic_sets) == 1:
            target = _constrained_assign(partitions_per_topic, members, next(iter(topic_sets)), owned)
        else:
            target = _general_assign(partitions_per_topic, members, subscriptions, owned)
        previous_owner = {tp: member for member, tps in owned.items() for tp in tps}
        return {member: frozenset(tp for tp in target[member] if previous_owner.get(tp, member) == member)
                for member in members}


def valid_owned_partitions(partitions_per_topic: Mapping[str, int],
                           subscriptions: Mapping[str, Subscription]) -> dict[str, set[TopicPartition]]:
    """Each member's claims that still hold: subscribed, existing, and not disputed.

    A partition claimed by several members goes to the claim of the highest generation
    (the others missed a rebalance); claims tied at that generation cancel out, as the
    Java client treats such a partition as having no owner.
    """
    claims: dict[TopicPartition, list[tuple[int, str]]] = defaultdict(list)
    for member, subscription in subscriptions.items():
        for topic, partition in subscription.owned_partitions:
            if topic in subscription.topics and 0 <= partition < partitions_per_topic.get(topic, 0):
                claims[(topic, partition)].append((subscription.generation, member))
    owned: dict[str, set[TopicPartition]] = {member: set() for member in subscriptions}
    for tp, claimants in claims.items():
        best = max(generation for generation, _ in claimants)
        winners = [member for generation, member in claimants if generation == best]
        if len(winners) == 1:
            owned[winners[0]].add(tp)
    return owned


def _constrained_assign(partitions_per_topic: Mapping[str, int], members: list[str], topics: frozenset[str],
                        owned: Mapping[str, set[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    """Every member subscribes to the same topics: quotas of ⌊n/c⌋ or ⌈n/c⌉ each.

    Members keep what they own up to ⌊n/c⌋, and the first ``n mod c`` owning more keep
    one extra (any member owning more gains the same by it), which is what makes the
    number of moved partitions minimal.
    """
    all_partitions = _topic_partitions(topics, partitions_per_topic)
    min_quota, max_places = divmod(len(all_partitions), len(members))
    result: dict[str, set[TopicPartition]] = {}
    for member in members:
        mine = sorted(owned[member])
        keep = min_quota
        if len(mine) > min_quota and max_places > 0:
            keep, max_places = min_quota + 1, max_places - 1
        result[member] = set(mine[:keep])
    taken = {tp for tps in result.values() for tp in tps}
    unassigned = iter([tp for tp in all_partitions if tp not in taken])
    for member in members:
        while len(result[member]) < min_quota:
            result[member].add(next(unassigned))
    for member in members:
        if max_places == 0:
            break
        if len(result[member]) == min_quota:
            result[member].add(next(unassigned))
            max_places -= 1
    return result


def _general_assign(partitions_per_topic: Mapping[str, int], members: list[str],
                    subscriptions: Mapping[str, Subscription],
                    owned: Mapping[str, set[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    """Different subscriptions: keep what is owned, place the rest, then even out.

    Free partitions go, those with the fewest eligible members first, to the least
    loaded eligible member; then a partition moves from a member to an eligible one
    holding two or more fewer until no such move exists (Java's notion of balanced).
    Each move lowers the sum of squared loads, so the loop ends.
    """
    rank = {member: i for i, member in enumerate(members)}
    eligible: dict[str, list[str]] = defaultdict(list)
    for member in members:
        for topic in subscriptions[member].topics:
            eligible[topic].append(member)
    result = {member: set(owned[member]) for member in members}
    taken = {tp for tps in result.values() for tp in tps}
    free = [tp for tp in _topic_partitions(eligible, partitions_per_topic) if tp not in taken]
    free.sort(key=lambda tp: (len(eligible[tp[0]]), tp))
    for tp in free:
        receiver = min(eligible[tp[0]], key=lambda m: (len(result[m]), rank[m]))
        result[receiver].add(tp)
    moved = True
    while moved:
        moved = False
        for giver in sorted(members, key=lambda m: (-len(result[m]), rank[m])):
            # Partitions placed this round move first: moving an owned one costs a
            # revocation and a further rebalance before it reaches its new member.
            for tp in sorted(result[giver], key=lambda tp: (tp in owned[giver], tp)):
                receiver = min(eligible[tp[0]], key=lambda m: (len(result[m]), rank[m]))
                if len(result[giver]) - len(result[receiver]) > 1:
                    result[giver].remove(tp)
                    result[receiver].add(tp)
                    moved = True
                    break
            if moved:
                break
    return result


ASSIGNORS: dict[str, PartitionAssignor] = {
    assignor.name: assignor
    for assignor in (RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor())
}


# -- ConsumerProtocol bytes <-> what an assignor reads and returns -------------------------


def decode_subscription(metadata: bytes, group_instance_id: str | None) -> Subscription:
    """A member's ConsumerProtocolSubscription, of any version; no bytes subscribe to nothing."""
    if not metadata:
        return Subscription(frozenset(), group_instance_id=group_instance_id)
    decoded = consumer_protocol.decode_subscription(metadata)
    return Subscription(frozenset(decoded.topics), consumer_protocol.owned_partitions(decoded),
                        decoded.generation_id, group_instance_id)


def encode_assignment(partitions: Collection[TopicPartition]) -> bytes:
    return consumer_protocol.encode_assignment(consumer_protocol.assignment(partitions))


def decode_assignment(data: bytes) -> frozenset[TopicPartition]:
    """The partitions in a SyncGroup answer; empty bytes (no assignment) is none."""
    return frozenset(consumer_protocol.assigned_partitions(consumer_protocol.decode_assignment(data)))
