"""KIP-890 part 1 on a real ``strom serve``: a transactional batch is appended only to a
partition in the producer's ongoing transaction, so a Produce held back past an abort is
refused and leaves no hanging transaction (issue 19, KAFKA-17754); TxnOffsetCommit is
checked the same way; a real client's commit and abort go on working.

Requests are raw, through the generated codec, on connections of the test's own (one of
them through ``tests.support.netproxy`` to hold a Produce back). One broker serves the
module; each test has its own topic and transactional id.
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as ClientPartition

from strom.protocol.error_codes import ErrorCode
from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from strom.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from strom.protocol.messages.end_txn_request import EndTxnRequest
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
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
from strom.protocol.records.v2_builder import build_record_batch
from tests.support.broker_process import BrokerProcess
from tests.support.clients import Kafka, create_topic
from tests.support.netproxy import UPSTREAM, TcpProxy

TIMEOUT = 30.0  # generous: a loaded two-core machine
RETRIABLE = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS})
_correlation_ids = itertools.count(1)
_names = itertools.count(1)


@pytest.fixture(scope="module")
def strom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    directory: Path = tmp_path_factory.mktemp("txn-verification")
    broker = BrokerProcess(directory / "data", {
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1"}).start()
    try:
        yield Kafka("strom", broker.bootstrap, broker)
    finally:
        broker.stop()


class Connection:
    """One connection; requests answered in order (a Produce may be sent now, read later)."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT)
        self.decoder = FrameDecoder()
        self.frames: list[bytes] = []

    @classmethod
    def to(cls, bootstrap: str) -> Connection:
        host, port = bootstrap.rsplit(":", 1)
        return cls(host, int(port))

    def send(self, body: Message, version: int) -> int:
        correlation_id = next(_correlation_ids)
        self.sock.sendall(encode_request(body, version, correlation_id, "verification-test"))
        return correlation_id

    def receive(self, body: Message, version: int, correlation_id: int) -> Any:
        while not self.frames:
            data = self.sock.recv(65536)
            assert data, "the broker hung up"
            self.frames += self.decoder.feed(data)
        assert body.API_KEY is not None
        answered_id, response = decode_response(self.frames.pop(0), body.API_KEY, version)
        assert answered_id == correlation_id
        return response

    def call(self, body: Message, version: int) -> Any:
        return self.receive(body, version, self.send(body, version))

    def settled(self, body: Message, version: int) -> Any:
        """Asked again while the answer is retriable (a coordinator loading, a transaction completing)."""
        deadline = time.monotonic() + TIMEOUT
        while (answer := self.call(body, version)).error_code in RETRIABLE:
            assert time.monotonic() < deadline, f"kept answering {answer}"
            time.sleep(0.05)
        return answer

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def conn(strom: Kafka) -> Iterator[Connection]:
    connection = Connection.to(strom.bootstrap)
    yield connection
    connection.close()


def _topic(strom: Kafka) -> str:
    topic = strom.topic("verified")
    create_topic(strom, topic)
    return topic


def init(conn: Connection, txn_id: str) -> tuple[int, int]:
    answer = conn.settled(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000), 3)
    assert answer.error_code == ErrorCode.NONE
    return answer.producer_id, answer.producer_epoch


def add_partition(conn: Connection, txn_id: str, producer: tuple[int, int], topic: str) -> None:
    answer = conn.call(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=producer[0],
        v3_and_below_producer_epoch=producer[1],
        v3_and_below_topics=(AddPartitionsToTxnTopic(topic, (0,)),)), 3)
    errors = [p.partition_error_code for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition]
    assert errors == [ErrorCode.NONE]


def end(conn: Connection, txn_id: str, producer: tuple[int, int], committed: bool) -> None:
    answer = conn.settled(EndTxnRequest(transactional_id=txn_id, producer_id=producer[0],
                                        producer_epoch=producer[1], committed=committed), 3)
    assert answer.error_code == ErrorCode.NONE


