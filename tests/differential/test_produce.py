"""Produce's answers, success and every error, sent to Kafka 3.9 and to Strom alike; each
test then reads the partition's offsets so both logs are seen to hold the same."""

from __future__ import annotations

import time

import pytest

from strom.protocol.headers import encode_request
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.records.legacy import build_message_set
from tests.differential.records import batch, list_offsets, produce
from tests.differential.wire import Pair, Side, create_topic, unique

LATEST = -1


def _end_offsets(pair: Pair, topic: str, partition: int = 0) -> int:
    answer = pair.same(list_offsets(topic, LATEST, partition), 7)
    offset: int = answer["topics"][0]["partitions"][0]["offset"]
    return offset


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9, 11])
def test_produce_then_produce_again(pair: Pair, version: int) -> None:
    topic = create_topic(pair, unique("produce"))
    for first in (0, 3):
        answer = pair.same(produce(topic, batch(3, first=first)), version)
        assert answer["responses"][0]["partition_responses"][0]["base_offset"] == first
    assert _end_offsets(pair, topic) == 6


@pytest.mark.parametrize("acks", [1, -1])
def test_acks_one_and_all(pair: Pair, acks: int) -> None:
    topic = create_topic(pair, unique("acks"))
    assert pair.same(produce(topic, batch(), acks=acks), 9)["responses"][0]["partition_responses"][0]["error_code"] == 0


@pytest.mark.parametrize("acks", [2, -2, 3])
def test_invalid_acks(pair: Pair, acks: int) -> None:
    topic = create_topic(pair, unique("acks"))
    answer = pair.same(produce(topic, batch(), acks=acks), 9)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 21  # INVALID_REQUIRED_ACKS
    assert _end_offsets(pair, topic) == 0


def test_acks_zero_gets_no_answer_and_writes(pair: Pair) -> None:
    """acks=0: no response at all; the next request's answer on the same connection is its
    own, and the records are there."""
    topic = create_topic(pair, unique("acks0"))
    for side in pair.sides():
        side.client.correlation_id += 1
        side.client.sock.sendall(encode_request(produce(topic, batch(4), acks=0), 9, side.client.correlation_id,
                                                side.client.client_id))
    assert _end_offsets(pair, topic) == 4


def test_a_batch_too_large(pair: Pair) -> None:
    topic = create_topic(pair, unique("large"))
    answer = pair.same(produce(topic, batch(1, value_size=1_100_000)), 9)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 10  # MESSAGE_TOO_LARGE
    assert _end_offsets(pair, topic) == 0


def test_a_batch_too_large_for_the_topic(pair: Pair) -> None:
    topic = create_topic(pair, unique("large"), configs={"max.message.bytes": "1000"})
    answer = pair.same(produce(topic, batch(1, value_size=2000)), 9)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 10
    assert pair.same(produce(topic, batch(1, value_size=100)), 9)["responses"][0]["partition_responses"][0][
        "error_code"] == 0


@pytest.mark.parametrize("where", [-1, 30, 70])
def test_a_corrupt_crc(pair: Pair, where: int) -> None:
    topic = create_topic(pair, unique("crc"))
    records = bytearray(batch(3))
    records[where] ^= 0xFF
    answer = pair.same(produce(topic, bytes(records)), 9)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] != 0
    assert _end_offsets(pair, topic) == 0


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("version", [2, 3, 9])
def test_a_legacy_message_set(pair: Pair, magic: int, version: int) -> None:
    """Magic 0 and 1 are allowed up to Produce v2; from v3 a request must carry v2 batches."""
    topic = create_topic(pair, unique("magic"))
    records = bytes(build_message_set([(b"k", b"v", 1_700_000_000_000)], magic=magic))
    pair.same(produce(topic, records), version)
    _end_offsets(pair, topic)


