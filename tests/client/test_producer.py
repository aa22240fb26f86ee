"""AsyncProducer against Strom and Tansu: codecs, keyed placement, acks, idempotent
retries through a proxy that loses answers, and a broker restart mid-stream."""

from __future__ import annotations

import asyncio
import time

import confluent_kafka
import pytest

from strom.client.consumer import AsyncConsumer
from strom.client.fetcher import ConsumerRecord
from strom.client.partitioner import partition_for_key
from strom.client.producer import AsyncProducer
from tests.client.proxy import DroppingProxy
from tests.support.broker_process import BrokerProcess
from tests.support.clients import Kafka, create_topic


async def read_back(bootstrap: str, topic: str, partitions: int, count: int,
                    timeout: float = 20) -> list[ConsumerRecord]:
    async with AsyncConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        records: list[ConsumerRecord] = []
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            records += await consumer.poll(timeout_ms=300)
        records += await consumer.poll(timeout_ms=300)  # anything beyond count is a duplicate
        return records


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_with_every_codec(kafka: Kafka, codec: str) -> None:
    topic = kafka.topic(f"codec-{codec}")
    create_topic(kafka, topic, 3)

    async def main() -> None:
        async with AsyncProducer({"bootstrap.servers": kafka.bootstrap, "compression.type": codec,
                                  "linger.ms": 20}) as producer:
            futures = [await producer.send(topic, f"value-{i}".encode() * 3, f"key-{i}".encode(),
                                           headers=[("n", str(i).encode()), ("none", None)],
                                           timestamp_ms=1_700_000_000_000 + i)
                       for i in range(3000)]
            await producer.flush()
            sent = {}
            for i, future in enumerate(futures):
                metadata = await future
                assert metadata.topic == topic and metadata.timestamp == 1_700_000_000_000 + i
                sent[(metadata.partition, metadata.offset)] = i
        records = await read_back(kafka.bootstrap, topic, 3, 3000)
        assert len(records) == 3000
        for record in records:
            i = sent[(record.partition, record.offset)]
            assert record.key == f"key-{i}".encode() and record.value == f"value-{i}".encode() * 3
            assert record.headers == (("n", str(i).encode()), ("none", None))
            assert record.timestamp == 1_700_000_000_000 + i

    asyncio.run(main())


def test_keyed_records_land_where_librdkafka_murmur2_random_puts_them(kafka: Kafka) -> None:
    topic = kafka.topic("placement")
    create_topic(kafka, topic, 7)
    keys = [f"user-{i}".encode() for i in range(300)] + [b"", b"\x00\xff" * 9]
    librdkafka: dict[bytes, int] = {}

    def delivered(error: object, message: confluent_kafka.Message) -> None:
        assert error is None
        librdkafka[message.key()] = message.partition()

    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "partitioner": "murmur2_random"})
    for key in keys:
        producer.produce(topic, value=b"c", key=key, on_delivery=delivered)
    assert producer.flush(15) == 0

    async def main() -> None:
        async with AsyncProducer({"bootstrap.servers": kafka.bootstrap}) as ours:
            futures = {key: await ours.send(topic, b"s", key) for key in keys}
            placed = {key: (await future).partition for key, future in futures.items()}
        assert placed == librdkafka
        assert all(placed[key] == partition_for_key(key, 7) for key in keys)

    asyncio.run(main())


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_acks(kafka: Kafka, acks: int) -> None:
    topic = kafka.topic(f"acks{acks}")
    create_topic(kafka, topic, 1)

    async def main() -> None:
        async with AsyncProducer({"bootstrap.servers": kafka.bootstrap, "acks": "all" if acks == -1 else acks,
                                  "enable.idempotence": acks == -1}) as producer:
            futures = [await producer.send(topic, str(i).encode()) for i in range(500)]
            await producer.flush()
            offsets = [(await f).offset for f in futures]
        assert offsets == ([-1] * 500 if acks == 0 else list(range(500)))
        records = await read_back(kafka.bootstrap, topic, 1, 500)
        assert [r.value for r in records] == [str(i).encode() for i in range(500)]

    asyncio.run(main())


def test_idempotent_retry_after_a_lost_answer_writes_nothing_twice(kafka: Kafka) -> None:
    topic = kafka.topic("lost-answer")
    create_topic(kafka, topic, 2)
    proxy = DroppingProxy(kafka.bootstrap, drop_produce_answers={2, 5, 9})
    try:
        async def main() -> None:
            async with AsyncProducer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 2,
                                      "batch.size": 2000, "retry.backoff.ms": 20}) as producer:
                futures = []
                for i in range(2000):
                    futures.append(await producer.send(topic, str(i).encode(), partition=i % 2))
                    if i % 100 == 0:
                        await asyncio.sleep(0.005)  # spread the records over many requests
                await producer.flush()
                for future in futures:
                    await future
            assert proxy.dropped == 3
            records = await read_back(kafka.bootstrap, topic, 2, 2000)
            for partition in (0, 1):
                values = [int(r.value or b"") for r in records if r.partition == partition]
                assert values == list(range(partition, 2000, 2))  # each once, in order
                offsets = [r.offset for r in records if r.partition == partition]
                assert offsets == list(range(1000))

        asyncio.run(main())
    finally:
        proxy.close()