def produce(txn_id: str | None, producer: tuple[int, int], topic: str, values: list[bytes],
            sequence: int = 0) -> ProduceRequest:
    records = build_record_batch(((None, v, (), None) for v in values), producer_id=producer[0],
                                 producer_epoch=producer[1], base_sequence=sequence, is_transactional=True)
    return ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=(
        TopicProduceData(topic, (PartitionProduceData(0, bytes(records)),)),))


def produce_error(answer: Any) -> int:
    (part,) = answer.responses[0].partition_responses
    code: int = part.error_code
    return code


def offsets(conn: Connection, topic: str) -> tuple[int, int]:
    """(high watermark, last stable offset) by ListOffsets latest, read_uncommitted and read_committed."""
    found = []
    for isolation in (0, 1):
        answer = conn.call(ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=(
            ListOffsetsTopic(topic, (ListOffsetsPartition(partition_index=0, timestamp=-1),)),)), 2)
        (part,) = answer.topics[0].partitions
        assert part.error_code == ErrorCode.NONE
        found.append(part.offset)
    return found[0], found[1]


def stable(conn: Connection, topic: str, at_least: int = 0) -> tuple[int, int]:
    """(HW, LSO) once the LSO has caught up with the HW (the markers written) and the HW is
    at least ``at_least`` (a marker that is the partition's only write: LSO == HW before it too)."""
    deadline = time.monotonic() + TIMEOUT
    while (found := offsets(conn, topic))[0] != found[1] or found[0] < at_least:
        assert time.monotonic() < deadline, f"{topic}: the last stable offset stayed behind: {found}"
        time.sleep(0.05)
    return found


