"""The consumer's group membership against real brokers (Strom and Tansu).

Each member is a coordinator with its own ``Cluster`` and a task that polls it as a
consumer would (``ensure_active_group`` then ``poll_called``), so rebalances happen
the way they do in a consumer: on the member's next poll after a heartbeat hears of
one. Waits are liveness bounds, never timing assertions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from strom.client.cluster import Cluster
from strom.client.config import ConsumerConfig
from strom.client.coordinator import ConsumerCoordinator
from strom.client.offsets import CommitFailedError, OffsetAndMetadata
from strom.protocol.topic_partition import TopicPartition
from tests.support.clients import Kafka

GROUP_SETTINGS: dict[str, object] = {
    "session_timeout_ms": 6000, "heartbeat_interval_ms": 200, "max_poll_interval_ms": 20_000,
    "retry_backoff_ms": 50, "request_timeout_ms": 10_000,
}
_groups = count()


def _create_topic(kafka: Kafka, prefix: str, partitions: int = 6) -> str:
    topic = kafka.topic(prefix)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    return topic


@dataclass
class Recorder:
    """A rebalance listener that checks the callbacks describe a consistent ownership."""

    events: list[tuple[str, frozenset[TopicPartition]]] = field(default_factory=list)
    owned: set[TopicPartition] = field(default_factory=set)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        assert partitions <= self.owned, "revoked partitions it did not own"
        self.owned -= partitions
        self.events.append(("revoked", partitions))

    async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        assert not partitions & self.owned, "assigned partitions it already owned"
        self.owned |= partitions
        self.events.append(("assigned", partitions))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        assert partitions <= self.owned
        self.owned -= partitions
        self.events.append(("lost", partitions))


class Member:
    """A coordinator polled by a task of its own, as a consumer's poll loop would."""

    def __init__(self, kafka: Kafka, group: str, topics: set[str],
                 positions: Callable[[], dict[TopicPartition, OffsetAndMetadata]] | None = None,
                 **settings: object) -> None:
        config = ConsumerConfig.from_properties(
            {**GROUP_SETTINGS, **settings}, bootstrap_servers=kafka.bootstrap, group_id=group)
        self.cluster = Cluster(config)
        self.listener = Recorder()
        self.coordinator = ConsumerCoordinator(self.cluster, config, self.listener, positions=positions)
        self.topics = topics
        self.polling = True
        self.task: asyncio.Task[None] | None = None

    def start(self) -> Member:
        self.task = asyncio.create_task(self._poll_loop())
        return self

    async def _poll_loop(self) -> None:
        while True:
            if self.polling:
                await self.coordinator.ensure_active_group(self.topics)
                self.coordinator.poll_called()
            await asyncio.sleep(0.02)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.coordinator.close()
        await self.cluster.close()

    @property
    def settled(self) -> bool:
        coordinator = self.coordinator
        return not coordinator.need_rejoin and self.listener.owned == coordinator.assignment


