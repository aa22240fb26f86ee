"""Transactional offsets and transaction markers on Kafka 3.9 and Strom: a transaction's
offsets (InitProducerId with a transactional id, AddOffsetsToTxn, TxnOffsetCommit)
pending until it commits (OffsetFetch with and without RequireStable, v7 and v8), an
abort dropping them, KIP-447's member check, and WriteTxnMarkers' errors (unknown
partitions, a fenced coordinator epoch, an old producer epoch). Each broker hands out its
own producer ids, so requests naming one are built per side (``Pair.each``); the answers
must still be equal.

Both coordinators write the markers after answering EndTxn, and Kafka applies a
marker's offsets on a scheduler thread after that, so a RequireStable fetch after
EndTxn is repeated until it is not UNSTABLE_OFFSET_COMMIT, and a request meeting the
previous transaction still completing (CONCURRENT_TRANSACTIONS) until it does not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from strom.broker.group.offsets_topic import OFFSETS_TOPIC, partition_for
from strom.protocol.message import Message
from strom.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from strom.protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from strom.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
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
from tests.differential.transactions import (
    Producers,
    each_marker,
    each_settled,
    end_txn,
    markers,
    producer_ids,
)
from tests.differential.wire import Pair, Side, create_topic, unique

OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions: Kafka's default, on both brokers
UNSTABLE_OFFSET_COMMIT = 88
INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, TRANSACTION_ABORTABLE = 48, 49, 120


@pytest.fixture(scope="module")
def topic(pair: Pair) -> str:
    """A topic whose offsets the groups commit; Kafka's group coordinator loaded first."""
    deadline = time.monotonic() + 90
    for request in (FindCoordinatorRequest(key="warm-up", key_type=0), OffsetFetchRequest(group_id="warm-up")):
        while pair.kafka.raw(request, 2).error_code:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "Kafka 3.9's group coordinator never loaded"
            time.sleep(0.2)
    return create_topic(pair, unique("txn-in"))


def txn_commit(group: str, topic: str, offset: int, producer: tuple[int, int], *, generation: int = -1,
               member: str = "", transactional_id: str = "txn-diff") -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest(
        transactional_id=transactional_id, group_id=group, producer_id=producer[0], producer_epoch=producer[1],
        generation_id=generation, member_id=member,
        topics=(TxnOffsetCommitRequestTopic(topic, (TxnOffsetCommitRequestPartition(0, offset, -1, "m"),)),))


def fetch(group: str, topic: str, *, require_stable: bool, version: int = 7) -> OffsetFetchRequest:
    if version >= 8:
        return OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group, topics=(
            OffsetFetchRequestTopics(topic, (0,)),)),), require_stable=require_stable)
    return OffsetFetchRequest(group_id=group, topics=(OffsetFetchRequestTopic(topic, (0,)),),
                              require_stable=require_stable)


def settled(pair: Pair, request: Message, version: int) -> dict[str, Any]:
    """Ask each broker until its answer is not UNSTABLE_OFFSET_COMMIT, then compare."""
    answers = []
    for side in pair.sides():
        deadline = time.monotonic() + 30
        while UNSTABLE_OFFSET_COMMIT in _errors(answer := side.ask(request, version)):
            assert time.monotonic() < deadline, "the offsets stayed unstable"
            time.sleep(0.05)
        answers.append(answer)
    assert answers[0] == answers[1]
    return answers[0]


def _errors(answer: Any) -> list[int]:
    if isinstance(answer, dict):
        return [v for k, v in answer.items() if k == "error_code"] + [e for v in answer.values() for e in _errors(v)]
    if isinstance(answer, list):
        return [e for v in answer for e in _errors(v)]
    return []


def _offset_partition(group: str) -> tuple[str, int]:
    return OFFSETS_TOPIC, partition_for(group, OFFSETS_PARTITIONS)


def add_offsets(transactional_id: str, producer: Producers, group: str) -> Callable[[Side], Message]:
    def build(side: Side) -> Message:
        pid, epoch = producer[id(side)]
        return AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch,
                                      group_id=group)
    return build


def test_pending_until_the_transaction_commits_and_dropped_by_an_abort(pair: Pair, topic: str) -> None:
    group, transactional_id = unique("txn-group"), unique("txn-id")
    commit = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=(
        OffsetCommitRequestTopic(topic, (OffsetCommitRequestPartition(0, 5, committed_metadata="plain"),)),))
    pair.same(commit, 8)
    producer = producer_ids(pair, transactional_id)

    each_settled(pair, add_offsets(transactional_id, producer, group), 3)
    answer = pair.each(lambda side: txn_commit(group, topic, 10, producer[id(side)],
                                               transactional_id=transactional_id), 3)
    assert answer["topics"][0]["partitions"][0]["error_code"] == 0
    for version in (7, 8):
        unstable = pair.same(fetch(group, topic, require_stable=True, version=version), version)
        assert UNSTABLE_OFFSET_COMMIT in _errors(unstable)
        pair.same(fetch(group, topic, require_stable=False, version=version), version)
    # every partition (null topics): the committed ones, unstable too where one is pending
    every = pair.same(OffsetFetchRequest(group_id=group, topics=None, require_stable=True), 7)
    assert UNSTABLE_OFFSET_COMMIT in _errors(every)
    pair.same(OffsetFetchRequest(group_id=group, topics=None, require_stable=False), 7)
    each_settled(pair, end_txn(transactional_id, producer, True), 3)
    committed = settled(pair, fetch(group, topic, require_stable=True), 7)
    assert committed["topics"][0]["partitions"][0]["committed_offset"] == 10

    each_settled(pair, add_offsets(transactional_id, producer, group), 3)
    pair.each(lambda side: txn_commit(group, topic, 20, producer[id(side)], transactional_id=transactional_id), 3)
    each_settled(pair, end_txn(transactional_id, producer, False), 3)
    aborted = settled(pair, fetch(group, topic, require_stable=True), 7)
    assert aborted["topics"][0]["partitions"][0]["committed_offset"] == 10


