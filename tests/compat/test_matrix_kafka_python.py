"""kafka-python: scenarios 2, 5, 6, 7, 8 and 9 of the matrix (see matrix.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import kafka
import kafka.errors
import pytest
from confluent_kafka.admin import AdminClient

from tests.compat.matrix import BASE_TIME, SIX_MIB, _big_value, _create, _produce, _read_all
from tests.support.broker_process import BrokerProcess


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
            # Know the topic's partitions before the first JoinGroup (the first poll): a leader
            # that joins first assigns nothing, and kafka-python 3.0.12 can drop the rejoin its
            # next metadata update starts (tests/compat/FINDINGS.md).
            assert consumer.partitions_for_topic("kp-events") == {0, 1, 2, 3}
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
