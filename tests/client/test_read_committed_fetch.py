"""read_committed Fetch on a real ``strom serve``: the aborted transactions a response
lists (those that began before the fetch offset included), a librdkafka
``read_committed`` consumer that skips aborted records and a ``read_uncommitted`` one
that does not, and a waiting read_committed Fetch woken by the marker that moves the
last stable offset.

The test plays producer and coordinator with raw requests through the generated codec
(idempotent producer ids from InitProducerId, transactional batches built here,
WriteTxnMarkers for COMMIT/ABORT), so the offsets of every batch and marker are known.
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from strom.protocol.error_codes import ErrorCode
from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from strom.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from strom.protocol.records import build_record_batch, iter_batches
from tests.support.broker_process import BrokerProcess
from tests.support.clients import Kafka, create_topic

TIMEOUT = 60.0  # generous: a loaded two-core machine
FETCH_VERSION = 11  # isolation level, last stable offset, aborted transactions; topic names
_correlation_ids = itertools.count(1)


@pytest.fixture(scope="module")
def strom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    directory: Path = tmp_path_factory.mktemp("read-committed")
    broker = BrokerProcess(directory / "data", {"offsets.topic.num.partitions": "1"}).start()
    try:
        yield Kafka("strom", broker.bootstrap, broker)
    finally:
        if broker.alive():
            broker.stop()


class Connection:
    """One socket to the broker; requests answered in order."""

    def __init__(self, kafka: Kafka) -> None:
        host, port = kafka.bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        self.decoder = FrameDecoder()
        self.frames: list[bytes] = []

    def send(self, body: Message, version: int) -> int:
        correlation_id = next(_correlation_ids)
        self.sock.sendall(encode_request(body, version, correlation_id, "read-committed-test"))
        return correlation_id

    def receive(self, body: Message, version: int, correlation_id: int) -> Any:
        while not self.frames:
            data = self.sock.recv(1 << 20)
            assert data, "the broker hung up"
            self.frames += self.decoder.feed(data)
        assert body.API_KEY is not None
        answered, response = decode_response(self.frames.pop(0), body.API_KEY, version)
        assert answered == correlation_id
        return response

    def call(self, body: Message, version: int) -> Any:
        return self.receive(body, version, self.send(body, version))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def connection(strom: Kafka) -> Iterator[Connection]:
    opened = Connection(strom)
    yield opened
    opened.close()


class Producer:
    """An idempotent producer id writing transactional batches, and its coordinator."""

    def __init__(self, connection: Connection, topic: str) -> None:
        response = connection.call(InitProducerIdRequest(transactional_id=None,
                                                         transaction_timeout_ms=60000), 4)
        assert response.error_code == ErrorCode.NONE
        self.connection, self.topic = connection, topic
        self.producer_id, self.epoch = response.producer_id, response.producer_epoch
        self.sequence = 0

    def send(self, *values: bytes) -> int:
        """A transactional batch of ``values``; its base offset."""
        records = build_record_batch([(None, value, (), None) for value in values],
                                     producer_id=self.producer_id, producer_epoch=self.epoch,
                                     base_sequence=self.sequence, is_transactional=True)
        self.sequence += len(values)
        return produce(self.connection, self.topic, bytes(records))

    def end(self, commit: bool) -> None:
        request = WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            self.producer_id, self.epoch, commit, (WritableTxnMarkerTopic(self.topic, (0,)),), 0),))
        response = self.connection.call(request, 1)
        assert [p.error_code for m in response.markers for t in m.topics for p in t.partitions] \
            == [ErrorCode.NONE]


def produce(connection: Connection, topic: str, records: bytes) -> int:
    request = ProduceRequest(acks=-1, timeout_ms=10000, topic_data=(
        TopicProduceData(topic, (PartitionProduceData(0, records),)),))
    (part,) = connection.call(request, 9).responses[0].partition_responses
    assert part.error_code == ErrorCode.NONE
    base_offset: int = part.base_offset
    return base_offset


def plain(connection: Connection, topic: str, value: bytes) -> int:
    return produce(connection, topic, bytes(build_record_batch([(None, value, (), None)])))


def fetch_request(topic: str, offset: int, *, committed: bool = True, max_wait_ms: int = 0,
                  min_bytes: int = 0) -> FetchRequest:
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                        isolation_level=1 if committed else 0, topics=(FetchTopic(topic, partitions=(
                            FetchPartition(0, fetch_offset=offset, partition_max_bytes=1 << 20),)),))


def fetch(connection: Connection, topic: str, offset: int, *, committed: bool = True) -> Any:
    response = connection.call(fetch_request(topic, offset, committed=committed), FETCH_VERSION)
    (part,) = response.responses[0].partitions
    assert part.error_code == ErrorCode.NONE
    return part


def aborted(part: Any) -> list[tuple[int, int]]:
    return [(entry.producer_id, entry.first_offset) for entry in part.aborted_transactions]


def read_values(kafka: Kafka, topic: str, isolation: str) -> list[bytes]:
    """Every record of partition 0 up to its end, as a confluent-kafka consumer sees them."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"{topic}-{isolation}",
                         "enable.partition.eof": True, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
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


