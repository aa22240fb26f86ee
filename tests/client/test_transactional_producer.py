"""AsyncProducer's transactions (KIP-98) against a real broker: commit, abort, offsets
committed with a transaction, a zombie fenced by a newer instance, empty transactions.

Each test runs against Apache Kafka 3.9, the reference broker, and against Strom's
broker (Kafka's JVM once per session, Strom's broker once per module). What the
producer did is read back with librdkafka (confluent-kafka), an independent client:
``read_committed`` must show the committed records and no aborted one,
``read_uncommitted`` shows that the aborted records did reach the log. A record that
must stay invisible is always followed by a committed one on the same partition, and
the reads wait for that one, so "not seen" is never "not yet seen".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from strom.client.consumer import AsyncConsumer, ConsumerGroupMetadata
from strom.client.errors import (
    IllegalStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortedError,
)
from strom.client.offsets import CommitFailedError, OffsetAndMetadata
from strom.client.producer import AsyncProducer
from strom.client.sync import Consumer, Producer
from strom.client.transaction_manager import TransactionState
from strom.protocol.error_codes import ErrorCode
from tests.support import reference_broker
from tests.support.broker_process import BrokerProcess
from tests.support.clients import Kafka, create_topic

# Apache Kafka 3.9, started once per session for the tests that take it.
kafka39 = reference_broker.kafka39
READ_TIMEOUT = 30.0  # seconds; generous for a loaded 2-core machine


@pytest.fixture(scope="module", params=["kafka39", "strom"])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    """The broker under test: Kafka 3.9 (the reference), or Strom's."""
    if request.param == "kafka39":
        kafka: reference_broker.ReferenceBroker = request.getfixturevalue("kafka39")
        yield Kafka("kafka39", kafka.bootstrap)
        return
    directory: Path = tmp_path_factory.mktemp("strom-txn")
    process = BrokerProcess(directory / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        yield Kafka("strom", process.bootstrap, process)
    finally:
        if process.alive():
            process.stop()


def producer_config(kafka: Kafka, transactional_id: str, **extra: object) -> dict[str, object]:
    return {"bootstrap.servers": kafka.bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
            "max.block.ms": 30_000, **extra}


def read_values(kafka: Kafka, topic: str, partitions: int, isolation: str,
                done: Callable[[list[bytes]], bool]) -> list[bytes]:
    """Values of ``topic`` from the beginning, read by librdkafka at ``isolation`` until
    ``done(values)`` holds (an AssertionError with what was read if it never does)."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": kafka.bootstrap, "group.id": f"reader-{topic}-{isolation}",
        "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(partitions)])
        values: list[bytes] = []
        deadline = time.monotonic() + READ_TIMEOUT
        while not done(values):
            assert time.monotonic() < deadline, f"{isolation} read of {topic} stopped at {values}"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def ends_with(sentinel: bytes) -> Callable[[list[bytes]], bool]:
    return lambda values: sentinel in values


def test_commit_makes_records_visible_to_read_committed(broker: Kafka) -> None:
    topic = broker.topic("txn-commit")
    create_topic(broker, topic, 2)

    async def main() -> None:
        async with AsyncProducer(producer_config(broker, f"{topic}-id")) as producer:
            await producer.init_transactions()
            for round_ in range(2):  # the second transaction re-adds the partitions
                producer.begin_transaction()
                futures = [await producer.send(topic, f"r{round_}-{i}".encode(), partition=i % 2)
                           for i in range(10)]
                await producer.commit_transaction()
                assert all(future.done() and future.exception() is None for future in futures)
            producer.begin_transaction()
            for i in range(10):  # key-less: produce()'s per-record path into a sticky batch
                await producer.produce(topic, f"r2-{i}".encode())
            await producer.commit_transaction()
            with pytest.raises(IllegalStateError):
                await producer.produce(topic, b"after-commit")  # no transaction: refused
            assert producer._transactions is not None
            assert producer._transactions.state is TransactionState.READY

    asyncio.run(main())
    expected = {f"r{r}-{i}".encode() for r in range(3) for i in range(10)}
    values = read_values(broker, topic, 2, "read_committed", lambda v: len(v) >= len(expected))
    assert sorted(values) == sorted(expected)


def test_aborted_records_reach_the_log_but_not_read_committed(broker: Kafka) -> None:
    topic = broker.topic("txn-abort")
    create_topic(broker, topic, 1)

    async def main() -> None:
        async with AsyncProducer(producer_config(broker, f"{topic}-id")) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            sent = [await producer.send_and_wait(topic, f"aborted-{i}".encode()) for i in range(5)]
            assert [m.offset for m in sent] == list(range(5))  # in the log, acknowledged
            unsent = await producer.send(topic, b"never-sent")
            await producer.abort_transaction()
            # Java's contract: a record not yet sent when the abort began fails with
            # TransactionAbortedError; one already in flight completes (and is aborted).
            assert unsent.done()
            if unsent.exception() is not None:
                assert isinstance(unsent.exception(), TransactionAbortedError)
            producer.begin_transaction()
            await producer.send(topic, b"committed")
            await producer.commit_transaction()

    asyncio.run(main())
    committed = read_values(broker, topic, 1, "read_committed", ends_with(b"committed"))
    assert committed == [b"committed"]
    uncommitted = read_values(broker, topic, 1, "read_uncommitted", ends_with(b"committed"))
    assert uncommitted[:5] == [f"aborted-{i}".encode() for i in range(5)]


def test_send_offsets_to_transaction_commits_them_with_the_transaction(broker: Kafka) -> None:
    source, sink = broker.topic("txn-in"), broker.topic("txn-out")
    create_topic(broker, source, 1)
    create_topic(broker, sink, 1)
    group = f"{source}-group"

    async def main() -> None:
        async with AsyncProducer({"bootstrap.servers": broker.bootstrap}) as plain:
            for i in range(6):
                await plain.send(source, f"in-{i}".encode())
        consumer = AsyncConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "isolation.level": "read_committed"})
        async with consumer, AsyncProducer(producer_config(broker, f"{source}-id")) as producer:
            consumer.subscribe([source])
            await producer.init_transactions()
            records = []
            deadline = time.monotonic() + READ_TIMEOUT
            while len(records) < 6:
                assert time.monotonic() < deadline, f"read {len(records)} of 6 records"
                records += await consumer.poll(timeout_ms=500)
            metadata = consumer.group_metadata()
            assert metadata.group_id == group and metadata.generation_id >= 1 and metadata.member_id

            # Copy the first three, commit with offset 3.
            producer.begin_transaction()
            for record in records[:3]:
                await producer.send(sink, record.value)
            await producer.send_offsets_to_transaction({(source, 0): OffsetAndMetadata(3)}, metadata)
            await producer.commit_transaction()
            # Copy the rest with offset 6, but abort: the group's offset stays 3.
            producer.begin_transaction()
            for record in records[3:]:
                await producer.send(sink, record.value)
            await producer.send_offsets_to_transaction({(source, 0): 6}, consumer.group_metadata())
            await producer.abort_transaction()
            committed = await consumer.committed([(source, 0)])
            assert committed[(source, 0)] is not None and committed[(source, 0)].offset == 3
            # An empty transaction that only commits offsets moves the group on.
            producer.begin_transaction()
            await producer.send_offsets_to_transaction({(source, 0): 6}, consumer.group_metadata())
            await producer.send(sink, b"sentinel")
            await producer.commit_transaction()
            committed = await consumer.committed([(source, 0)])
            assert committed[(source, 0)] is not None and committed[(source, 0)].offset == 6
            # KIP-447: offsets from someone who is not a member of the group are refused,
            # and the transaction must be aborted.
            producer.begin_transaction()
            stranger = ConsumerGroupMetadata(group, metadata.generation_id, "not-a-member")
            with pytest.raises(CommitFailedError):
                await producer.send_offsets_to_transaction({(source, 0): 1}, stranger)
            assert producer._transactions is not None
            assert producer._transactions.state is TransactionState.ABORTABLE_ERROR
            await producer.abort_transaction()
            committed = await consumer.committed([(source, 0)])
            assert committed[(source, 0)] is not None and committed[(source, 0)].offset == 6

    asyncio.run(main())
    values = read_values(broker, sink, 1, "read_committed", ends_with(b"sentinel"))
    assert values == [b"in-0", b"in-1", b"in-2", b"sentinel"]


@pytest.mark.parametrize("zombie_next", ["commit", "send"])
def test_a_newer_instance_fences_the_zombie(broker: Kafka, zombie_next: str) -> None:
    """The zombie's next commit fails fenced; so does its next send (the leader refuses
    its old epoch) and then the abort that must follow (Kafka's testFencingOnCommit and
    testFencingOnSend)."""
    topic = broker.topic("txn-fence")
    create_topic(broker, topic, 1)
    transactional_id = f"{topic}-id"

    async def main() -> None:
        zombie = AsyncProducer(producer_config(broker, transactional_id))
        async with zombie, AsyncProducer(producer_config(broker, transactional_id)) as successor:
            await zombie.init_transactions()
            zombie.begin_transaction()
            await zombie.send_and_wait(topic, b"zombie")
            # The new instance's InitProducerId aborts the zombie's open transaction
            # (CONCURRENT_TRANSACTIONS until the abort is done) and bumps the epoch.
            await successor.init_transactions()
            assert successor._transactions is not None and zombie._transactions is not None
            assert successor._transactions.producer_id == zombie._transactions.producer_id
            assert successor._transactions.producer_epoch > zombie._transactions.producer_epoch
            if zombie_next == "commit":
                with pytest.raises(ProducerFencedError):
                    await zombie.commit_transaction()
            else:
                refused = await zombie.send(topic, b"zombie-again")
                with pytest.raises(KafkaError) as error:
                    await refused
                assert error.value.error_code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED)
                with pytest.raises(ProducerFencedError):
                    await zombie.abort_transaction()
            assert zombie._transactions.state is TransactionState.FATAL_ERROR
            with pytest.raises(ProducerFencedError):
                zombie.begin_transaction()
            successor.begin_transaction()
            await successor.send(topic, b"successor")
            await successor.commit_transaction()

    asyncio.run(main())
    values = read_values(broker, topic, 1, "read_committed", ends_with(b"successor"))
    assert values == [b"successor"]


def test_empty_transactions_and_calls_out_of_order(broker: Kafka) -> None:
    """An empty transaction sends no EndTxn (Kafka would answer INVALID_TXN_STATE, a fatal
    error, for its Empty state), so commit and abort both succeed and the producer goes on."""
    topic = broker.topic("txn-empty")
    create_topic(broker, topic, 1)

    async def main() -> None:
        async with AsyncProducer(producer_config(broker, f"{topic}-id")) as producer:
            with pytest.raises(IllegalStateError):
                producer.begin_transaction()  # before init_transactions
            await producer.init_transactions()
            with pytest.raises(IllegalStateError):
                await producer.send(topic, b"outside")  # no transaction begun
            with pytest.raises(IllegalStateError):
                await producer.commit_transaction()
            producer.begin_transaction()
            await producer.commit_transaction()
            producer.begin_transaction()
            await producer.abort_transaction()
            producer.begin_transaction()
            with pytest.raises(IllegalStateError):
                producer.begin_transaction()  # one at a time
            await producer.send(topic, b"after-empty")
            await producer.commit_transaction()
            assert producer._transactions is not None
            assert producer._transactions.state is TransactionState.READY

    asyncio.run(main())
    assert read_values(broker, topic, 1, "read_committed", ends_with(b"after-empty")) == [b"after-empty"]


def test_a_refused_batch_makes_the_transaction_abortable(broker: Kafka) -> None:
    """A batch the broker refuses (here: over the topic's max.message.bytes) leaves the
    transaction unable to commit; abort brings the producer back, as Java's does."""
    topic, small = broker.topic("txn-abortable"), broker.topic("txn-small")
    create_topic(broker, topic, 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(small, 1, 1, config={"max.message.bytes": "1000"})])[small].result(15)

    async def main() -> None:
        async with AsyncProducer(producer_config(broker, f"{topic}-id")) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send_and_wait(topic, b"doomed")
            too_large = await producer.send(small, b"x" * 5000)
            with pytest.raises(KafkaError) as refused:
                await too_large
            assert not refused.value.retriable
            assert producer._transactions is not None
            assert producer._transactions.state is TransactionState.ABORTABLE_ERROR
            with pytest.raises(KafkaError):
                await producer.send(topic, b"refused")
            with pytest.raises(KafkaError):
                await producer.commit_transaction()
            await producer.abort_transaction()
            producer.begin_transaction()
            await producer.send(topic, b"committed")
            await producer.commit_transaction()

    asyncio.run(main())
    assert read_values(broker, topic, 1, "read_committed", ends_with(b"committed")) == [b"committed"]