def test_a_group_with_only_pending_offsets(pair: Pair, topic: str) -> None:
    group, transactional_id = unique("txn-group"), unique("txn-id")
    producer = producer_ids(pair, transactional_id)
    each_settled(pair, add_offsets(transactional_id, producer, group), 3)
    pair.each(lambda side: txn_commit(group, topic, 3, producer[id(side)], transactional_id=transactional_id), 3)
    for require_stable in (True, False):
        pair.same(OffsetFetchRequest(group_id=group, topics=None, require_stable=require_stable), 7)
        pair.same(fetch(group, topic, require_stable=require_stable), 7)
    each_settled(pair, end_txn(transactional_id, producer, False), 3)


def test_txn_offset_commit_checks(pair: Pair, topic: str) -> None:
    """A topic neither broker knows; in a transaction, a member the group does not have
    (KIP-447, v3) and a plain commit without member information (older clients)."""
    group, transactional_id = unique("txn-group"), unique("txn-id")
    producer = producer_ids(pair, transactional_id)
    nowhere = unique("nowhere")
    pair.each(lambda side: txn_commit(group, nowhere, 1, producer[id(side)]), 3)
    each_settled(pair, add_offsets(transactional_id, producer, group), 3)
    unknown_member = pair.each(lambda side: txn_commit(group, topic, 1, producer[id(side)], generation=3,
                                                       member="who", transactional_id=transactional_id), 3)
    assert unknown_member["topics"][0]["partitions"][0]["error_code"] == 25  # UNKNOWN_MEMBER_ID
    pair.each(lambda side: txn_commit(group, topic, 2, producer[id(side)], transactional_id=transactional_id), 0)
    each_settled(pair, end_txn(transactional_id, producer, False), 3)


def test_write_txn_markers_errors(pair: Pair, topic: str) -> None:
    producer = producer_ids(pair)
    group_partition = _offset_partition(unique("txn-group"))

    def bumped(side: Side) -> tuple[int, int]:
        pid, epoch = producer[id(side)]
        return pid, epoch + 1

    each_marker(pair, lambda side: markers(producer[id(side)], False, [(topic, 0), (topic, 7), ("missing-topic", 0)],
                                           coordinator_epoch=5), 1)
    each_marker(pair, lambda side: markers(producer[id(side)], False, [(topic, 0), group_partition], coordinator_epoch=4), 1)
    each_marker(pair, lambda side: markers(bumped(side), True, [(topic, 0)], coordinator_epoch=5), 0)
    each_marker(pair, lambda side: markers(producer[id(side)], True, [(topic, 0)], coordinator_epoch=5), 1)


def test_offset_delete_drops_the_pending_ones_too(pair: Pair, topic: str) -> None:
    """Kafka's ``removeOffsets``: the transaction's later commit does not bring it back."""
    group, transactional_id = unique("txn-group"), unique("txn-id")
    producer = producer_ids(pair, transactional_id)
    each_settled(pair, add_offsets(transactional_id, producer, group), 3)
    pair.each(lambda side: txn_commit(group, topic, 10, producer[id(side)], transactional_id=transactional_id), 3)
    pair.same(OffsetDeleteRequest(group_id=group, topics=(
        OffsetDeleteRequestTopic(topic, (OffsetDeleteRequestPartition(0),)),)), 0)
    each_settled(pair, end_txn(transactional_id, producer, True), 3)
    after = settled(pair, fetch(group, topic, require_stable=True), 7)
    assert after["topics"][0]["partitions"][0]["committed_offset"] == -1


def test_kip_890_verification_of_txn_offset_commit_and_produce(pair: Pair, topic: str) -> None:
    """KIP-890 part 1 (Kafka 3.6+, KAFKA-15449): before AddOffsetsToTxn the group's partition
    is not in the transaction (INVALID_TXN_STATE below v4, TRANSACTION_ABORTABLE at v4),
    another id's producer id is INVALID_PRODUCER_ID_MAPPING; a transactional Produce to a
    partition never added is refused the same way, below v11 and at it."""
    group, transactional_id = unique("txn-group"), unique("txn-id")
    producer = producer_ids(pair, transactional_id)
    other = producer_ids(pair, unique("txn-id"))
    for version, expected in ((3, INVALID_TXN_STATE), (4, TRANSACTION_ABORTABLE)):
        answer = pair.each(lambda side: txn_commit(group, topic, 1, producer[id(side)],
                                                   transactional_id=transactional_id), version)
        assert _errors(answer) == [expected]
    answer = pair.each(lambda side: txn_commit(group, topic, 1, other[id(side)], transactional_id=transactional_id), 3)
    assert _errors(answer) == [INVALID_PRODUCER_ID_MAPPING]
    for version, expected in ((9, INVALID_TXN_STATE), (11, TRANSACTION_ABORTABLE)):
        answer = pair.each(lambda side: transactional_produce(transactional_id, producer[id(side)], topic), version)
        assert _errors(answer) == [expected]


def transactional_produce(transactional_id: str, producer: tuple[int, int], topic: str) -> ProduceRequest:
    records = build_record_batch([(None, b"stray", (), None)], producer_id=producer[0], producer_epoch=producer[1],
                                 base_sequence=0, is_transactional=True)
    return ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=(
        TopicProduceData(topic, (PartitionProduceData(0, bytes(records)),)),))
