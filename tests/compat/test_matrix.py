"""The same scenarios with every real client (issue 6): aiokafka, kafka-python, kafkajs, kcat.

Scenarios: (1) create topics, (2) produce with every codec and with idempotence, (3) consume
with a group and commit, (4) restart the broker and resume from the committed offset,
(5) two consumers in one group rebalance and together see every record once, (6) seek and
offsets-for-times, (7) headers and null keys/values, (8) a 5 MiB message with raised
limits, (9) delete a topic. confluent-kafka (librdkafka) runs them all in test_clients.py
and test_groups.py; this file fills in the other clients, skipping cells another file
already proves (kafka-python create topics: test_admin.py; its group commit and resume:
test_groups.py; kafkajs create, gzip, group commit: test_kafkajs.py; kcat gzip produce,
seek by offset: test_kcat.py). kcat's offsets-for-times is ``-o s@<ms>``, which librdkafka
answers with ListOffsets by timestamp.

Cells no client call can express:
- kcat, create and delete topics: kcat has no admin mode (-L only lists metadata).
- kafkajs, snappy/lz4/zstd: kafkajs ships only gzip; the others need codec packages
  (kafkajs-snappy, kafkajs-lz4, @kafkajs/zstd) that are not installed.
- kafka-python, a null header value: its producer refuses one (TypeError: headers must be
  (str, bytes) tuples); aiokafka and librdkafka send and read them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiokafka
import confluent_kafka
import kafka
import kafka.errors
import pytest
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from confluent_kafka.admin import AdminClient, NewTopic

from tests.compat.broker_process import BrokerProcess

GROUP_MS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}
FIVE_MIB = 5 * 1024 * 1024
SIX_MIB = 6 * 1024 * 1024
BASE_TIME = 1_700_000_000_000
JS = Path(__file__).parent / "js"


def _create(broker: BrokerProcess, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(15)


def _produce(broker: BrokerProcess, topic: str, values: list[str], partitions: int = 1) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for index, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=index % partitions)
    assert producer.flush(15) == 0


def _big_value() -> bytes:
    return b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(FIVE_MIB // 32))


def _read_all(broker: BrokerProcess, topic: str, partitions: int) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record as (partition, offset, key, value), read with librdkafka up to the high watermark."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "reader", "enable.partition.eof": True}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
    records: list[tuple[int, int, bytes | None, bytes | None]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 20
    while len(at_end) < partitions and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            assert message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, message.error()
            at_end.add(message.partition())
            continue
        records.append((message.partition(), message.offset(), message.key(), message.value()))
    consumer.close()
    assert len(at_end) == partitions
    return records


# --- aiokafka ---------------------------------------------------------------------------


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


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_produces_every_codec_plain_and_idempotent(broker: BrokerProcess, codec: str | None) -> None:
    topic = f"kp-{codec}"
    _create(broker, topic, 2)
    expected: dict[bytes, bytes] = {}
    for idempotent in (False, True):
        producer = kafka.KafkaProducer(
            bootstrap_servers=broker.bootstrap, compression_type=codec, enable_idempotence=idempotent,
            acks="all", linger_ms=5,
        )
        for i in range(200):
            key, value = b"%s-%d" % (str(idempotent).encode(), i), b"v%d " % i * (i % 20 + 1)
            producer.send(topic, key=key, value=value)
            expected[key] = value
        producer.flush(15)
        producer.close(5)
    records = _read_all(broker, topic, 2)
    assert {key: value for _, _, key, value in records} == expected
    assert len(records) == len(expected)  # nothing written twice


def test_kafka_python_seek_and_offsets_for_times(broker: BrokerProcess) -> None:
    _create(broker, "kp-timed", 1)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send("kp-timed", b"%d" % i, timestamp_ms=BASE_TIME + i * 1000)
    producer.flush(10)
    producer.close(5)
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    partition = kafka.TopicPartition("kp-timed", 0)
    consumer.assign([partition])
    found = consumer.offsets_for_times({partition: BASE_TIME + 4500})[partition]
    assert (found.offset, found.timestamp) == (5, BASE_TIME + 5000)
    assert consumer.offsets_for_times({partition: BASE_TIME + 60_000})[partition] is None
    assert (consumer.beginning_offsets([partition]), consumer.end_offsets([partition])) == ({partition: 0}, {partition: 10})
    consumer.seek(partition, found.offset)
    record = next(consumer)
    assert (record.offset, record.value, record.timestamp) == (5, b"5", BASE_TIME + 5000)
    consumer.seek(partition, 2)
    assert next(consumer).value == b"2"
    consumer.close()


def test_kafka_python_headers_null_keys_and_values(broker: BrokerProcess) -> None:
    _create(broker, "kp-edge", 1)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("kp-edge", key=b"tombstone", value=None)
    producer.send("kp-edge", key=None, value=b"no key")
    producer.send("kp-edge", value=b"headers", headers=[("h1", b"v1"), ("h2", b""), ("h1", b"again")])
    producer.flush(10)
    producer.close(5)
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    partition = kafka.TopicPartition("kp-edge", 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    tombstone, keyless, with_headers = [next(consumer) for _ in range(3)]
    consumer.close()
    assert (tombstone.key, tombstone.value) == (b"tombstone", None)
    assert (keyless.key, keyless.value) == (None, b"no key")
    assert with_headers.headers == [("h1", b"v1"), ("h2", b""), ("h1", b"again")]
    assert [(key, value) for _, _, key, value in _read_all(broker, "kp-edge", 1)][:2] == [
        (b"tombstone", None), (None, b"no key")]


def test_kafka_python_five_mib_message_with_raised_limits(broker: BrokerProcess) -> None:
    _create(broker, "kp-big", 1, {"max.message.bytes": str(SIX_MIB)})
    value = _big_value()
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=SIX_MIB + 1024)
    producer.send("kp-big", value).get(20)
    producer.close(5)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000,
        max_partition_fetch_bytes=SIX_MIB * 2, fetch_max_bytes=SIX_MIB * 2,
    )
    partition = kafka.TopicPartition("kp-big", 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    record = next(consumer)
    consumer.close()
    assert record.value == value


def test_kafka_python_deletes_a_topic(broker: BrokerProcess) -> None:
    _create(broker, "kp-doomed", 2)
    _produce(broker, "kp-doomed", ["x", "y"], 2)
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert "kp-doomed" in admin.list_topics()
        admin.delete_topics(["kp-doomed"], timeout_ms=10000)
        assert "kp-doomed" not in admin.list_topics()
        with pytest.raises(kafka.errors.UnknownTopicOrPartitionError):
            admin.delete_topics(["kp-doomed"], timeout_ms=10000)
    finally:
        admin.close()
    broker.restart()  # the deletion is durable
    assert "kp-doomed" not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics


def test_kafka_python_two_consumers_rebalance_and_see_every_record_once(broker: BrokerProcess) -> None:
    _create(broker, "kp-events", 4)
    first = [f"e{i}" for i in range(80)]
    second = [f"f{i}" for i in range(80)]
    _produce(broker, "kp-events", first, 4)
    seen: list[tuple[int, int, int, str]] = []
    assigned: list[set[int]] = [set(), set()]
    lock = threading.Lock()
    stop = threading.Event()
    failures: list[BaseException] = []

    class Tracking(kafka.ConsumerRebalanceListener):  # type: ignore[misc]
        """Only tracks: kafka-python 3.0 runs it on its IO thread, where a blocking commit() raises."""

        def __init__(self, index: int) -> None:
            self.index = index

        def on_partitions_revoked(self, revoked: Any) -> None:
            assigned[self.index] -= {tp.partition for tp in revoked}

        def on_partitions_assigned(self, partitions: Any) -> None:
            assigned[self.index] |= {tp.partition for tp in partitions}

    def run(index: int, started: threading.Event) -> None:
        try:
            consumer = kafka.KafkaConsumer(
                # auto-commit is what commits the consumed positions before a rebalance
                bootstrap_servers=broker.bootstrap, group_id="kp-workers", enable_auto_commit=True,
                auto_commit_interval_ms=1000, auto_offset_reset="earliest", session_timeout_ms=6000,
                heartbeat_interval_ms=500, max_poll_interval_ms=10000,
            )
            consumer.subscribe(["kp-events"], listener=Tracking(index))
            started.set()
            while not stop.is_set():
                for records in consumer.poll(timeout_ms=100).values():
                    with lock:
                        seen.extend((index, r.partition, r.offset, r.value.decode()) for r in records)
            consumer.close()
        except BaseException as error:  # reported to the test thread
            failures.append(error)
            started.set()

    def wait_for(condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert not failures, failures
            assert time.monotonic() < deadline, f"gave up after {len(seen)} records, {assigned}"
            time.sleep(0.05)

    threads: list[threading.Thread] = []
    for index in range(2):
        started = threading.Event()
        threads.append(threading.Thread(target=run, args=(index, started), daemon=True))
        threads[-1].start()
        started.wait(10)
        if index == 0:
            wait_for(lambda: len(seen) >= 30)
    wait_for(lambda: len(assigned[0]) == 2 and len(assigned[1]) == 2)
    _produce(broker, "kp-events", second, 4)
    wait_for(lambda: len(seen) >= len(first) + len(second))
    time.sleep(0.5)  # a record read twice would arrive here
    stop.set()
    for thread in threads:
        thread.join(15)
    assert not failures, failures
    positions = [(p, o) for _, p, o, _ in seen]
    assert len(positions) == len(set(positions)) == len(first) + len(second)
    assert sorted(v for *_, v in seen) == sorted(first + second)
    assert assigned[0].isdisjoint(assigned[1])
    assert {0, 1} == {who for who, _, _, value in seen if value.startswith("f")}


# --- kcat (Debian's, on librdkafka 2.0.2) -----------------------------------------------


def _kcat(*args: str, data: str | None = None) -> str:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed: ./scripts/test installs it with apt"
    result = subprocess.run([kcat, *args], input=data, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kcat_group_commit_restart_resume(broker: BrokerProcess) -> None:
    _create(broker, "kc-orders", 2)
    _produce(broker, "kc-orders", [f"a{i}" for i in range(30)], 2)
    group = ["-b", broker.bootstrap, "-G", "kc-billing", "-e", "-f", "%s\n", "-X", "auto.offset.reset=earliest",
             "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", "kc-orders"]
    first = _kcat(*group).split()
    assert sorted(first) == sorted(f"a{i}" for i in range(30))
    broker.restart()
    _produce(broker, "kc-orders", [f"b{i}" for i in range(10)], 2)
    second = _kcat(*group).split()
    assert sorted(second) == sorted(f"b{i}" for i in range(10))  # resumed from the commit made on close
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kc-billing"})
    committed = consumer.committed([confluent_kafka.TopicPartition("kc-orders", p) for p in (0, 1)], timeout=10)
    consumer.close()
    assert sum(tp.offset for tp in committed) == 40



class _KcatMember:
    """A ``kcat -G`` process: its records from stdout, its assignment from the rebalance lines on stderr."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str) -> None:
        kcat = shutil.which("kcat")
        assert kcat is not None
        self.process = subprocess.Popen(
            [kcat, "-b", broker.bootstrap, "-G", group, "-u", "-f", "%p %o %s\n", "-X", "auto.offset.reset=earliest",
             "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", topic],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.records: list[tuple[int, int, str]] = []
        self.assigned: set[int] = set()
        threading.Thread(target=self._read_records, daemon=True).start()
        threading.Thread(target=self._read_rebalances, daemon=True).start()

    def _read_records(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            partition, offset, value = line.split()
            self.records.append((int(partition), int(offset), value))

    def _read_rebalances(self) -> None:  # "% Group g rebalanced (memberid …): assigned: t [0], t [1]"
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if "rebalanced" in line:
                partitions = {int(p) for p in re.findall(r"\[(\d+)\]", line)}
                self.assigned = partitions if "assigned:" in line else self.assigned - partitions

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(15)


def test_kcat_two_group_members_rebalance_and_see_every_record_once(broker: BrokerProcess) -> None:
    _create(broker, "kc-events", 4)
    first = [f"e{i}" for i in range(80)]
    second = [f"f{i}" for i in range(80)]
    _produce(broker, "kc-events", first, 4)
    members: list[_KcatMember] = []

    def wait_for(condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline, [(len(m.records), m.assigned) for m in members]
            time.sleep(0.05)

    try:
        members.append(_KcatMember(broker, "kc-workers", "kc-events"))
        wait_for(lambda: len(members[0].records) >= 30)
        members.append(_KcatMember(broker, "kc-workers", "kc-events"))
        wait_for(lambda: len(members[0].assigned) == 2 and len(members[1].assigned) == 2)
        assigned = [set(m.assigned) for m in members]
        _produce(broker, "kc-events", second, 4)
        wait_for(lambda: sum(len(m.records) for m in members) >= len(first) + len(second))
        time.sleep(0.5)  # a record read twice would arrive here
    finally:
        for member in members:
            member.stop()
    seen = [(who, *record) for who, member in enumerate(members) for record in member.records]
    positions = [(p, o) for _, p, o, _ in seen]
    assert len(positions) == len(set(positions)) == len(first) + len(second)
    assert sorted(v for *_, v in seen) == sorted(first + second)
    assert assigned[0].isdisjoint(assigned[1])
    assert {0, 1} == {who for who, _, _, value in seen if value.startswith("f")}

@pytest.mark.parametrize("codec", ["none", "snappy", "lz4", "zstd"])
def test_kcat_produces_every_codec_idempotently(broker: BrokerProcess, codec: str) -> None:
    _create(broker, f"kc-{codec}", 2)
    lines = [f"k{i}:" + f"value {i} " * (i % 20 + 1) for i in range(300)]
    _kcat("-b", broker.bootstrap, "-P", "-t", f"kc-{codec}", "-K", ":", "-z", codec,
          "-X", "enable.idempotence=true", data="\n".join(lines) + "\n")
    records = _read_all(broker, f"kc-{codec}", 2)
    assert len(records) == len(lines)
    assert sorted(f"{key!r}:{value!r}" for _, _, key, value in records) == sorted(
        f"{line.split(':')[0].encode()!r}:{line.split(':')[1].encode()!r}" for line in lines)


def test_kcat_headers_and_null_keys_and_values(broker: BrokerProcess) -> None:
    _create(broker, "kc-edge", 1)
    _kcat("-b", broker.bootstrap, "-P", "-t", "kc-edge", "-K", ":", "-Z", data="tombstone:\n:no key\n")
    _kcat("-b", broker.bootstrap, "-P", "-t", "kc-edge", "-H", "h1=v1", "-H", "h2=", "-H", "h1=again",
          data="headers\n")
    records = _read_all(broker, "kc-edge", 1)
    assert [(key, value) for _, _, key, value in records] == [(b"tombstone", None), (None, b"no key"), (None, b"headers")]
    consumed = _kcat("-b", broker.bootstrap, "-C", "-t", "kc-edge", "-o", "beginning", "-e", "-Z",
                     "-f", "%k|%s|%h\n")
    assert consumed.splitlines() == ["tombstone|NULL|", "NULL|no key|", "NULL|headers|h1=v1,h2=,h1=again"]


def test_kcat_starts_at_a_timestamp(broker: BrokerProcess) -> None:
    _create(broker, "kc-timed", 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("kc-timed", value=b"%d" % i, timestamp=BASE_TIME + i * 1000)
    assert producer.flush(10) == 0
    consumed = _kcat("-b", broker.bootstrap, "-C", "-t", "kc-timed", "-o", f"s@{BASE_TIME + 4500}", "-e",
                     "-f", "%o %s %T\n")
    assert consumed.splitlines() == [f"{i} {i} {BASE_TIME + i * 1000}" for i in range(5, 10)]


def test_kcat_five_mib_message_with_raised_limits(broker: BrokerProcess) -> None:
    _create(broker, "kc-big", 1, {"max.message.bytes": str(SIX_MIB)})
    value = _big_value().hex()[:FIVE_MIB]
    _kcat("-b", broker.bootstrap, "-P", "-t", "kc-big", "-X", f"message.max.bytes={SIX_MIB + 1024}",
          data=value + "\n")
    consumed = _kcat("-b", broker.bootstrap, "-C", "-t", "kc-big", "-o", "beginning", "-e", "-f", "%s",
                     "-X", f"fetch.message.max.bytes={SIX_MIB * 2}", "-X", f"fetch.max.bytes={SIX_MIB * 2}",
                     "-X", f"receive.message.max.bytes={SIX_MIB * 3}")
    assert consumed == value


# --- kafkajs ----------------------------------------------------------------------------


def _kafkajs(scenario: str, broker: BrokerProcess, topic: str, *args: str) -> Any:
    node = shutil.which("node")
    assert node is not None, "node is not installed: ./scripts/test installs it"
    assert (JS / "node_modules" / "kafkajs").is_dir(), "run ./scripts/test: it installs kafkajs with npm"
    result = subprocess.run(
        [node, str(JS / "scenarios.js"), scenario, broker.bootstrap, topic, *args],
        capture_output=True, text=True, timeout=90, check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_kafkajs_idempotent_producer(broker: BrokerProcess) -> None:
    _create(broker, "kjs-idem", 2)
    _kafkajs("idempotent", broker, "kjs-idem")
    records = _read_all(broker, "kjs-idem", 2)
    assert {key: value for _, _, key, value in records} == {
        b"k%d" % i: b"v%d " % i * (i % 20 + 1) for i in range(200)}
    assert len(records) == 200


def test_kafkajs_group_commit_restart_resume(broker: BrokerProcess) -> None:
    _create(broker, "kjs-orders", 2)
    _produce(broker, "kjs-orders", [f"a{i}" for i in range(30)], 2)
    first = _kafkajs("group", broker, "kjs-orders", "kjs-billing", "30")["values"]
    assert sorted(first) == sorted(f"a{i}" for i in range(30))
    broker.restart()
    _produce(broker, "kjs-orders", [f"b{i}" for i in range(10)], 2)
    second = _kafkajs("group", broker, "kjs-orders", "kjs-billing", "10")["values"]
    assert sorted(second) == sorted(f"b{i}" for i in range(10))  # nothing lost, nothing twice


def test_kafkajs_two_consumers_rebalance_and_see_every_record_once(broker: BrokerProcess) -> None:
    _create(broker, "kjs-events", 4)
    first = [f"e{i}" for i in range(80)]
    _produce(broker, "kjs-events", first, 4)
    outcome = _kafkajs("two", broker, "kjs-events", "kjs-workers", "160")
    seen = outcome["seen"]
    positions = [(r["partition"], r["offset"]) for r in seen]
    assert len(positions) == len(set(positions)) == 160
    assert sorted(r["value"] for r in seen) == sorted(first + [f"f{i}" for i in range(80)])
    assert set(outcome["assigned"][0]).isdisjoint(outcome["assigned"][1])
    assert {0, 1} == {r["who"] for r in seen if r["value"].startswith("f")}


def test_kafkajs_headers_and_null_keys_and_values(broker: BrokerProcess) -> None:
    _create(broker, "kjs-edge", 1)
    tombstone, keyless, with_headers = _kafkajs("edge", broker, "kjs-edge")["records"]
    assert tombstone == {"key": "tombstone", "value": None, "headers": {}}
    assert keyless == {"key": None, "value": "no key", "headers": {}}
    assert with_headers == {"key": None, "value": "headers", "headers": {"h1": ["v1", "again"], "h2": ""}}
    assert [(key, value) for _, _, key, value in _read_all(broker, "kjs-edge", 1)] == [
        (b"tombstone", None), (None, b"no key"), (None, b"headers")]


def test_kafkajs_five_mib_message_with_raised_limits(broker: BrokerProcess) -> None:
    outcome = _kafkajs("big", broker, "kjs-big")
    assert outcome == {"sentLength": FIVE_MIB, "receivedLength": FIVE_MIB, "same": True}


def test_kafkajs_deletes_a_topic(broker: BrokerProcess) -> None:
    outcome = _kafkajs("remove", broker, "kjs-doomed")
    assert outcome == {"before": True, "after": False}
    assert "kjs-doomed" not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics


def test_kafkajs_offsets_by_timestamp_and_seek(broker: BrokerProcess) -> None:
    _create(broker, "kjs-timed", 1)
    outcome = _kafkajs("times", broker, "kjs-timed", str(BASE_TIME))
    assert outcome["found"] == [{"partition": 0, "offset": "5"}]
    assert outcome["future"] == [{"partition": 0, "offset": "10"}]  # kafkajs maps Kafka's -1 to the high watermark
    assert outcome["watermarks"] == [{"partition": 0, "offset": "10", "high": "10", "low": "0"}]
    assert outcome["afterSeek"] == [[i, str(i), BASE_TIME + i * 1000] for i in range(7, 10)]
