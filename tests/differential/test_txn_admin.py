"""The transaction admin APIs (KIP-664) on Kafka 3.9 and Strom: DescribeProducers,
ListTransactions (v0, v1 with KIP-994's DurationFilter), DescribeTransactions, and
``Admin.abortTransaction``'s flow (DescribeProducers, then WriteTxnMarkers(abort) straight
to the partition's leader) clearing a transaction left open on a partition.

One scenario, the same requests on both brokers: a transactional producer (raw protocol:
InitProducerId, AddPartitionsToTxn of two partitions, one transactional batch on the
first) leaves its transaction open; the admin APIs describe it; the abort flow clears it
from the partition (the last stable offset reaches the high watermark); the producer's
commit then completes it at the coordinator (CompleteCommit). Each broker hands out its
own producer ids (requests naming one are built per side) and reads its own clock:
times taken from the wall clock are shown as ``"<time>"`` (the batch's fixed timestamps
stay, so they are compared), and lists whose order is a hash set's in Kafka are sorted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from strom.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from strom.protocol.message import Message
from strom.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from strom.protocol.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from strom.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from strom.protocol.messages.list_transactions_request import ListTransactionsRequest
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from strom.protocol.records.v2_builder import build_record_batch
from tests.differential.normalise import normalise
from tests.differential.records import BASE_TIMESTAMP, list_offsets, produce
from tests.differential.transactions import (
    Producers,
    each_marker,
    each_settled,
    end_txn,
    markers,
    producer_ids,
)
from tests.differential.wire import (
    PAIRS_COMPARED,
    Pair,
    Side,
    create_topic,
    leaf_differences,
    unique,
)

TIMEOUT_MS = 60000  # the transaction's: far longer than the scenario, so no coordinator aborts it
_WALL_CLOCK = BASE_TIMESTAMP + 86_400_000  # a time past this came from a broker's clock
_TIME_FIELDS = frozenset({"transaction_start_time_ms", "last_timestamp"})
TRANSACTIONAL_ID_NOT_FOUND = 105


@pytest.fixture(scope="module")
def topic(pair: Pair) -> str:
    return create_topic(pair, unique("txn-admin"), partitions=2)


def plain(answer: Any) -> Any:
    """``answer`` with wall-clock times as ``"<time>"`` and hash-ordered lists sorted."""
    if isinstance(answer, dict):
        out = {key: "<time>" if key in _TIME_FIELDS and isinstance(value, int) and value > _WALL_CLOCK
               else plain(value) for key, value in answer.items()}
        for key, sort_key in (("topics", "topic"), ("transaction_states", "transactional_id")):
            if isinstance(out.get(key), list) and all(isinstance(item, dict) and sort_key in item
                                                     for item in out[key]):
                out[key].sort(key=lambda item: item[sort_key])
        if isinstance(out.get("partitions"), list) and all(isinstance(p, int) for p in out["partitions"]):
            out["partitions"].sort()
        if isinstance(out.get("unknown_state_filters"), list):
            out["unknown_state_filters"].sort()
        return out
    if isinstance(answer, list):
        return [plain(item) for item in answer]
    return answer


def compare(pair: Pair, build: Callable[[Side], Message], version: int) -> dict[str, Any]:
    """The request (built per side) on both brokers; the answers, made ``plain``, equal."""
    PAIRS_COMPARED[0] += 1
    strom, kafka = (plain(normalise(side.raw(build(side), version), side.node_id)) for side in pair.sides())
    assert strom == kafka, leaf_differences(strom, kafka)
    result: dict[str, Any] = strom
    return result


NO_SUCH_TOPIC = unique("no-such-topic")


def describe_producers(topic: str) -> DescribeProducersRequest:
    return DescribeProducersRequest(topics=(
        TopicRequest(topic, (0, 1, 7)),  # 7: no such partition
        TopicRequest(NO_SUCH_TOPIC, (0,)),
        TopicRequest("bad/name", (0,)),
    ))


def transactional_batch(producer: tuple[int, int]) -> bytes:
    records = [(b"k%d" % i, b"v%d" % i, (), BASE_TIMESTAMP + i) for i in range(3)]
    return bytes(build_record_batch(records, producer_id=producer[0], producer_epoch=producer[1], base_sequence=0,
                                    is_transactional=True))


def list_transactions(producer: Producers, states: tuple[str, ...] = (), duration_ms: int = -1
                      ) -> Callable[[Side], Message]:
    return lambda side: ListTransactionsRequest(state_filters=states, producer_id_filters=(producer[id(side)][0],),
                                                duration_filter=duration_ms)


def describe_until_complete(pair: Pair, transactional_id: str) -> dict[str, Any]:
    """DescribeTransactions until neither broker shows the transaction Prepare* any more
    (both write the markers, then Complete*, after answering EndTxn)."""
    request = DescribeTransactionsRequest(transactional_ids=(transactional_id,))
    for side in pair.sides():
        deadline = time.monotonic() + 60
        while side.raw(request, 0).transaction_states[0].transaction_state.startswith("Prepare"):  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, f"{side.bootstrap}: the transaction never completed"
            time.sleep(0.05)
    return compare(pair, lambda side: request, 0)


def test_admin_apis_describe_an_open_transaction_and_abort_clears_it(pair: Pair, topic: str) -> None:
    transactional_id = unique("admin-txn")
    producer = producer_ids(pair, transactional_id)
    each_settled(pair, lambda side: AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer[id(side)][0],
        v3_and_below_producer_epoch=producer[id(side)][1],
        v3_and_below_topics=(AddPartitionsToTxnTopic(topic, (0, 1)),)), 3)
    written = compare(pair, lambda side: replace(produce(topic, transactional_batch(producer[id(side)])),
                                                 transactional_id=transactional_id), 9)
    assert written["responses"][0]["partition_responses"][0]["error_code"] == 0

    # DescribeProducers: the open transaction's first offset, the batch's sequence and time
    described = compare(pair, lambda side: describe_producers(topic), 0)
    first, second, missing = described["topics"][0]["partitions"]
    (active,) = first["active_producers"]
    assert (active["producer_id"], active["current_txn_start_offset"], active["last_sequence"],
            active["last_timestamp"], active["coordinator_epoch"]) == ("<producer id>", 0, 2, BASE_TIMESTAMP + 2, -1)
    assert (second["error_code"], second["active_producers"], missing["error_code"]) == (0, [], 3)
    assert [t["partitions"][0]["error_code"] for t in described["topics"][1:]] == [3, 17]

    # ListTransactions: by producer id, by state (an unknown name reported), by duration (v1)
    (listed,) = compare(pair, list_transactions(producer), 0)["transaction_states"]
    assert (listed["transactional_id"], listed["transaction_state"]) == (transactional_id, "Ongoing")
    filtered = compare(pair, list_transactions(producer, ("Ongoing", "NoSuchState")), 1)
    assert (len(filtered["transaction_states"]), filtered["unknown_state_filters"]) == (1, ["NoSuchState"])
    assert compare(pair, list_transactions(producer, ("CompleteCommit",)), 1)["transaction_states"] == []
    other = compare(pair, list_transactions(producer, ("Dead", "ongoing")), 0)  # known but never listed; case counts
    assert (other["transaction_states"], other["unknown_state_filters"]) == ([], ["ongoing"])
    assert compare(pair, list_transactions(producer, duration_ms=3_600_000), 1)["transaction_states"] == []
    assert len(compare(pair, list_transactions(producer, duration_ms=0), 1)["transaction_states"]) == 1
    for side in pair.sides():  # unfiltered: every id the broker coordinates (other tests' too)
        everything = side.raw(ListTransactionsRequest(), 1)
        assert transactional_id in {state.transactional_id for state in everything.transaction_states}  # type: ignore[attr-defined]

    # DescribeTransactions: Ongoing with both partitions added; an unknown id is not found
    unknown = unique("never-used")
    states = compare(pair, lambda side: DescribeTransactionsRequest(transactional_ids=(transactional_id, unknown)), 0)
    ongoing, not_found = states["transaction_states"]
    assert (ongoing["error_code"], ongoing["transaction_state"], ongoing["transaction_timeout_ms"],
            ongoing["transaction_start_time_ms"], ongoing["topics"]) == (
        0, "Ongoing", TIMEOUT_MS, "<time>", [{"topic": topic, "partitions": [0, 1]}])
    assert (not_found["error_code"], not_found["transaction_state"]) == (TRANSACTIONAL_ID_NOT_FOUND, "")

    # Admin.abortTransaction: WriteTxnMarkers(abort) to the leader with what DescribeProducers said
    def abort(side: Side) -> Message:
        found: Any = side.raw(describe_producers(topic), 0)
        (state,) = found.topics[0].partitions[0].active_producers
        return markers((state.producer_id, state.producer_epoch), False, [(topic, 0)], state.coordinator_epoch)
    each_marker(pair, abort, 1)
    for side in pair.sides():
        offsets = [side.raw(list_offsets(topic, -1, isolation_level=level), 7) for level in (0, 1)]
        stable, high = (answer.topics[0].partitions[0].offset for answer in offsets)  # type: ignore[attr-defined]
        assert stable == high == 4, (side.bootstrap, stable, high)  # 3 records and the abort marker
    cleared = compare(pair, lambda side: describe_producers(topic), 0)
    (after,) = cleared["topics"][0]["partitions"][0]["active_producers"]
    assert (after["current_txn_start_offset"], after["last_sequence"]) == (-1, 2)

    # The coordinator still had it Ongoing: the producer's commit completes it there
    each_settled(pair, end_txn(transactional_id, producer, True), 3)
    (complete,) = describe_until_complete(pair, transactional_id)["transaction_states"]
    assert (complete["transaction_state"], complete["topics"]) == ("CompleteCommit", [])
    (listed,) = compare(pair, list_transactions(producer, ("CompleteCommit",)), 1)["transaction_states"]
    assert listed["transaction_state"] == "CompleteCommit"
    compare(pair, lambda side: describe_producers(topic), 0)


def test_describe_transactions_of_an_empty_id(pair: Pair) -> None:
    """Initialized, no transaction yet: Empty, start time -1, no topics. The coordinators'
    topic, asked for by name, is the same internal topic on both."""
    transactional_id = unique("admin-empty")
    producer = producer_ids(pair, transactional_id)
    # KIP-994's duration against a start time of -1: Kafka lists it (now - -1 > any duration)
    (listed,) = compare(pair, list_transactions(producer, duration_ms=3_600_000), 1)["transaction_states"]
    assert listed["transaction_state"] == "Empty"
    internal = pair.same(MetadataRequest(topics=(MetadataRequestTopic(name=TRANSACTION_STATE_TOPIC),),
                                         allow_auto_topic_creation=True), 12)
    assert (internal["topics"][0]["is_internal"], len(internal["topics"][0]["partitions"])) == (True, 50)
    (state,) = compare(pair, lambda side: DescribeTransactionsRequest(transactional_ids=(transactional_id,)),
                       0)["transaction_states"]
    assert (state["error_code"], state["transaction_state"], state["transaction_start_time_ms"], state["topics"]) == (
        0, "Empty", -1, [])