def test_an_abort_after_a_sequence_gap_bumps_the_epoch(broker: Kafka) -> None:
    """KIP-360: a batch refused OUT_OF_ORDER_SEQUENCE_NUMBER leaves its partition's
    sequence in doubt; the abort bumps the epoch, so sequences start again and the next
    transaction commits (without the bump the gap would refuse every later batch)."""
    topic = broker.topic("txn-bump")
    create_topic(broker, topic, 1)

    async def main() -> None:
        async with AsyncProducer(producer_config(broker, f"{topic}-id")) as producer:
            await producer.init_transactions()
            transactions, sender = producer._transactions, producer._sender
            assert transactions is not None and sender is not None
            producer.begin_transaction()
            await producer.send_and_wait(topic, b"first")
            sender._sequences[(topic, 0)] += 5  # as if five records were stamped and lost
            gap = await producer.send(topic, b"after-the-gap")
            with pytest.raises(KafkaError) as refused:
                await gap
            assert refused.value.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            producer_id, epoch = transactions.producer_id, transactions.producer_epoch
            await producer.abort_transaction()
            assert (transactions.producer_id, transactions.producer_epoch) == (producer_id, epoch + 1)
            producer.begin_transaction()
            await producer.send(topic, b"committed")
            await producer.commit_transaction()

    asyncio.run(main())
    assert read_values(broker, topic, 1, "read_committed", ends_with(b"committed")) == [b"committed"]


def test_the_synchronous_producer_runs_transactions(broker: Kafka) -> None:
    topic = broker.topic("txn-sync")
    create_topic(broker, topic, 1)
    group = f"{topic}-group"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    with Producer(producer_config(broker, f"{topic}-id")) as producer, consumer:
        metadata = consumer.group_metadata()
        assert metadata == ConsumerGroupMetadata(group)  # not joined: offsets without a generation
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, f"aborted-{i}".encode())
        producer.flush()  # in the log, so the abort has something to hide
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"committed")
        producer.send_offsets_to_transaction({(topic, 0): 4}, metadata)
        producer.commit_transaction()
    reader = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        [committed] = reader.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=READ_TIMEOUT)
        assert committed.offset == 4
    finally:
        reader.close()
    assert read_values(broker, topic, 1, "read_committed", ends_with(b"committed")) == [b"committed"]
    uncommitted = read_values(broker, topic, 1, "read_uncommitted", ends_with(b"committed"))
    assert uncommitted == [b"aborted-0", b"aborted-1", b"aborted-2", b"committed"]