def test_callbacks_fire_in_order_and_flush_waits(kafka: Kafka) -> None:
    topic = kafka.topic("callbacks")
    create_topic(kafka, topic, 1)
    seen: list[tuple[int, int]] = []

    async def main() -> None:
        async with AsyncProducer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50}) as producer:
            for i in range(100):
                await producer.produce(topic, str(i).encode(),
                                       callback=lambda md, err, i=i: seen.append((i, md.offset if md else -1)))
            await producer.flush()
            assert seen == [(i, i) for i in range(100)]

    asyncio.run(main())


def test_keyless_records_fill_one_sticky_batch_at_a_time_and_survive_new_metadata(kafka: Kafka) -> None:
    """produce()'s per-record path appends key-less records to a cached sticky batch;
    every record must still land once, in order within its partition, with its
    CreateTime, also across a metadata refresh (which drops the cache)."""
    topic = kafka.topic("sticky")
    create_topic(kafka, topic, 3)

    async def main() -> None:
        async with AsyncProducer({"bootstrap.servers": kafka.bootstrap, "batch.size": 1024,
                                  "linger.ms": 1000}) as producer:
            start = time.time_ns() // 1_000_000
            for i in range(3000):
                await producer.produce(topic, b"%06d" % i + b"." * 94)
                if i == 1500:
                    assert producer._cluster is not None
                    await producer._cluster.refresh()  # new metadata: the sticky cache is stale
            await producer.flush()
            end = time.time_ns() // 1_000_000
        records = await read_back(kafka.bootstrap, topic, 3, 3000)
        numbers = [int(bytes(r.value or b"")[:6]) for r in records]
        assert sorted(numbers) == list(range(3000))
        for partition in range(3):
            mine = [(r.offset, int(bytes(r.value or b"")[:6])) for r in records if r.partition == partition]
            assert [n for _, n in sorted(mine)] == sorted(n for _, n in mine)  # produce order kept
        assert all(start <= r.timestamp <= end for r in records)
        # Sticky: consecutive records share a partition until their batch (~9 records of
        # 1 KiB) is full, so the partition changes a few hundred times, not ~3000.
        where = {int(bytes(r.value or b"")[:6]): r.partition for r in records}
        switches = sum(where[i] != where[i + 1] for i in range(2999))
        assert switches < 3000 / 4

    asyncio.run(main())


def test_produce_many_writes_what_a_produce_loop_writes(kafka: Kafka) -> None:
    """Key-less values in bulk (appended without a call per record), then keyed ones;
    every record once, keyed ones where murmur2 puts them, order kept per partition."""
    topic = kafka.topic("many")
    create_topic(kafka, topic, 3)
    values = [b"%05d" % i + b"-" * (i % 300) for i in range(5000)]
    keys = [b"key-%d" % (i % 17) for i in range(1000)]

    async def main() -> None:
        async with AsyncProducer({"bootstrap.servers": kafka.bootstrap, "batch.size": 4096}) as producer:
            await producer.produce_many(topic, values[:4000])
            await producer.produce_many(topic, values[4000:], keys)
            with pytest.raises(ValueError):
                await producer.produce_many(topic, values[:2], keys[:1])
            await producer.flush()
        records = await read_back(kafka.bootstrap, topic, 3, 5000)
        assert sorted(bytes(r.value or b"") for r in records) == sorted(values)
        for record in records:
            number = int(bytes(record.value or b"")[:5])
            if number >= 4000:
                assert record.key == keys[number - 4000]
                assert record.partition == partition_for_key(keys[number - 4000], 3)
            else:
                assert record.key is None
        for partition in range(3):
            mine = sorted((r.offset, int(bytes(r.value or b"")[:5])) for r in records if r.partition == partition)
            assert [n for _, n in mine] == sorted(n for _, n in mine)

    asyncio.run(main())


def test_producer_and_consumer_ride_out_a_broker_restart(strom_broker: BrokerProcess) -> None:
    topic = "restart"

    async def main() -> None:
        async with AsyncProducer({"bootstrap.servers": strom_broker.bootstrap, "linger.ms": 1,
                                  "retry.backoff.ms": 50, "reconnect.backoff.ms": 50}) as producer, \
                AsyncConsumer({"bootstrap.servers": strom_broker.bootstrap, "auto.offset.reset": "earliest",
                               "reconnect.backoff.ms": 50}) as consumer:
            await producer.send_and_wait(topic, b"first")
            consumer.assign([(topic, 0)])
            consumed: list[bytes | None] = [r.value for r in await consumer.poll(5000)]
            futures = []
            for i in range(400):
                futures.append(await producer.send(topic, str(i).encode()))
                if i == 200:
                    await producer.flush()
                    await asyncio.to_thread(strom_broker.restart)
                await asyncio.sleep(0.001)
            await producer.flush()
            offsets = [(await f).offset for f in futures]
            assert offsets == list(range(1, 401))
            deadline = time.monotonic() + 20
            while len(consumed) < 401 and time.monotonic() < deadline:
                consumed += [r.value for r in await consumer.poll(500)]
            assert consumed == [b"first"] + [str(i).encode() for i in range(400)]

    asyncio.run(main())
