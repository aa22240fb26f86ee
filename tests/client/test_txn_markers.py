"""Transaction markers and transactional offsets on a real ``strom serve``, seen by real
clients: a librdkafka ``read_committed`` consumer waits at the last stable offset until the
COMMIT marker, and a kafka-python consumer's group metadata (KIP-447) fences TxnOffsetCommit.

The transaction coordinator's part (EndTxn writing the markers) is not used: the test
plays the coordinator with raw InitProducerId, Produce, TxnOffsetCommit and
WriteTxnMarkers requests through the generated codec, as a coordinator on another broker
or an admin's KIP-664 abort would send them. Its producer ids are no transactional id's,
so the coordinator's KIP-890 check of TxnOffsetCommit is off here
(tests/client/test_transaction_verification.py tests it).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer

from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.protocol.error_codes import ErrorCode
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from strom.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from strom.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from strom.protocol.records.v2_builder import build_record_batch
from tests.support.broker_process import BrokerProcess, raw_request
from tests.support.clients import Kafka, create_topic

TIMEOUT = 30.0  # generous: a loaded two-core machine
_correlation_ids = itertools.count(1)


@pytest.fixture(scope="module")
def strom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    directory: Path = tmp_path_factory.mktemp("txn-markers")
    broker = BrokerProcess(directory / "data", {
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
        "transaction.partition.verification.enable": "false"}).start()
    try:
        yield Kafka("strom", broker.bootstrap, broker)
    finally:
        if broker.alive():
            broker.stop()


def call(kafka: Kafka, body: Message, version: int) -> Any:
    assert kafka.strom is not None and body.API_KEY is not None
    correlation_id = next(_correlation_ids)
    answer = raw_request(kafka.strom, encode_request(body, version, correlation_id, "txn-test"))
    assert answer is not None
    answered_id, response = decode_response(answer, body.API_KEY, version)
    assert answered_id == correlation_id
    return response


def new_producer(kafka: Kafka) -> tuple[int, int]:
    response = call(kafka, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
    assert response.error_code == ErrorCode.NONE
    return response.producer_id, response.producer_epoch


def produce(kafka: Kafka, topic: str, values: list[bytes], producer: tuple[int, int] | None = None) -> None:
    options: dict[str, Any] = {}
    if producer is not None:
        options = {"producer_id": producer[0], "producer_epoch": producer[1], "base_sequence": 0,
                   "is_transactional": True}
    records = build_record_batch(((None, v, (), None) for v in values), **options)
    request = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=(
        TopicProduceData(topic, (PartitionProduceData(0, bytes(records)),)),))
    (part,) = call(kafka, request, 9).responses[0].partition_responses
    assert part.error_code == ErrorCode.NONE


def write_marker(kafka: Kafka, producer: tuple[int, int], committed: bool, topic: str) -> None:
    request = WriteTxnMarkersRequest(markers=(WritableTxnMarker(
        producer[0], producer[1], committed, (WritableTxnMarkerTopic(topic, (0,)),), 0),))
    response = call(kafka, request, 1)
    assert [p.error_code for m in response.markers for t in m.topics for p in t.partitions] == [ErrorCode.NONE]


def consume_until(consumer: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
    return values


def test_a_read_committed_consumer_waits_at_the_last_stable_offset(strom: Kafka) -> None:
    topic = strom.topic("txn-data")
    create_topic(strom, topic)
    producer = new_producer(strom)
    produce(strom, topic, [b"before"])
    produce(strom, topic, [b"t1", b"t2"], producer)
    produce(strom, topic, [b"after"])  # above the open transaction: not readable yet either
    consumer = Consumer({"bootstrap.servers": strom.bootstrap, "group.id": "txn-reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        assert consume_until(consumer, 1) == [b"before"]
        # the consumer sits at the LSO (1) while the transaction is open: a second's polls bring nothing
        assert consume_until_deadline(consumer, 1.0) == []
        write_marker(strom, producer, True, topic)
        assert consume_until(consumer, 3) == [b"t1", b"t2", b"after"]
    finally:
        consumer.close()


def consume_until_deadline(consumer: Consumer, seconds: float) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            values.append(message.value())
    return values


def test_kip_447_fences_txn_offset_commits_by_a_real_members_generation(strom: Kafka) -> None:
    topic = strom.topic("txn-in")
    create_topic(strom, topic)
    consumer = KafkaConsumer(topic, bootstrap_servers=strom.bootstrap, group_id="eos-group",
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             metadata_max_age_ms=500)  # a topic seen before its partitions: rejoin soon
    try:
        deadline = time.monotonic() + TIMEOUT
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(200)
        metadata = consumer.group_metadata()
        assert consumer.assignment() and metadata.generation_id >= 0 and metadata.member_id
        producer = new_producer(strom)

        def txn_commit(generation: int, member: str) -> int:
            request = TxnOffsetCommitRequest(
                transactional_id="eos", group_id="eos-group", producer_id=producer[0], producer_epoch=producer[1],
                generation_id=generation, member_id=member,
                topics=(TxnOffsetCommitRequestTopic(topic, (TxnOffsetCommitRequestPartition(0, 7),)),))
            (part,) = call(strom, request, 3).topics[0].partitions
            error: int = part.error_code
            return error

        assert txn_commit(metadata.generation_id + 1, metadata.member_id) == ErrorCode.ILLEGAL_GENERATION
        assert txn_commit(metadata.generation_id, "a-zombie") == ErrorCode.UNKNOWN_MEMBER_ID
        assert txn_commit(metadata.generation_id, metadata.member_id) == ErrorCode.NONE
        # librdkafka asks with RequireStable (and retries UNSTABLE_OFFSET_COMMIT): the marker makes it 7
        write_marker(strom, producer, True, OFFSETS_TOPIC)
        reader = Consumer({"bootstrap.servers": strom.bootstrap, "group.id": "eos-group"})
        try:
            (committed,) = reader.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)
        finally:
            reader.close()
        assert committed.offset == 7
    finally:
        consumer.close()
