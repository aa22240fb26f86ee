"""AsyncConsumer without a group (assign/seek/positions/offsets), against Strom and Tansu."""

from __future__ import annotations

import asyncio
import time

import confluent_kafka

from strom.client.consumer import AsyncConsumer
from tests.support.clients import Kafka, create_topic


def produce(kafka: Kafka, topic: str, count: int, partition: int = 0, *, timestamp: int | None = None,
            compression: str = "none") -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5,
                                         "compression.type": compression})
    for i in range(count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=partition,
                         headers=[("h", f"{i}".encode())], timestamp=timestamp or 0)
    assert producer.flush(15) == 0


async def consume_all(consumer: AsyncConsumer, count: int, timeout: float = 15) -> list:  # type: ignore[type-arg]
    records = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        records += await consumer.poll(timeout_ms=500)
    return records


def test_assign_reads_every_record_in_order(kafka: Kafka) -> None:
    topic = kafka.topic("assign")
    create_topic(kafka, topic, 2)
    produce(kafka, topic, 300, 0, compression="lz4")
    produce(kafka, topic, 200, 1)

    async def main() -> None:
        async with AsyncConsumer({"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest",
                                  "max.poll.records": 64}) as consumer:
            consumer.assign([(topic, 0), (topic, 1)])
            records = await consume_all(consumer, 500)
            assert len(records) == 500
            for partition, count in ((0, 300), (1, 200)):
                mine = [r for r in records if r.partition == partition]
                assert [r.offset for r in mine] == list(range(count))
                assert [r.value for r in mine] == [f"v{i}".encode() for i in range(count)]
                assert mine[7].key == b"k7" and mine[7].headers == (("h", b"7"),)
            assert await consumer.position((topic, 0)) == 300
            assert consumer.highwater((topic, 1)) == 200

    asyncio.run(main())


def test_seek_and_offsets(kafka: Kafka) -> None:
    topic = kafka.topic("seek")
    create_topic(kafka, topic)
    produce(kafka, topic, 50, timestamp=1_700_000_000_000)
    produce(kafka, topic, 50, timestamp=1_800_000_000_000)

    async def main() -> None:
        async with AsyncConsumer({"bootstrap.servers": kafka.bootstrap}) as consumer:
            tp = (topic, 0)
            consumer.assign([tp])
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            # Tansu 0.6 answers ListOffsets "latest" with the last batch's base offset + 1
            # and ignores timestamps (confluent-kafka sees the same; tests/compat/FINDINGS.md).
            end, at_time = (100, 50) if kafka.kind == "strom" else (51, 0)
            assert await consumer.end_offsets([tp]) == {tp: end}
            assert await consumer.position(tp) == end  # auto.offset.reset=latest
            assert await consumer.offsets_for_times({tp: 1_750_000_000_000}) == {tp: at_time}
            if kafka.kind == "strom":
                assert await consumer.offsets_for_times({tp: 1_900_000_000_000}) == {tp: None}
            consumer.seek(tp, 42)
            records = await consume_all(consumer, 58)
            assert [r.offset for r in records] == list(range(42, 100))
            consumer.seek_to_beginning(tp)
            assert (await consume_all(consumer, 1))[0].offset == 0

    asyncio.run(main())


def test_pause_and_resume(kafka: Kafka) -> None:
    topic = kafka.topic("pause")
    create_topic(kafka, topic, 2)
    produce(kafka, topic, 20, 0)
    produce(kafka, topic, 20, 1)

    async def main() -> None:
        async with AsyncConsumer({"bootstrap.servers": kafka.bootstrap,
                                  "auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([(topic, 0), (topic, 1)])
            consumer.pause((topic, 1))
            assert consumer.paused() == {(topic, 1)}
            records = await consume_all(consumer, 20)
            assert {r.partition for r in records} == {0} and len(records) == 20
            assert await consumer.poll(timeout_ms=300) == []  # partition 1 stays paused
            consumer.resume((topic, 1))
            records = await consume_all(consumer, 20)
            assert {r.partition for r in records} == {1} and len(records) == 20

    asyncio.run(main())


def test_poll_arrow_matches_poll(kafka: Kafka) -> None:
    topic = kafka.topic("arrow")
    create_topic(kafka, topic, 2)
    produce(kafka, topic, 400, 0, compression="zstd")
    produce(kafka, topic, 300, 1, compression="snappy")

    async def main() -> None:
        config = {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}
        async with AsyncConsumer(config) as consumer:
            consumer.assign([(topic, 0), (topic, 1)])
            expected = {(r.partition, r.offset): r for r in await consume_all(consumer, 700)}
        async with AsyncConsumer(config) as consumer:
            consumer.assign([(topic, 0), (topic, 1)])
            consumer.seek((topic, 0), 10)  # starts inside the first batch
            rows: list[dict] = []  # type: ignore[type-arg]
            deadline = time.monotonic() + 15
            while len(rows) < 690 and time.monotonic() < deadline:
                batch = await consumer.poll_arrow(timeout_ms=500, include_headers=True)
                rows += batch.to_pylist()
            assert await consumer.position((topic, 0)) == 400
        assert len(rows) == 690
        assert min(r["offset"] for r in rows if r["partition"] == 0) == 10
        for row in rows:
            record = expected[(row["partition"], row["offset"])]
            assert (row["topic"], row["key"], row["value"]) == (topic, record.key, record.value)
            assert [(h["key"], h["value"]) for h in row["headers"]] == list(record.headers)
            assert int(row["timestamp"].timestamp() * 1000) == record.timestamp
            assert row["timestampType"] == record.timestamp_type

    asyncio.run(main())
