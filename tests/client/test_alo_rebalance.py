"""The concurrent consumer through rebalances, against a running Strom broker.

A second member joins mid-stream and later leaves. Checked: no record is lost; a member
never starts a record of a partition it does not own (revoked partitions' buffered
records are dropped, not processed); the revocation's commit lands, with the eager
protocol and the cooperative one; and the group's offsets end at the log end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from strom.alo import ParallelConsumer
from strom.client.admin import AsyncAdmin
from strom.client.admin_types import NewTopic
from strom.client.consumer import AsyncConsumer
from strom.client.fetcher import ConsumerRecord
from strom.client.producer import AsyncProducer
from tests.support.broker_process import BrokerProcess

PARTITIONS = 6
RECORDS = 3_000


class Member:
    """One ParallelConsumer and a log of what it started and owned, in loop order."""

    def __init__(self, name: str, bootstrap: str, group: str, strategy: str, events: list[tuple[str, ...]]) -> None:
        self.name = name
        self.events = events
        self.owned: set[tuple[str, int]] = set()
        self.started = 0
        self.violations: list[str] = []
        config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "partition.assignment.strategy": strategy,
                  "session.timeout.ms": 10_000, "heartbeat.interval.ms": 300}
        self.consumer = ParallelConsumer(config, self.handle, ordering="key", max_concurrency=8,
                                         max_buffered_records_per_partition=200, commit_interval_ms=100,
                                         listener=self)

    async def handle(self, record: ConsumerRecord) -> None:
        tp = (record.topic, record.partition)
        if tp not in self.owned:
            self.violations.append(f"{self.name} started {tp}@{record.offset} without owning it")
        self.started += 1
        self.events.append((self.name, "start", str(record.partition), str(record.offset)))
        await asyncio.sleep(0.003)
        self.events.append((self.name, "done", str(record.partition), str(record.offset)))

    def on_partitions_assigned(self, partitions: frozenset[tuple[str, int]]) -> None:
        self.owned |= partitions

    def on_partitions_revoked(self, partitions: frozenset[tuple[str, int]]) -> None:
        self.owned -= partitions
        self.events.append((self.name, "revoked", *sorted(str(p) for _, p in partitions)))

    def on_partitions_lost(self, partitions: frozenset[tuple[str, int]]) -> None:
        self.owned -= partitions


async def until(condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_member_joins_and_leaves_mid_stream_and_nothing_is_lost(strom_broker: BrokerProcess,
                                                                   strategy: str) -> None:
    bootstrap, topic, group = strom_broker.bootstrap, f"alo-rebalance-{strategy}", f"g-{strategy}"

    async def main() -> None:
        async with AsyncAdmin({"bootstrap.servers": bootstrap}) as admin:
            await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        async with AsyncProducer({"bootstrap.servers": bootstrap}) as producer:
            for i in range(RECORDS):
                await producer.produce(topic, f"v{i}".encode(), f"k{i % 60}".encode())
            await producer.flush()
        events: list[tuple[str, ...]] = []
        a = Member("a", bootstrap, group, strategy, events)
        b = Member("b", bootstrap, group, strategy, events)

        def done() -> set[tuple[int, int]]:
            return {(int(e[2]), int(e[3])) for e in events if e[1] == "done"}

        async with a.consumer:
            a.consumer.subscribe([topic])
            await a.consumer.start()
            await until(lambda: len(done()) >= 300)
            async with b.consumer:
                b.consumer.subscribe([topic])
                await b.consumer.start()
                await until(lambda: b.started >= 200 and 0 < len(a.owned) < PARTITIONS)
            # b left: its partitions come back to a, which finishes the topic.
            await until(lambda: len(done()) >= RECORDS)
            metrics = a.consumer.metrics()
            assert metrics.dropped > 0, "a's revoked partitions had nothing buffered: the drop went untested"
            assert any(e[0] == "a" and e[1] == "revoked" for e in events)
        async with AsyncAdmin({"bootstrap.servers": bootstrap}) as admin:
            committed = await admin.list_consumer_group_offsets(group)
        async with AsyncConsumer({"bootstrap.servers": bootstrap}) as plain:
            ends = await plain.end_offsets([(topic, p) for p in range(PARTITIONS)])
        assert {tp: c.offset for tp, c in committed.items()} == ends
        assert done() == {(p, o) for (_, p), end in ends.items() for o in range(end)}
        for member in (a, b):
            assert not member.violations, member.violations[:5]
            # Every revocation's commit landed (a periodic commit racing a rebalance may
            # be refused; the next interval commits again).
            assert member.consumer.metrics().revocation_commit_failures == 0
            assert member.consumer.metrics().commits > 0

    asyncio.run(main())
