"""Compacted topics with real clients: keyless produce refused, consumers across compaction,
``__consumer_offsets`` kept small and reloaded, aborted transactions removed.

The broker runs with ``log.cleaner.backoff.ms=100`` and topics with small segments and
``min.cleanable.dirty.ratio=0.01`` so the cleaner works within a test; the tests wait
for its ``cleaner-offset-checkpoint`` instead of sleeping a fixed time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.storage.checkpoint import read_offset_checkpoint
from strom.storage.fs import FileSystem
from tests.support.broker_process import BrokerProcess

COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "20000",
             "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000"}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", {
        "group.initial.rebalance.delay.ms": "0", "log.cleaner.backoff.ms": "100",
        "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "20000",
        "log.cleaner.min.cleanable.ratio": "0.01",
    }).start()
    yield process
    if process.alive():
        process.stop()


def create_topic(broker: BrokerProcess, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=COMPACTED)])[name].result(timeout=10)


def cleaned_up_to(broker: BrokerProcess, topic: str) -> int:
    path = str(broker.data_dir / "cleaner-offset-checkpoint")
    return read_offset_checkpoint(FileSystem(), path).get((topic, 0), 0)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def produce(broker: BrokerProcess, topic: str, records: list[tuple[bytes | None, bytes | None]]
            ) -> list[KafkaError | None]:
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 8000,
                         "enable.idempotence": False, "retries": 0})
    for key, value in records:
        producer.produce(topic, value=value, key=key,
                         on_delivery=lambda err, _msg: errors.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0
    return errors


def read_all(broker: BrokerProcess, topic: str) -> list[Message]:
    """Every record from offset 0 to the high watermark, with one fresh consumer."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        messages: list[Message] = []
        deadline = time.monotonic() + 60
        while (not messages or messages[-1].offset() < high - 1) and high > 0:
            assert time.monotonic() < deadline, "consumer did not reach the high watermark"
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            messages.append(message)
        return messages
    finally:
        consumer.close()


def test_keyless_produce_to_a_compacted_topic_is_refused(broker: BrokerProcess) -> None:
    create_topic(broker, "table")
    assert produce(broker, "table", [(b"k", b"v")]) == [None]
    errors = produce(broker, "table", [(None, b"no key")])
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD
    assert [(m.key(), m.value()) for m in read_all(broker, "table")] == [(b"k", b"v")]


def test_consumer_reading_during_compaction_sees_every_latest_value(
        broker: BrokerProcess) -> None:
    create_topic(broker, "table")
    latest: dict[bytes, bytes | None] = {}
    for round_number in range(6):
        records: list[tuple[bytes | None, bytes | None]] = [
            (b"key-%d" % (i % 300), b"round %d value %d " % (round_number, i) * 4)
            for i in range(1000)]
        records += [(b"key-%d" % i, None) for i in range(round_number, 300, 50)]  # tombstones
        assert set(produce(broker, "table", records)) == {None}
        latest.update(records)
        seen = {m.key(): m.value() for m in read_all(broker, "table")}  # while it cleans
        assert seen == latest
    # The cleaner works through the log in several passes as segments roll: wait for the
    # effect (most superseded records gone), checking every read on the way.
    def compacted() -> bool:
        messages[:] = read_all(broker, "table")
        assert {m.key(): m.value() for m in messages} == latest
        return len(messages) < 6 * 1000 / 2

    messages: list[Message] = []
    wait_for(compacted, "compaction to remove most superseded records")
    assert cleaned_up_to(broker, "table") > 0
    offsets = [m.offset() for m in messages]
    assert offsets == sorted(offsets) and offsets[-1] > len(offsets)  # gaps, no renumbering


def test_consumer_offsets_stay_small_and_reload(broker: BrokerProcess, tmp_path: Path) -> None:
    assert set(produce(broker, "events", [(b"k", b"v%d" % i) for i in range(50)])) == {None}
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "committer",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    for i in range(1500):
        consumer.commit(offsets=[TopicPartition("events", 0, i % 50 + 1)],
                        asynchronous=False)
    consumer.close()
    offsets_dir = broker.data_dir / "__consumer_offsets-0"
    def size() -> int:
        total = 0
        for path in offsets_dir.glob("*.log"):
            try:  # the cleaner may swap a segment out between the listing and the stat
                total += path.stat().st_size
            except FileNotFoundError:
                return 1 << 62  # a torn listing: look again
        return total

    # A commit record is ~60-100 bytes; once compaction has caught up most are gone.
    wait_for(lambda: size() < 1500 * 60 / 2, "offsets compaction")
    assert cleaned_up_to(broker, "__consumer_offsets") > 0
    broker.stop()
    broker.start()
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "committer",
                       "enable.auto.commit": False})
    try:
        committed = reader.committed([TopicPartition("events", 0)], timeout=10)
        assert committed[0].offset == 1499 % 50 + 1
    finally:
        reader.close()


def read_isolated(broker: BrokerProcess, topic: str, isolation: str) -> list[Message]:
    """Every record a consumer with ``isolation.level`` gets up to the high watermark
    (markers and aborted records are skipped, so it waits on its position, not on the
    last record's offset)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "isolation.level": isolation})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        messages: list[Message] = []
        deadline = time.monotonic() + 60
        while consumer.position([TopicPartition(topic, 0)])[0].offset < high:
            assert time.monotonic() < deadline, "consumer did not reach the high watermark"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                messages.append(message)
            elif message is not None and message.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(message.error())
        return messages
    finally:
        consumer.close()


def test_compaction_removes_aborted_transactions_under_real_consumers(
        broker: BrokerProcess) -> None:
    """librdkafka transactions on a compacted topic: once the cleaner has been through,
    read_uncommitted sees no aborted record (keys written only by aborted transactions
    included), read_committed sees the same latest values as before, on the way too."""
    create_topic(broker, "txn-table")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx",
                         "linger.ms": 5, "batch.size": 8000})
    producer.init_transactions(30)
    latest: dict[bytes, bytes] = {}
    for round_number in range(8):
        producer.begin_transaction()
        commit = round_number % 2 == 1
        for i in range(200):
            key = b"key-%d" % (i % 100) if i % 4 else b"round-%d-%d" % (round_number, i)
            value = b"round %d value %d %s" % (round_number, i, b"committed" if commit
                                               else b"aborted")
            producer.produce("txn-table", key=key, value=value * 8)
            if commit:
                latest[key] = value * 8
        if commit:
            producer.commit_transaction(30)
        else:
            assert producer.flush(30) == 0  # written, then aborted (abort drops what is queued)
            producer.abort_transaction(30)

    def cleaned() -> bool:
        up_to = cleaned_up_to(broker, "txn-table")  # offset 0 is an aborted record
        committed = read_isolated(broker, "txn-table", "read_committed")
        assert {m.key(): m.value() for m in committed} == latest
        uncommitted = read_isolated(broker, "txn-table", "read_uncommitted")
        return up_to > 0 and not any(b"aborted" in (m.value() or b"") for m in uncommitted
                                     if m.offset() < up_to)

    wait_for(cleaned, "the cleaner to remove the aborted records it went through")
