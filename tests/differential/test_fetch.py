"""Fetch and ListOffsets on Kafka 3.9 and Strom: the same records (fixed timestamps, so the
same bytes) produced to both, then read back and located, success and error paths."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from strom.protocol.messages.fetch_request import FetchRequest
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.differential.records import BASE_TIMESTAMP, batch, fetch, list_offsets, produce
from tests.differential.wire import Pair, Side, create_topic, leaf_differences, unique

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
BATCHES = 3  # of 4 records each: offsets 0-11, timestamps BASE .. BASE+11


@pytest.fixture(scope="module")
def topic(pair: Pair) -> str:
    name = create_topic(pair, unique("fetch"), 2)
    for number in range(BATCHES):
        pair.same(produce(name, batch(4, first=4 * number, timestamp=BASE_TIMESTAMP + 4 * number)), 9)
    return name


def _partition(answer: dict[str, Any]) -> dict[str, Any]:
    partition: dict[str, Any] = answer["responses"][0]["partitions"][0]
    return partition


@pytest.mark.parametrize("version", [4, 7, 11, 12])
@pytest.mark.parametrize("offset", [0, 5, 12])
def test_fetch_from(pair: Pair, topic: str, version: int, offset: int) -> None:
    answer = pair.same(fetch(topic, offset), version)
    assert _partition(answer)["error_code"] == 0
    assert (_partition(answer)["records"] in (None, b"")) == (offset == 12)


@pytest.mark.parametrize("offset", [13, 1000, -1])
@pytest.mark.parametrize("version", [4, 12])
def test_fetch_out_of_range(pair: Pair, topic: str, offset: int, version: int) -> None:
    assert _partition(pair.same(fetch(topic, offset), version))["error_code"] == 1  # OFFSET_OUT_OF_RANGE


@pytest.mark.parametrize("isolation_level", [0, 1])
def test_isolation_levels(pair: Pair, topic: str, isolation_level: int) -> None:
    answer = pair.same(fetch(topic, 0, isolation_level=isolation_level), 12)
    assert _partition(answer)["last_stable_offset"] == 12


def test_unknown_partition_and_topic(pair: Pair, topic: str) -> None:
    assert _partition(pair.same(fetch(topic, 0, partition=7), 12))["error_code"] == 3
    assert _partition(pair.same(fetch(unique("absent"), 0), 12))["error_code"] == 3


def test_an_empty_partition(pair: Pair, topic: str) -> None:
    assert _partition(pair.same(fetch(topic, 0, partition=1), 12))["records"] in (None, b"")


@pytest.mark.parametrize(("max_bytes", "partition_max_bytes"), [(0, 1 << 20), (1 << 20, 0), (1, 1), (100, 1 << 20),
                                                               (1 << 20, 100), (200, 200)])
def test_max_bytes_edges(pair: Pair, topic: str, max_bytes: int, partition_max_bytes: int) -> None:
    """At least the first batch comes back whatever the limits (KIP-74), if there is one."""
    strom, kafka = pair.ask(fetch(topic, 0, max_bytes=max_bytes, partition_max_bytes=partition_max_bytes), 12)
    for answer in (strom, kafka):
        records = _partition(answer)["records"]
        _partition(answer)["records"] = bytes(records) if records is not None else None
    assert strom == kafka, leaf_differences(strom, kafka)


def test_a_batch_larger_than_max_bytes_midway(pair: Pair, topic: str) -> None:
    pair.same(fetch(topic, 4, max_bytes=150, partition_max_bytes=150), 12)


def test_min_bytes_beyond_what_there_is(pair: Pair, topic: str) -> None:
    """min_bytes not reached: the answer after max_wait_ms (10 ms) holds what there is."""
    pair.same(fetch(topic, 0, min_bytes=1 << 20), 12)


# --- fetch sessions (KIP-227) -------------------------------------------------------------

def _session_id(side: Side, request: FetchRequest) -> int:
    session_id: int = side.raw(request, 12).session_id  # type: ignore[attr-defined]
    return session_id


def test_a_session_full_then_incremental(pair: Pair, topic: str) -> None:
    full = pair.same(fetch(topic, 0, session_epoch=0, partitions=[0, 1]), 12)
    assert full["session_id"] == "<session id>"
    ids = {side.bootstrap: _session_id(side, fetch(topic, 0, session_epoch=0, partitions=[0, 1]))
           for side in pair.sides()}
    # Epoch 1: nothing changed and no new data, so no partition is listed.
    quiet = pair.each(lambda side: fetch(topic, 12, session_id=ids[side.bootstrap], session_epoch=1,
                                         partitions=[]), 12)
    assert quiet["error_code"] == 0
    moved = pair.each(lambda side: fetch(topic, 8, session_id=ids[side.bootstrap], session_epoch=2), 12)
    assert moved["responses"][0]["partitions"][0]["partition_index"] == 0
    wrong_epoch = pair.each(lambda side: fetch(topic, 8, session_id=ids[side.bootstrap], session_epoch=7), 12)
    assert wrong_epoch["error_code"] == 71  # INVALID_FETCH_SESSION_EPOCH
    closed = pair.each(lambda side: fetch(topic, 0, session_id=ids[side.bootstrap], session_epoch=-1), 12)
    assert closed["error_code"] == 0


def test_an_unknown_session(pair: Pair, topic: str) -> None:
    answer = pair.same(fetch(topic, 0, session_id=123456, session_epoch=1), 12)
    assert answer["error_code"] == 70  # FETCH_SESSION_ID_NOT_FOUND


def test_a_sessionless_fetch_naming_a_session(pair: Pair, topic: str) -> None:
    pair.same(fetch(topic, 0, session_id=123456, session_epoch=0), 12)


# --- ListOffsets ------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 2, 4, 7, 9])
@pytest.mark.parametrize("timestamp", [EARLIEST, LATEST, MAX_TIMESTAMP, BASE_TIMESTAMP, BASE_TIMESTAMP + 5,
                                       BASE_TIMESTAMP + 100, 0])
def test_list_offsets(pair: Pair, topic: str, version: int, timestamp: int) -> None:
    pair.same(list_offsets(topic, timestamp), version)


@pytest.mark.parametrize(("timestamp", "version"), [(-4, 7), (-4, 8), (-5, 8), (-5, 9)])
def test_list_offsets_local_and_tiered(pair: Pair, topic: str, timestamp: int, version: int) -> None:
    pair.same(list_offsets(topic, timestamp), version)


@pytest.mark.parametrize("version", [1, 7])
def test_list_offsets_of_an_unknown_partition(pair: Pair, topic: str, version: int) -> None:
    answer = pair.same(list_offsets(topic, LATEST, partition=9), version)
    assert answer["topics"][0]["partitions"][0]["error_code"] == 3


@pytest.mark.parametrize("timestamp", [EARLIEST, LATEST, MAX_TIMESTAMP, BASE_TIMESTAMP])
def test_list_offsets_of_an_empty_partition(pair: Pair, topic: str, timestamp: int) -> None:
    pair.same(list_offsets(topic, timestamp, partition=1), 9)


@pytest.mark.parametrize("isolation_level", [0, 1])
def test_list_offsets_isolation_levels(pair: Pair, topic: str, isolation_level: int) -> None:
    pair.same(list_offsets(topic, LATEST, isolation_level=isolation_level), 5)


# --- Fetch v13+: topics by id ------------------------------------------------------------------

def _by_id(side: Side, topic: str) -> FetchRequest:
    """The same Fetch addressed by the topic id this broker gave the topic."""
    topic_id = side.raw(MetadataRequest(topics=(MetadataRequestTopic(name=topic),)), 12).topics[0].topic_id  # type: ignore[attr-defined]
    request = fetch(topic, 4)
    return dataclasses.replace(request, topics=tuple(
        dataclasses.replace(wanted, topic="", topic_id=topic_id) for wanted in request.topics))


@pytest.mark.parametrize("version", [13, 15, 16])
def test_fetch_by_topic_id(pair: Pair, topic: str, version: int) -> None:
    answer = pair.each(lambda side: _by_id(side, topic), version)
    assert _partition(answer)["error_code"] == 0 and _partition(answer)["records"]


@pytest.mark.parametrize("version", [13, 16])
def test_fetch_an_unknown_topic_id(pair: Pair, topic: str, version: int) -> None:
    request = fetch(topic, 0)
    unknown = dataclasses.replace(request, topics=tuple(
        dataclasses.replace(wanted, topic="", topic_id=uuid.uuid4()) for wanted in request.topics))
    pair.same(unknown, version)
