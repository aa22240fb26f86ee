"""Transaction requests sent to both brokers of a differential test: producer ids on each
(each broker hands out its own, so requests naming one are built per side), requests
repeated while the coordinator is loading or the previous transaction still completing,
and WriteTxnMarkers answers compared in a stable order."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from strom.protocol.message import Message
from strom.protocol.messages.end_txn_request import EndTxnRequest
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from tests.differential.normalise import normalise
from tests.differential.wire import Pair, Side, leaf_differences

COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS = 14, 15, 16, 51
RETRIABLE = (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS)
Producers = dict[int, tuple[int, int]]  # (producer id, epoch) by id(side)


def producer_ids(pair: Pair, transactional_id: str | None = None) -> Producers:
    """A producer id on each broker (transactional if ``transactional_id``): (id, epoch)
    by ``id(side)``. Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its transaction
    coordinator is up."""
    found = {}
    request = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60000)
    for side in pair.sides():
        if transactional_id is not None:  # as clients do: Kafka makes __transaction_state on this
            _until_settled(side, FindCoordinatorRequest(key=transactional_id, key_type=1), 2)
        answer: Any = _until_settled(side, request, 4)
        assert answer.error_code == 0, (side.bootstrap, answer)
        found[id(side)] = (answer.producer_id, answer.producer_epoch)
    return found


def _until_settled(side: Side, request: Message, version: int) -> Message:
    deadline = time.monotonic() + 90
    while (answer := side.raw(request, version)).error_code in RETRIABLE:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, f"{side.bootstrap} kept answering {answer}"
        time.sleep(0.1)
    return answer


def each_settled(pair: Pair, build: Callable[[Side], Message], version: int) -> None:
    """A transaction request on each broker, repeated while retriable; the answers compared."""
    answers = [normalise(_until_settled(side, build(side), version), side.node_id) for side in pair.sides()]
    assert answers[0] == answers[1], leaf_differences(answers[0], answers[1])


def markers(producer: tuple[int, int], committed: bool, partitions: list[tuple[str, int]],
            coordinator_epoch: int = 0) -> WriteTxnMarkersRequest:
    by_topic: dict[str, list[int]] = {}
    for name, index in partitions:
        by_topic.setdefault(name, []).append(index)
    return WriteTxnMarkersRequest(markers=(WritableTxnMarker(
        producer[0], producer[1], committed,
        tuple(WritableTxnMarkerTopic(name, tuple(indexes)) for name, indexes in by_topic.items()), coordinator_epoch),))


def each_marker(pair: Pair, build: Callable[[Side], Message], version: int) -> None:
    """WriteTxnMarkers on each broker, answers compared with each marker's topics (and
    their partitions) sorted: Kafka lists them in its hash maps' order."""
    answers = []
    for side in pair.sides():
        answer = side.ask(build(side), version)
        for marker in answer["markers"]:
            for topic in marker["topics"]:
                topic["partitions"].sort(key=lambda partition: partition["partition_index"])
            marker["topics"].sort(key=lambda topic: topic["name"])
        answers.append(answer)
    assert answers[0] == answers[1], leaf_differences(answers[0], answers[1])


def end_txn(transactional_id: str, producer: Producers, committed: bool) -> Callable[[Side], Message]:
    def build(side: Side) -> Message:
        pid, epoch = producer[id(side)]
        return EndTxnRequest(transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch,
                             committed=committed)
    return build