@pytest.mark.parametrize("version", [7, 8, 9])
def test_keyless_records_on_a_compacted_topic(pair: Pair, version: int) -> None:
    topic = create_topic(pair, unique("compact"), configs={"cleanup.policy": "compact"})
    answer = pair.same(produce(topic, batch(3, keyed=False)), version)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 87  # INVALID_RECORD
    assert pair.same(produce(topic, batch(3)), version)["responses"][0]["partition_responses"][0]["error_code"] == 0
    assert _end_offsets(pair, topic) == 3


def test_unknown_topic_and_partition(pair: Pair) -> None:
    answer = pair.same(produce(unique("absent"), batch()), 9)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 3
    topic = create_topic(pair, unique("onepart"))
    for partition in (1, -1):
        answer = pair.same(produce(topic, batch(), partition=partition), 9)
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == 3


def test_an_empty_record_set(pair: Pair) -> None:
    topic = create_topic(pair, unique("empty"))
    pair.same(produce(topic, b""), 9)


# --- idempotent producers -----------------------------------------------------------------

def _init_producer(pair: Pair) -> dict[str, tuple[int, int]]:
    """InitProducerId on both (compared); each broker's producer id and epoch.

    Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its producer id manager has its first
    block from ZooKeeper (a broker's first seconds); that wait is not compared.
    """
    deadline = time.monotonic() + 60
    while pair.kafka.raw(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
                         4).error_code != 0:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "Kafka 3.9 allocates no producer id"
        time.sleep(0.2)
    pair.same(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
    ids = {}
    for side in pair.sides():  # the compared answer's ids are normalised away: ask again for them
        answer = side.raw(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
        ids[side.bootstrap] = (answer.producer_id, answer.producer_epoch)  # type: ignore[attr-defined]
    return ids


def _idempotent(topic: str, ids: dict[str, tuple[int, int]], sequence: int, first: int, epoch_delta: int = 0,
                count: int = 3):
    def build(side: Side):  # type: ignore[no-untyped-def]
        producer_id, epoch = ids[side.bootstrap]
        return produce(topic, batch(count, first=first, producer_id=producer_id, producer_epoch=epoch + epoch_delta,
                                    base_sequence=sequence))
    return build


def test_idempotent_sequences(pair: Pair) -> None:
    topic = create_topic(pair, unique("idem"))
    ids = _init_producer(pair)
    first = pair.each(_idempotent(topic, ids, 0, 0), 9)
    assert first["responses"][0]["partition_responses"][0]["error_code"] == 0
    duplicate = pair.each(_idempotent(topic, ids, 0, 0), 9)  # a retry of the same batch
    assert duplicate["responses"][0]["partition_responses"][0]["error_code"] == 0
    gap = pair.each(_idempotent(topic, ids, 7, 3), 9)
    assert gap["responses"][0]["partition_responses"][0]["error_code"] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    pair.each(_idempotent(topic, ids, 1, 1), 9)  # overlaps the first batch
    following = pair.each(_idempotent(topic, ids, 3, 3), 9)
    assert following["responses"][0]["partition_responses"][0]["error_code"] == 0
    assert _end_offsets(pair, topic) == 6


def test_a_new_producer_starting_past_sequence_zero(pair: Pair) -> None:
    topic = create_topic(pair, unique("idem"))
    ids = _init_producer(pair)
    pair.each(_idempotent(topic, ids, 5, 0), 9)
    _end_offsets(pair, topic)


def test_stale_and_future_producer_epochs(pair: Pair) -> None:
    topic = create_topic(pair, unique("epoch"))
    ids = _init_producer(pair)
    assert pair.each(_idempotent(topic, ids, 0, 0, epoch_delta=1), 9)[
        "responses"][0]["partition_responses"][0]["error_code"] == 0
    pair.each(_idempotent(topic, ids, 3, 3, epoch_delta=0), 9)  # the epoch before: stale
    pair.each(_idempotent(topic, ids, 3, 3, epoch_delta=2), 9)  # a newer epoch, sequence not 0
    _end_offsets(pair, topic)
