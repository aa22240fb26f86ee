"""Transactions with a real transactional client (confluent-kafka, librdkafka) against one
``strom serve``: commit, abort (read_committed consumers see what was committed, nothing
else), an empty transaction, offsets sent in a transaction,
fencing a zombie, a timeout above ``transaction.max.timeout.ms``; and aiokafka (v0 requests)
and kafka-python.

One broker for the module; every test has its own transactional id and topic.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess

MAX_TIMEOUT_MS = 60000
OVERRIDES = {
    "transaction.state.log.num.partitions": "2",
    "offsets.topic.num.partitions": "1",
    "transaction.max.timeout.ms": str(MAX_TIMEOUT_MS),
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(Path(tmp_path_factory.mktemp("txn")) / "data", OVERRIDES).start()
    yield process
    if process.alive():
        process.stop()


def create_topic(broker: BrokerProcess, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(10)


def transactional_producer(broker: BrokerProcess, txn_id: str, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})


def read_all(broker: BrokerProcess, topic: str, isolation: str) -> list[bytes]:
    """Every record of partition 0 up to its end, as a consumer with ``isolation`` sees them."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"reader-{topic}-{isolation}",
                         "enable.partition.eof": True, "auto.offset.reset": "earliest",
                         "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return values
                raise KafkaException(message.error())
            values.append(message.value())
    finally:
        consumer.close()
    raise AssertionError(f"no end of {topic} after {values}")


