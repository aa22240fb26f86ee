"""Real clients against a real ``strom serve``: librdkafka (confluent-kafka), kafka-python, aiokafka.

Each test drives the broker only through a client library, as an application would.
Consumer groups are tested in test_groups.py; here consumers use assign/seek.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import aiokafka
import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from strom.protocol.error_codes import ErrorCode
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.api_versions_response import ApiVersionsResponse
from tests.support.broker_process import BrokerProcess, raw_request

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _producer(broker: BrokerProcess, **config: object) -> confluent_kafka.Producer:
    return confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **config})


def _consume_assigned(
    broker: BrokerProcess, topic: str, partitions: int, expected: int, timeout: float = 20, **config: object
) -> list[confluent_kafka.Message]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False, **config}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
    messages: list[confluent_kafka.Message] = []
    deadline = time.monotonic() + timeout
    while len(messages) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        messages.append(message)
    consumer.close()
    return messages


def _create(broker: BrokerProcess, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])
    futures[topic].result(15)


def test_admin_creates_validates_and_deletes_topics(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("dry", 2, 1)], validate_only=True)["dry"].result(15)
    assert "dry" not in admin.list_topics(timeout=10).topics
    admin.create_topics([NewTopic("orders", 3, 1, config={"retention.ms": "3600000"})])["orders"].result(15)
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics["orders"].partitions) == 3
    with pytest.raises(confluent_kafka.KafkaException) as info:
        admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(15)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(confluent_kafka.KafkaException) as info:
        admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(15)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REPLICATION_FACTOR
    admin.delete_topics(["orders"])["orders"].result(15)
    deadline = time.monotonic() + 10
    while "orders" in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "orders" not in admin.list_topics(timeout=10).topics


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_produces_every_codec_and_reads_it_back(broker: BrokerProcess, codec: str, idempotent: bool) -> None:
    topic = f"codec-{codec}-{idempotent}"
    _create(broker, topic, 2)
    producer = _producer(broker, **{"compression.type": codec, "enable.idempotence": idempotent, "acks": "all"})
    sent = {f"key-{i}".encode(): f"value {i} ".encode() * (i % 50 + 1) for i in range(2000)}
    for key, value in sent.items():
        producer.produce(topic, value=value, key=key)
    assert producer.flush(20) == 0
    received = _consume_assigned(broker, topic, 2, len(sent))
    assert {m.key(): m.value() for m in received} == sent
    for partition in (0, 1):
        offsets = [m.offset() for m in received if m.partition() == partition]
        assert offsets == list(range(len(offsets)))  # contiguous from 0, nothing twice


def test_headers_null_keys_and_null_values(broker: BrokerProcess) -> None:
    _create(broker, "edge", 1)
    producer = _producer(broker)
    producer.produce("edge", value=None, key=b"tombstone")
    producer.produce("edge", value=b"no key", key=None)
    producer.produce("edge", value=b"headers", headers=[("h1", b"v1"), ("h2", None), ("h1", b"again")])
    assert producer.flush(10) == 0
    tombstone, keyless, with_headers = _consume_assigned(broker, "edge", 1, 3)
    assert (tombstone.key(), tombstone.value()) == (b"tombstone", None)
    assert (keyless.key(), keyless.value()) == (None, b"no key")
    assert with_headers.headers() == [("h1", b"v1"), ("h2", None), ("h1", b"again")]


def test_offsets_for_times_and_watermarks(broker: BrokerProcess) -> None:
    _create(broker, "timed", 1)
    producer = _producer(broker)
    base = 1_700_000_000_000
    for i in range(10):
        producer.produce("timed", value=b"%d" % i, timestamp=base + i * 1000)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t"})
    assert consumer.get_watermark_offsets(confluent_kafka.TopicPartition("timed", 0), timeout=10) == (0, 10)
    found = consumer.offsets_for_times([confluent_kafka.TopicPartition("timed", 0, base + 4500)], timeout=10)
    assert found[0].offset == 5
    future = consumer.offsets_for_times([confluent_kafka.TopicPartition("timed", 0, base + 60_000)], timeout=10)
    assert future[0].offset == -1  # no record at or after: Kafka answers -1 (librdkafka: end)
    consumer.close()


def test_large_message_with_raised_limits(broker: BrokerProcess) -> None:
    five_mib = 5 * 1024 * 1024
    _create(broker, "big", 1, {"max.message.bytes": str(six := 6 * 1024 * 1024)})
    producer = _producer(broker, **{"message.max.bytes": six + 1024})
    value = uuid.uuid4().bytes * (five_mib // 16)
    producer.produce("big", value=value)
    assert producer.flush(20) == 0
    (message,) = _consume_assigned(broker, "big", 1, 1, **{"fetch.max.bytes": six * 2, "max.partition.fetch.bytes": six * 2})
    assert message.value() == value


def _outcomes_by_index(producer: confluent_kafka.Producer, topic: str,
                       records: list[tuple[bytes | None, int | None]]) -> dict[int, int]:
    """Produce (key, timestamp) records to partition 0 in one linger window; each record's
    delivery error code (0: delivered) by its index."""
    outcomes: dict[int, int] = {}
    for index, (key, timestamp) in enumerate(records):
        def delivered(err: confluent_kafka.KafkaError | None, _msg: object, index: int = index) -> None:
            outcomes[index] = err.code() if err else 0
        extra = {"timestamp": timestamp} if timestamp is not None else {}
        producer.produce(topic, b"v", key=key, partition=0, on_delivery=delivered, **extra)
    assert producer.flush(30) == 0
    assert len(outcomes) == len(records)
    return outcomes


def _assert_only_named_records_fail(outcomes: dict[int, int], bad: set[int]) -> None:
    """The named records fail as INVALID_RECORD; the others of their batch with
    _INVALID_DIFFERENT_RECORD (or are delivered, if librdkafka put them in another batch);
    before KIP-467 every record of the batch failed as INVALID_RECORD."""
    different = confluent_kafka.KafkaError._INVALID_DIFFERENT_RECORD
    assert {outcomes[i] for i in bad} == {confluent_kafka.KafkaError.INVALID_RECORD}
    others = [code for i, code in outcomes.items() if i not in bad]
    assert set(others) <= {different, 0}, others
    assert different in others


def test_keyless_records_on_a_compacted_topic_fail_alone(broker: BrokerProcess) -> None:
    """KIP-467: librdkafka fails the records the broker names with INVALID_RECORD and the
    rest of their batch with _INVALID_DIFFERENT_RECORD: 10 invalid of 100, not 100."""
    _create(broker, "table", 1, {"cleanup.policy": "compact"})
    producer = _producer(broker, **{"linger.ms": 2000, "batch.num.messages": 1000})
    bad = {i for i in range(100) if i % 10 == 3}
    records = [(None if i in bad else b"k%d" % i, None) for i in range(100)]
    _assert_only_named_records_fail(_outcomes_by_index(producer, "table", records), bad)


def test_records_outside_the_timestamp_bounds_fail_alone(broker: BrokerProcess) -> None:
    """KIP-937 bounds with KIP-467: the 5 records an hour old are named (the partition's
    error is INVALID_TIMESTAMP; librdkafka fails each named record as INVALID_RECORD), the
    others of their batch fail with _INVALID_DIFFERENT_RECORD."""
    _create(broker, "bounded", 1, {"message.timestamp.before.max.ms": "60000"})
    producer = _producer(broker, **{"linger.ms": 2000, "batch.num.messages": 1000})
    now = int(time.time() * 1000)
    bad = {i for i in range(50) if i % 10 == 0}
    records: list[tuple[bytes | None, int | None]] = [
        (b"k", now - 3_600_000 if i in bad else now) for i in range(50)]
    _assert_only_named_records_fail(_outcomes_by_index(producer, "bounded", records), bad)


def test_too_large_message_is_refused_with_kafkas_error(broker: BrokerProcess) -> None:
    _create(broker, "small", 1, {"max.message.bytes": "1000"})
    producer = _producer(broker, **{"compression.type": "none"})
    errors: list[confluent_kafka.KafkaError] = []
    producer.produce("small", value=b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors and errors[0].code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE


def test_restart_keeps_every_acknowledged_record(broker: BrokerProcess) -> None:
    _create(broker, "durable", 2)
    producer = _producer(broker, acks="all")
    for i in range(500):
        producer.produce("durable", value=b"%d" % i, key=b"%d" % i)
    assert producer.flush(10) == 0
    broker.restart()
    received = _consume_assigned(broker, "durable", 2, 500)
    assert sorted(int(m.value()) for m in received) == list(range(500))


def test_kafka_python_produces_and_consumes(broker: BrokerProcess) -> None:
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip", linger_ms=5)
    for i in range(300):
        producer.send("kp", key=b"k%d" % i, value=b"v%d" % i, headers=[("n", b"%d" % i)])
    producer.flush(15)
    producer.close(5)
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=5000, enable_auto_commit=False)
    partition = kafka.TopicPartition("kp", 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    records = [record for _, record in zip(range(300), consumer, strict=False)]
    consumer.close()
    assert [r.value for r in records] == [b"v%d" % i for i in range(300)]
    assert [r.offset for r in records] == list(range(300))
    assert records[7].headers == [("n", b"7")]


def test_aiokafka_produces_and_consumes(broker: BrokerProcess) -> None:
    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="lz4")
        await producer.start()
        try:
            for i in range(200):
                await producer.send("aio", value=b"a%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition("aio", 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            values: list[bytes] = []
            while len(values) < 200:
                batch = await consumer.getmany(timeout_ms=5000)
                if not batch:
                    break
                values += [record.value for records in batch.values() for record in records]
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"a%d" % i for i in range(200)]


def test_unsupported_api_versions_version_gets_a_v0_answer(broker: BrokerProcess) -> None:
    frame = bytearray(encode_request(ApiVersionsRequest(), 0, 11, "raw"))
    frame[6:8] = (99).to_bytes(2, "big")
    answer = raw_request(broker, bytes(frame))
    assert answer is not None
    correlation_id, response = decode_response(answer, 18, 0)
    assert correlation_id == 11
    assert isinstance(response, ApiVersionsResponse)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {k.api_key for k in response.api_keys} >= {0, 1, 3, 18}


def test_unknown_api_key_closes_the_connection(broker: BrokerProcess) -> None:
    frame = bytearray(encode_request(ApiVersionsRequest(), 0, 11, "raw"))
    frame[4:6] = (9999).to_bytes(2, "big")
    assert raw_request(broker, bytes(frame)) is None
    assert broker.alive()


def test_topic_named_twice_in_create_topics_is_refused_for_each_entry(broker: BrokerProcess) -> None:
    """As Kafka 3.9 (ZooKeeper mode, KafkaApis): every entry of a duplicated name is answered
    INVALID_REQUEST (tests/differential compares it with the real broker)."""
    from strom.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
    from strom.protocol.messages.create_topics_response import CreateTopicsResponse

    request = CreateTopicsRequest(topics=(CreatableTopic("twice", 1, 1), CreatableTopic("twice", 2, 1)))
    answer = raw_request(broker, encode_request(request, 5, 3, "raw"))
    assert answer is not None
    _, response = decode_response(answer, 19, 5)
    assert isinstance(response, CreateTopicsResponse)
    assert [(t.name, t.error_code) for t in response.topics] == [("twice", ErrorCode.INVALID_REQUEST)] * 2
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert "twice" not in admin.list_topics(timeout=10).topics


def test_control_batch_from_a_client_is_refused(broker: BrokerProcess) -> None:
    from strom.protocol.messages.produce_request import (
        PartitionProduceData,
        ProduceRequest,
        TopicProduceData,
    )
    from strom.protocol.messages.produce_response import ProduceResponse
    from strom.protocol.records import ControlRecordType, build_control_batch

    _create(broker, "markers", 1)
    marker = bytes(build_control_batch(ControlRecordType.COMMIT, producer_id=1, producer_epoch=0,
                                       coordinator_epoch=0, timestamp=0))
    request = ProduceRequest(acks=-1, timeout_ms=5000,
                             topic_data=(TopicProduceData("markers", (PartitionProduceData(0, marker),)),))
    answer = raw_request(broker, encode_request(request, 9, 4, "raw"))
    assert answer is not None
    _, response = decode_response(answer, 0, 9)
    assert isinstance(response, ProduceResponse)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "m"})
    assert consumer.get_watermark_offsets(confluent_kafka.TopicPartition("markers", 0), timeout=10) == (0, 0)
    consumer.close()


def test_produce_to_an_unknown_topic_or_with_no_records_gets_kafkas_errors(broker: BrokerProcess) -> None:
    from strom.protocol.messages.produce_request import (
        PartitionProduceData,
        ProduceRequest,
        TopicProduceData,
    )
    from strom.protocol.messages.produce_response import ProduceResponse

    _create(broker, "exists", 1)
    request = ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=(
            TopicProduceData("missing", (PartitionProduceData(0, b"\x00" * 70),)),
            TopicProduceData("exists", (PartitionProduceData(0, b""), PartitionProduceData(0, None))),
        ),
    )
    answer = raw_request(broker, encode_request(request, 9, 6, "raw"))
    assert answer is not None
    _, response = decode_response(answer, 0, 9)
    assert isinstance(response, ProduceResponse)
    codes = [[p.error_code for p in t.partition_responses] for t in response.responses]
    # An unknown partition is refused before its records are looked at; an empty record
    # set (v3+) is INVALID_RECORD, as Kafka's ProduceRequest.validateRecords; null records
    # are CORRUPT_MESSAGE.
    assert codes == [[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION], [ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE]]
