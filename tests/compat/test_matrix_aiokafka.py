"""aiokafka (asyncio): scenarios 1, 2, 3+4, 5, 6, 7, 8 and 9 of the matrix (see matrix.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import aiokafka
import pytest
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic

from tests.compat.matrix import (
    BASE_TIME,
    GROUP_MS,
    SIX_MIB,
    _big_value,
    _create,
    _produce,
    _read_all,
)
from tests.support.broker_process import BrokerProcess


def test_aiokafka_admin_creates_and_deletes_topics(broker: BrokerProcess) -> None:
    async def run() -> tuple[set[str], set[str]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([AioNewTopic("aio-a", 3, 1), AioNewTopic("aio-b", 1, 1)])
            created = set(await admin.list_topics())
            await admin.delete_topics(["aio-a"])
            return created, set(await admin.list_topics())
        finally:
            await admin.close()

    created, after = asyncio.run(run())
    assert {"aio-a", "aio-b"} <= created
    assert "aio-a" not in after and "aio-b" in after
    assert len(_read_all(broker, "aio-b", 1)) == 0


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_produces_every_codec_plain_and_idempotent(broker: BrokerProcess, codec: str | None) -> None:
    topic = f"aio-{codec}"
    _create(broker, topic, 2)

    async def produce(idempotent: bool) -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, compression_type=codec, enable_idempotence=idempotent, linger_ms=5
        )
        await producer.start()
        try:
            for i in range(200):
                await producer.send(topic, key=b"%s-%d" % (str(idempotent).encode(), i), value=b"v%d " % i * (i % 20 + 1))
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(produce(False))
    asyncio.run(produce(True))
    records = _read_all(broker, topic, 2)
    expected = {b"%s-%d" % (flag, i): b"v%d " % i * (i % 20 + 1) for flag in (b"False", b"True") for i in range(200)}
    assert {key: value for _, _, key, value in records} == expected
    assert len(records) == len(expected)  # nothing written twice


def _aio_consumer(broker: BrokerProcess, group: str, *topics: str) -> aiokafka.AIOKafkaConsumer:
    return aiokafka.AIOKafkaConsumer(
        *topics, bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest", **GROUP_MS,
    )


async def _aio_take(consumer: aiokafka.AIOKafkaConsumer, count: int, seen: list[str]) -> None:
    deadline = time.monotonic() + 20
    while len(seen) < count:
        assert time.monotonic() < deadline, f"gave up after {len(seen)} records"
        batch = await consumer.getmany(timeout_ms=200)
        seen += [record.value.decode() for records in batch.values() for record in records]


def test_aiokafka_group_commit_restart_resume(broker: BrokerProcess) -> None:
    _create(broker, "aio-orders", 2)
    _produce(broker, "aio-orders", [f"a{i}" for i in range(30)], 2)

    async def consume(expected: int) -> tuple[list[str], int]:
        consumer = _aio_consumer(broker, "aio-billing", "aio-orders")
        await consumer.start()
        try:
            seen: list[str] = []
            await _aio_take(consumer, expected, seen)
            await consumer.commit()
            more = await consumer.getmany(timeout_ms=1000)  # anything past the end would show here
            seen += [r.value.decode() for records in more.values() for r in records]
            committed = [await consumer.committed(aiokafka.TopicPartition("aio-orders", p)) for p in (0, 1)]
            return seen, sum(offset or 0 for offset in committed)
        finally:
            await consumer.stop()

    first, committed = asyncio.run(consume(30))
    assert sorted(first) == sorted(f"a{i}" for i in range(30)) and committed == 30
    broker.restart()
    _produce(broker, "aio-orders", [f"b{i}" for i in range(10)], 2)
    second, committed = asyncio.run(consume(10))
    assert sorted(second) == sorted(f"b{i}" for i in range(10))  # resumed: nothing lost, nothing twice
    assert committed == 40


class _CommitOnRevoke(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, consumer: aiokafka.AIOKafkaConsumer, assigned: set[int]) -> None:
        self.consumer = consumer
        self.assigned = assigned

    async def on_partitions_revoked(self, revoked: Any) -> None:
        if revoked:
            await self.consumer.commit()  # hand over exactly what was consumed
        self.assigned -= {tp.partition for tp in revoked}

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.assigned |= {tp.partition for tp in assigned}


def test_aiokafka_two_consumers_rebalance_and_see_every_record_once(broker: BrokerProcess) -> None:
    _create(broker, "aio-events", 4)
    first = [f"e{i}" for i in range(80)]
    second = [f"f{i}" for i in range(80)]
    _produce(broker, "aio-events", first, 4)

    async def run() -> tuple[list[tuple[int, int, int, str]], list[set[int]]]:
        seen: list[tuple[int, int, int, str]] = []
        assigned: list[set[int]] = [set(), set()]
        consumers = [_aio_consumer(broker, "aio-workers") for _ in range(2)]

        async def pump(index: int, until: Callable[[], bool]) -> None:
            deadline = time.monotonic() + 30
            while not until():
                assert time.monotonic() < deadline, f"gave up after {len(seen)} records, {assigned}"
                batch = await consumers[index].getmany(timeout_ms=100)
                seen.extend((index, r.partition, r.offset, r.value.decode()) for rs in batch.values() for r in rs)

        for index, consumer in enumerate(consumers):
            consumer.subscribe(["aio-events"], listener=_CommitOnRevoke(consumer, assigned[index]))
        await consumers[0].start()
        await pump(0, lambda: len(seen) >= 30)
        await consumers[1].start()
        both = lambda: len(assigned[0]) == 2 and len(assigned[1]) == 2  # noqa: E731
        await asyncio.gather(pump(0, both), pump(1, both))
        _produce(broker, "aio-events", second, 4)
        done = lambda: len(seen) >= len(first) + len(second)  # noqa: E731
        await asyncio.gather(pump(0, done), pump(1, done))
        for consumer in consumers:
            await consumer.stop()
        return seen, assigned

    seen, assigned = asyncio.run(run())
    positions = [(p, o) for _, p, o, _ in seen]
    assert len(positions) == len(set(positions)) == len(first) + len(second)
    assert sorted(v for *_, v in seen) == sorted(first + second)
    assert assigned[0].isdisjoint(assigned[1])
    assert {0, 1} == {who for who, _, _, value in seen if value.startswith("f")}


def test_aiokafka_seek_and_offsets_for_times(broker: BrokerProcess) -> None:
    _create(broker, "aio-timed", 1)

    async def run() -> dict[str, Any]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        for i in range(10):
            await producer.send_and_wait("aio-timed", b"%d" % i, timestamp_ms=BASE_TIME + i * 1000)
        await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition("aio-timed", 0)
            consumer.assign([partition])
            found = await consumer.offsets_for_times({partition: BASE_TIME + 4500})
            future = await consumer.offsets_for_times({partition: BASE_TIME + 60_000})
            ends = (await consumer.beginning_offsets([partition]), await consumer.end_offsets([partition]))
            consumer.seek(partition, found[partition].offset)
            batch = await consumer.getone()
            consumer.seek(partition, 2)
            again = await consumer.getone()
            return {"found": found[partition], "future": future[partition], "ends": ends,
                    "at_found": (batch.offset, batch.value, batch.timestamp), "at_two": again.value}
        finally:
            await consumer.stop()

    outcome = asyncio.run(run())
    partition = aiokafka.TopicPartition("aio-timed", 0)
    assert (outcome["found"].offset, outcome["found"].timestamp) == (5, BASE_TIME + 5000)
    assert outcome["future"] is None  # Kafka answers -1: no record at or after
    assert outcome["ends"] == ({partition: 0}, {partition: 10})
    assert outcome["at_found"] == (5, b"5", BASE_TIME + 5000)
    assert outcome["at_two"] == b"2"


def test_aiokafka_headers_null_keys_and_values(broker: BrokerProcess) -> None:
    _create(broker, "aio-edge", 1)

    async def run() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        await producer.send("aio-edge", key=b"tombstone", value=None)
        await producer.send("aio-edge", key=None, value=b"no key")
        await producer.send("aio-edge", value=b"headers", headers=[("h1", b"v1"), ("h2", b""), ("h3", None), ("h1", b"again")])
        await producer.flush()
        await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition("aio-edge", 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            records = [await consumer.getone() for _ in range(3)]
            return [(r.key, r.value, list(r.headers)) for r in records]
        finally:
            await consumer.stop()

    tombstone, keyless, with_headers = asyncio.run(run())
    assert tombstone == (b"tombstone", None, [])
    assert keyless == (None, b"no key", [])
    assert with_headers == (None, b"headers", [("h1", b"v1"), ("h2", b""), ("h3", None), ("h1", b"again")])
    # and as librdkafka reads what aiokafka wrote
    assert [(key, value) for _, _, key, value in _read_all(broker, "aio-edge", 1)][:2] == [
        (b"tombstone", None), (None, b"no key")]


def test_aiokafka_five_mib_message_with_raised_limits(broker: BrokerProcess) -> None:
    _create(broker, "aio-big", 1, {"max.message.bytes": str(SIX_MIB)})
    value = _big_value()

    async def run() -> bytes:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=SIX_MIB + 1024)
        await producer.start()
        await producer.send_and_wait("aio-big", value)
        await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
            max_partition_fetch_bytes=SIX_MIB * 2, fetch_max_bytes=SIX_MIB * 2,
        )
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition("aio-big", 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            record = await asyncio.wait_for(consumer.getone(), 20)
            assert record.value is not None
            return bytes(record.value)
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == value


# --- kafka-python -----------------------------------------------------------------------