def wait_for_high_watermark(broker: BrokerProcess, topic: str, expected: int) -> int:
    """The partition's high watermark once it is ``expected`` (the last commit's marker is
    written after the commit's answer), or what it is after 30 s."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks",
                         "isolation.level": "read_uncommitted"})
    deadline = time.monotonic() + 30
    try:
        while True:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
            if high == expected or time.monotonic() > deadline:
                return int(high)
            time.sleep(0.05)
    finally:
        consumer.close()


def test_commit_and_abort(broker: BrokerProcess) -> None:
    create_topic(broker, "txn-commit")
    producer = transactional_producer(broker, "commit-and-abort")
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in (b"a", b"b", b"c"):
        producer.produce("txn-commit", value, partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce("txn-commit", b"aborted", partition=0)
    assert producer.flush(30) == 0  # written, so the abort has a marker to write (else librdkafka purges it)
    producer.abort_transaction(30)
    producer.begin_transaction()  # the next transaction starts once the abort is complete
    producer.produce("txn-commit", b"d", partition=0)
    producer.commit_transaction(30)
    # Five records and three markers; the markers are skipped by every consumer.
    assert wait_for_high_watermark(broker, "txn-commit", 8) == 8
    assert read_all(broker, "txn-commit", "read_uncommitted") == [b"a", b"b", b"c", b"aborted", b"d"]
    assert read_all(broker, "txn-commit", "read_committed") == [b"a", b"b", b"c", b"d"]


def test_an_empty_transaction_commits_and_aborts(broker: BrokerProcess) -> None:
    producer = transactional_producer(broker, "empty")
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.abort_transaction(30)


def test_offsets_sent_in_a_transaction_are_committed_with_it(broker: BrokerProcess) -> None:
    create_topic(broker, "txn-offsets")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "txn-group",
                         "enable.auto.commit": False})
    try:
        producer = transactional_producer(broker, "offsets")
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("txn-offsets", b"out", partition=0)
        producer.send_offsets_to_transaction([TopicPartition("txn-offsets", 0, 42)],
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        deadline = time.monotonic() + 30
        while True:  # the marker on __consumer_offsets follows the commit's answer
            (committed,) = consumer.committed([TopicPartition("txn-offsets", 0)], timeout=10)
            if committed.offset == 42 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert committed.offset == 42
    finally:
        consumer.close()


def test_a_second_producer_with_the_same_id_fences_the_first(broker: BrokerProcess) -> None:
    create_topic(broker, "txn-fence")
    zombie = transactional_producer(broker, "fenced")
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce("txn-fence", b"zombie", partition=0)
    assert zombie.flush(30) == 0
    successor = transactional_producer(broker, "fenced")
    successor.init_transactions(30)  # aborts the zombie's transaction (retried past CONCURRENT_TRANSACTIONS)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal() and error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                              KafkaError.INVALID_PRODUCER_EPOCH), error
    successor.begin_transaction()
    successor.produce("txn-fence", b"successor", partition=0)
    successor.commit_transaction(30)
    assert read_all(broker, "txn-fence", "read_uncommitted") == [b"zombie", b"successor"]
    # The zombie's record, the fence's ABORT marker, the successor's record and COMMIT marker.
    assert wait_for_high_watermark(broker, "txn-fence", 4) == 4
    assert read_all(broker, "txn-fence", "read_committed") == [b"successor"]  # the fence aborted the zombie's


def test_a_timeout_above_the_brokers_maximum_is_refused(broker: BrokerProcess) -> None:
    producer = transactional_producer(broker, "too-long", **{"transaction.timeout.ms": MAX_TIMEOUT_MS + 1000})
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(30)
    assert raised.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_aiokafka_speaking_v0_commits_aborts_and_is_fenced(broker: BrokerProcess) -> None:
    """aiokafka sends every transactional request at v0: the fence reaches it as
    INVALID_PRODUCER_EPOCH (PRODUCER_FENCED rewritten), which it raises as ProducerFenced."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import ProducerFenced

    create_topic(broker, "txn-aiokafka")

    async def scenario() -> None:
        zombie = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aiokafka")
        await zombie.start()
        successor = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aiokafka")
        try:
            async with zombie.transaction():
                await zombie.send_and_wait("txn-aiokafka", b"committed", partition=0)
            await zombie.begin_transaction()
            await zombie.send_and_wait("txn-aiokafka", b"aborted", partition=0)
            await zombie.abort_transaction()
            await successor.start()  # its InitProducerId bumps the epoch: the first producer is a zombie now
            await zombie.begin_transaction()
            with pytest.raises(ProducerFenced):
                await zombie.send_and_wait("txn-aiokafka", b"fenced", partition=0)
        finally:
            await successor.stop()
            with contextlib.suppress(ProducerFenced):
                await zombie.stop()

    asyncio.run(scenario())
    # aiokafka leaves the fence's error in futures nobody awaits; collect them here, where the
    # "never retrieved" log line is harmless (from a collection inside a later compile(),
    # CPython 3.11 fails that compile with "AST constructor recursion depth mismatch").
    gc.collect()
    assert read_all(broker, "txn-aiokafka", "read_uncommitted") == [b"committed", b"aborted"]
    assert wait_for_high_watermark(broker, "txn-aiokafka", 4) == 4  # two records, two markers
    assert read_all(broker, "txn-aiokafka", "read_committed") == [b"committed"]


def test_kafka_python_commits_aborts_and_is_fenced(broker: BrokerProcess) -> None:
    """kafka-python negotiates versions (v2 and later here): it gets PRODUCER_FENCED as it is."""
    from kafka import KafkaProducer
    from kafka.errors import ProducerFencedError

    create_topic(broker, "txn-kafka-python")
    zombie = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kafka-python")
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("txn-kafka-python", b"committed", partition=0)
    zombie.commit_transaction()
    zombie.begin_transaction()
    zombie.send("txn-kafka-python", b"aborted", partition=0).get(30)
    zombie.abort_transaction()
    successor = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kafka-python")
    successor.init_transactions()
    zombie.begin_transaction()
    with pytest.raises(ProducerFencedError):
        zombie.send("txn-kafka-python", b"fenced", partition=0).get(30)
    zombie.close(timeout=5)
    successor.close(timeout=5)
    assert read_all(broker, "txn-kafka-python", "read_uncommitted") == [b"committed", b"aborted"]
    assert wait_for_high_watermark(broker, "txn-kafka-python", 4) == 4
    assert read_all(broker, "txn-kafka-python", "read_committed") == [b"committed"]