def test_a_partition_not_in_the_transaction_is_refused(strom: Kafka, conn: Connection) -> None:
    topic, txn_id = _topic(strom), f"not-added-{next(_names)}"
    old_epoch = init(conn, txn_id)
    producer = init(conn, txn_id)  # the epoch bumped: the first one is fenced
    assert producer == (old_epoch[0], old_epoch[1] + 1)
    before = offsets(conn, topic)
    # Produce v9 is told INVALID_TXN_STATE; v11 knows TRANSACTION_ABORTABLE (KIP-890)
    assert produce_error(conn.call(produce(txn_id, producer, topic, [b"stray"]), 9)) == ErrorCode.INVALID_TXN_STATE
    assert produce_error(conn.call(produce(txn_id, producer, topic, [b"stray"]), 11)) == \
        ErrorCode.TRANSACTION_ABORTABLE
    assert offsets(conn, topic) == before  # nothing appended, the LSO where it was
    # another id's producer id, and an old epoch (the coordinator's PRODUCER_FENCED)
    assert produce_error(conn.call(produce(txn_id, (producer[0] + 1000, 0), topic, [b"x"]), 9)) == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    add_partition(conn, txn_id, producer, topic)
    assert produce_error(conn.call(produce(txn_id, old_epoch, topic, [b"x"]), 9)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert offsets(conn, topic) == before
    # once added, the same batch goes in and opens the transaction (the LSO holds)
    assert produce_error(conn.call(produce(txn_id, producer, topic, [b"in"]), 9)) == ErrorCode.NONE
    high_watermark, last_stable = offsets(conn, topic)
    assert high_watermark == before[0] + 1 and last_stable == before[1]
    end(conn, txn_id, producer, committed=True)
    assert stable(conn, topic) == (before[0] + 2, before[0] + 2)  # the record and its marker


def test_a_produce_held_back_past_an_abort_is_refused(strom: Kafka, conn: Connection) -> None:
    """The hanging transaction of KAFKA-17754: the producer's first batch to the partition
    is held in the network while the transaction aborts. Unverified, it would open a
    transaction there that no coordinator knows of, and the LSO would stay behind it."""
    topic, txn_id = _topic(strom), f"delayed-{next(_names)}"
    producer = init(conn, txn_id)
    add_partition(conn, txn_id, producer, topic)
    host, port = strom.bootstrap.rsplit(":", 1)
    with TcpProxy(0, host, int(port), name="held-produce") as proxy:
        held = Connection("127.0.0.1", proxy.port)
        try:
            proxy.black_hole(UPSTREAM)
            request = produce(txn_id, producer, topic, [b"late"])
            correlation_id = held.send(request, 9)
            deadline = time.monotonic() + TIMEOUT
            while proxy.stats().withheld[UPSTREAM] == 0:  # the Produce is in the proxy's hands
                assert time.monotonic() < deadline, "the proxy never got the Produce"
                time.sleep(0.02)
            before = offsets(conn, topic)
            end(conn, txn_id, producer, committed=False)
            # The abort marker is in: written after EndTxn's answer, the partition's only record.
            high_watermark, _ = stable(conn, topic, at_least=before[0] + 1)
            proxy.pass_through(UPSTREAM)
            answer = held.receive(request, 9, correlation_id)
        finally:
            held.close()
    assert produce_error(answer) in (ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_PRODUCER_EPOCH)
    assert offsets(conn, topic) == (high_watermark, high_watermark)  # nothing appended, nothing hanging
    consumer = Consumer({"bootstrap.servers": strom.bootstrap, "group.id": f"reader-{next(_names)}",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([ClientPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT
        values: list[bytes] = []
        while True:  # read_committed reaches the end of the partition: nothing holds it back
            assert time.monotonic() < deadline, "the read_committed consumer never reached the end"
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
            elif message.error().code() == KafkaError._PARTITION_EOF:
                assert message.offset() == high_watermark
                break
        assert values == []
    finally:
        consumer.close()


def test_txn_offset_commit_needs_the_group_in_the_transaction(strom: Kafka, conn: Connection) -> None:
    topic, txn_id, group = _topic(strom), f"offsets-{next(_names)}", f"group-{next(_names)}"
    producer = init(conn, txn_id)

    def txn_commit(producer_id: int, epoch: int, version: int = 3) -> int:
        answer = conn.call(TxnOffsetCommitRequest(
            transactional_id=txn_id, group_id=group, producer_id=producer_id, producer_epoch=epoch,
            generation_id=-1, member_id="",
            topics=(TxnOffsetCommitRequestTopic(topic, (TxnOffsetCommitRequestPartition(0, 7),)),)), version)
        (part,) = answer.topics[0].partitions
        code: int = part.error_code
        return code

    assert txn_commit(*producer) == ErrorCode.INVALID_TXN_STATE  # AddOffsetsToTxn not sent
    assert txn_commit(*producer, version=4) == ErrorCode.TRANSACTION_ABORTABLE
    assert txn_commit(producer[0] + 1000, producer[1]) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    answer = conn.settled(AddOffsetsToTxnRequest(transactional_id=txn_id, producer_id=producer[0],
                                                 producer_epoch=producer[1], group_id=group), 3)
    assert answer.error_code == ErrorCode.NONE
    assert txn_commit(*producer) == ErrorCode.NONE
    end(conn, txn_id, producer, committed=True)


def test_a_real_clients_commit_and_abort(strom: Kafka) -> None:
    topic, group = _topic(strom), f"eos-{next(_names)}"
    producer = Producer({"bootstrap.servers": strom.bootstrap, "transactional.id": f"client-{next(_names)}"})
    producer.init_transactions(TIMEOUT)
    for value, offset, commit in ((b"kept", 1, True), (b"dropped", 2, False), (b"kept too", 3, True)):
        producer.begin_transaction()
        producer.produce(topic, value, partition=0)
        producer.flush(TIMEOUT)
        metadata = Consumer({"bootstrap.servers": strom.bootstrap, "group.id": group})
        try:
            producer.send_offsets_to_transaction([ClientPartition(topic, 0, offset)], metadata.consumer_group_metadata(),
                                                 TIMEOUT)
        finally:
            metadata.close()
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)
    consumer = Consumer({"bootstrap.servers": strom.bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        consumer.assign([ClientPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert time.monotonic() < deadline, f"read {values} only"
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
            elif message.error().code() == KafkaError._PARTITION_EOF:
                break
        assert values == [b"kept", b"kept too"]
        (committed,) = consumer.committed([ClientPartition(topic, 0)], timeout=TIMEOUT)
        assert committed.offset == 3  # the aborted transaction's 2 never was
    finally:
        consumer.close()