def test_fetch_lists_the_aborted_transactions_and_consumers_skip_their_records(
        strom: Kafka, connection: Connection) -> None:
    topic = strom.topic("rc")
    create_topic(strom, topic)
    first, second = Producer(connection, topic), Producer(connection, topic)
    plain(connection, topic, b"p0")  # 0
    first_start = first.send(b"a1")  # 1: aborted below
    second.send(b"b1")  # 2: committed below
    first_second_batch = first.send(b"a2", b"a3")  # 3-4
    first.end(commit=False)  # 5
    second.end(commit=True)  # 6
    plain(connection, topic, b"p1")  # 7
    third_start = first.send(b"a4")  # 8: a second transaction of the first producer, aborted
    first.end(commit=False)  # 9
    assert (first_start, first_second_batch, third_start) == (1, 3, 8)

    whole = fetch(connection, topic, 0)
    assert whole.high_watermark == whole.last_stable_offset == 10
    assert aborted(whole) == [(first.producer_id, 1), (first.producer_id, 8)]
    # From inside the first aborted transaction: it began before the fetch offset, and is listed.
    assert aborted(fetch(connection, topic, 4)) == [(first.producer_id, 1), (first.producer_id, 8)]
    assert aborted(fetch(connection, topic, 6)) == [(first.producer_id, 8)]
    assert fetch(connection, topic, 10).aborted_transactions == ()
    assert fetch(connection, topic, 0, committed=False).aborted_transactions is None
    returned = [header.base_offset for _, header in iter_batches(bytes(whole.records))]
    assert returned == [0, 1, 2, 3, 5, 6, 7, 8, 9]  # the broker filters nothing: clients do

    assert read_values(strom, topic, "read_committed") == [b"p0", b"b1", b"p1"]
    assert read_values(strom, topic, "read_uncommitted") == \
        [b"p0", b"a1", b"b1", b"a2", b"a3", b"p1", b"a4"]


def test_an_open_transaction_holds_the_lso_and_a_waiting_fetch_wakes_at_its_marker(
        strom: Kafka, connection: Connection) -> None:
    topic = strom.topic("rc-wait")
    create_topic(strom, topic)
    producer = Producer(connection, topic)
    plain(connection, topic, b"before")  # 0
    producer.send(b"t1", b"t2")  # 1-2, open
    plain(connection, topic, b"after")  # 3: above the open transaction
    held = fetch(connection, topic, 1)
    assert (held.high_watermark, held.last_stable_offset) == (4, 1)
    assert held.records in (None, b"") and held.aborted_transactions == ()

    waiter = Connection(strom)
    try:
        # A read_committed long poll at the LSO: nothing to return, so it waits (no answer
        # within a second), far longer than the test would.
        request = fetch_request(topic, 1, max_wait_ms=int(TIMEOUT * 2000), min_bytes=1)
        correlation_id = waiter.send(request, FETCH_VERSION)
        waiter.sock.settimeout(1.0)
        with pytest.raises(TimeoutError):
            waiter.sock.recv(1)
        waiter.sock.settimeout(TIMEOUT)
        producer.end(commit=False)  # 4: the LSO moves to 5
        response = waiter.receive(request, FETCH_VERSION, correlation_id)
    finally:
        waiter.close()
    (part,) = response.responses[0].partitions
    assert part.last_stable_offset == part.high_watermark == 5
    assert [header.base_offset for _, header in iter_batches(bytes(part.records))] == [1, 3, 4]
    assert aborted(part) == [(producer.producer_id, 1)]
    assert read_values(strom, topic, "read_committed") == [b"before", b"after"]