async def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait for ``condition`` (a liveness bound, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _share(members: list[Member], partitions: set[TopicPartition]) -> bool:
    """Every member settled in one generation, the partitions split among them."""
    if not all(m.settled for m in members) or len({m.coordinator.generation for m in members}) != 1:
        return False
    owned = [m.coordinator.assignment for m in members]
    return sum(len(a) for a in owned) == len(partitions) and set().union(*owned) == partitions


def _check_no_double_ownership(members: list[Member]) -> None:
    owned = [m.listener.owned for m in members]
    assert sum(len(o) for o in owned) == len(set().union(*owned)), "a partition had two owners at once"


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_members_share_the_partitions_through_leaves_and_joins(kafka: Kafka, assignor: str) -> None:
    topic = _create_topic(kafka, f"share-{assignor}")
    partitions = {(topic, p) for p in range(6)}
    group = f"share-{assignor}-{next(_groups)}"

    async def main() -> None:
        members = [Member(kafka, group, {topic}, partition_assignment_strategy=assignor).start() for _ in range(3)]
        try:
            await until(lambda: _share(members, partitions), "three members sharing six partitions")
            assert all(len(m.coordinator.assignment) == 2 for m in members)
            assert {m.coordinator.protocol_name for m in members} == {assignor}
            leaving = members.pop(1)
            kept = {id(m): m.coordinator.assignment for m in [*members, leaving]}
            await leaving.close()
            assert leaving.listener.events[-1] == ("revoked", kept[id(leaving)])
            await until(lambda: _share(members, partitions), "two members taking over")
            if assignor == "cooperative-sticky":  # sticky: the survivors kept what they had
                assert all(kept[id(m)] <= m.coordinator.assignment for m in members)
            members.append(Member(kafka, group, {topic}, partition_assignment_strategy=assignor).start())
            deadline = time.monotonic() + 30
            while not _share(members, partitions):
                _check_no_double_ownership(members)
                assert time.monotonic() < deadline, "timed out waiting for three members again"
                await asyncio.sleep(0.02)
            assert all(len(m.coordinator.assignment) == 2 for m in members)
            for member in members:
                kinds = [kind for kind, _ in member.listener.events]
                assert kinds[0] == "assigned" and "lost" not in kinds
                if assignor != "cooperative-sticky":  # eager: everything revoked before each join
                    assert all(kinds[i + 1] == "assigned" for i, kind in enumerate(kinds) if kind == "revoked")
        finally:
            for member in members:
                await member.close()

    asyncio.run(asyncio.wait_for(main(), 90))


def test_commit_and_fetch_committed_round_trip(kafka: Kafka) -> None:
    topic = _create_topic(kafka, "commit", partitions=3)
    group = f"commit-{next(_groups)}"

    async def main() -> None:
        member = Member(kafka, group, {topic}).start()
        try:
            await until(lambda: member.settled and len(member.coordinator.assignment) == 3, "joining")
            coordinator = member.coordinator
            assert await coordinator.fetch_committed([(topic, 0)]) == {(topic, 0): None}
            await coordinator.commit({(topic, 0): OffsetAndMetadata(42, "checkpoint é", leader_epoch=0),
                                      (topic, 2): OffsetAndMetadata(7)})
            committed = await coordinator.fetch_committed([(topic, 0), (topic, 1), (topic, 2)])
            assert committed[(topic, 1)] is None and committed[(topic, 2)] == OffsetAndMetadata(7)
            first = committed[(topic, 0)]
            assert first is not None and first.offset == 42
            if kafka.kind == "strom":
                assert first == OffsetAndMetadata(42, "checkpoint é", 0)
            else:  # Tansu 0.6 stores neither the metadata string nor the leader epoch
                assert (first.metadata, first.leader_epoch) == ("", None)
        finally:
            await member.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_auto_commit_commits_positions_at_poll_and_on_close(kafka: Kafka) -> None:
    topic = _create_topic(kafka, "auto", partitions=2)
    group = f"auto-{next(_groups)}"
    positions = {(topic, 0): OffsetAndMetadata(5), (topic, 1): OffsetAndMetadata(9)}

    async def main() -> None:
        member = Member(kafka, group, {topic}, auto_commit_interval_ms=100, positions=lambda: dict(positions))
        member.start()
        try:
            await until(lambda: member.settled and len(member.coordinator.assignment) == 2, "joining")
            await until(lambda: member.coordinator._auto_commit_task is not None, "an auto-commit")
            committed: dict[TopicPartition, OffsetAndMetadata | None] = {}

            async def read() -> None:
                committed.update(await member.coordinator.fetch_committed(list(positions)))

            deadline = time.monotonic() + 20
            while committed != positions and time.monotonic() < deadline:
                await read()
            assert committed == positions
            member.polling = False  # no more polls: only close can commit what comes next
            await asyncio.sleep(0.2)
            positions[(topic, 1)] = OffsetAndMetadata(11)
        finally:
            await member.close()
        reader = Member(kafka, group, {topic})
        try:
            assert await reader.coordinator.fetch_committed(list(positions)) == positions
        finally:
            await reader.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_static_member_restart_gets_its_partitions_back_without_a_rebalance(kafka: Kafka) -> None:
    topic = _create_topic(kafka, "static")
    partitions = {(topic, p) for p in range(6)}
    group = f"static-{next(_groups)}"

    async def main() -> None:
        members = [Member(kafka, group, {topic}, group_instance_id=f"instance-{i}").start() for i in range(3)]
        try:
            await until(lambda: _share(members, partitions), "three static members sharing six partitions")
            restarting = next(m for m in members if m.coordinator.is_leader)  # the hardest case
            others = [m for m in members if m is not restarting]
            before = restarting.coordinator.assignment
            events = {id(m): list(m.listener.events) for m in others}
            generation = others[0].coordinator.generation
            members.remove(restarting)
            await restarting.close()  # a static member does not leave the group
            instance = restarting.coordinator.config.group_instance_id
            members.append(Member(kafka, group, {topic}, group_instance_id=instance).start())
            if kafka.kind == "tansu":
                # Tansu 0.6 has no static membership: the rejoining instance is a new member,
                # and the others are made to rebalance.
                await until(lambda: any(m.coordinator.need_rejoin or m.coordinator.generation != generation
                                        for m in others), "the others rebalancing (Tansu)")
                return
            await until(lambda: members[-1].settled, "the restarted member's join")
            assert members[-1].coordinator.assignment == before
            await asyncio.sleep(1.0)  # several heartbeats: a rebalance would show in them
            assert _share(members, partitions)
            assert all(m.listener.events == events[id(m)] and m.coordinator.generation == generation for m in others)
        finally:
            for member in members:
                await member.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_exceeding_max_poll_interval_leaves_and_the_next_poll_rejoins(kafka: Kafka) -> None:
    topic = _create_topic(kafka, "slow")
    partitions = {(topic, p) for p in range(6)}
    group = f"slow-{next(_groups)}"

    async def main() -> None:
        slow = Member(kafka, group, {topic}, max_poll_interval_ms=1500).start()
        steady = Member(kafka, group, {topic}).start()
        members = [slow, steady]
        try:
            await until(lambda: _share(members, partitions), "two members sharing six partitions")
            held = slow.coordinator.assignment
            # The two may have shared only after a rebalance (one joined first, then a
            # revocation): look at what happens from here on.
            before = len(slow.listener.events)
            slow.polling = False
            await until(lambda: slow.coordinator.member_id == "", "the slow member leaving")
            await until(lambda: steady.settled and steady.coordinator.assignment == partitions,
                        "the steady member taking everything")
            with pytest.raises(CommitFailedError):
                await slow.coordinator.commit({next(iter(held)): OffsetAndMetadata(1)})
            slow.polling = True
            await until(lambda: _share(members, partitions), "the slow member rejoining")
            events = slow.listener.events[before:]
            assert [kind for kind, _ in events][:2] == ["lost", "assigned"] and events[0][1] == held, events
        finally:
            for member in members:
                await member.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_changed_subscription_rejoins_with_the_new_topics(kafka: Kafka) -> None:
    first, second = _create_topic(kafka, "sub-a", 2), _create_topic(kafka, "sub-b", 2)
    group = f"sub-{next(_groups)}"

    async def main() -> None:
        member = Member(kafka, group, {first}).start()
        try:
            await until(lambda: member.settled and member.coordinator.assignment == {(first, 0), (first, 1)},
                        "the first subscription")
            member.topics = {first, second}
            expected = {(t, p) for t in (first, second) for p in range(2)}
            await until(lambda: member.settled and member.coordinator.assignment == expected, "the new topics")
        finally:
            await member.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_group_needs_a_group_id(kafka: Kafka) -> None:
    config = ConsumerConfig(bootstrap_servers=kafka.bootstrap)
    with pytest.raises(ValueError, match=r"group\.id"):
        ConsumerCoordinator(Cluster(config), config)
