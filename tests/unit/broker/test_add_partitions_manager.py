"""AddPartitionsToTxnManager (KIP-890 part 1 across brokers) against a real broker process as
the transaction coordinator: questions that wait while one request is in flight leave
together in one AddPartitionsToTxn v4 (one entry per transactional id), and a coordinator
that cannot be reached answers NETWORK_EXCEPTION, which a Produce answers NOT_ENOUGH_REPLICAS.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strom.broker.transaction.add_partitions_manager import AddPartitionsToTxnManager
from strom.broker.transaction.verification import produce_refusal
from strom.protocol.error_codes import ErrorCode
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from strom.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from tests.support.broker_process import BrokerProcess, raw_request
from tests.support.cluster import StromCluster

_correlation_ids = itertools.count(1)


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory: Path = tmp_path_factory.mktemp("add-partitions-manager")
    broker = BrokerProcess(directory / "data", {"transaction.state.log.num.partitions": "1"}).start()
    try:
        yield broker
    finally:
        broker.stop()


def _call(broker: BrokerProcess, body: Message, version: int) -> Any:
    answer = raw_request(broker, encode_request(body, version, correlation_id=next(_correlation_ids),
                                                client_id="test"))
    assert answer is not None
    return decode_response(answer, body.API_KEY or 0, version)[1]


def _producer_id(broker: BrokerProcess, txn_id: str) -> int:
    request = InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000)
    response = StromCluster.wait_until(lambda: (answer := _call(broker, request, 4)).error_code == 0 and answer,
                                       what=f"a producer id for {txn_id}")
    return int(response.producer_id)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_waiting_questions_leave_in_one_request_per_transactional_id(coordinator: BrokerProcess) -> None:
    created = _call(coordinator, CreateTopicsRequest(topics=(CreatableTopic("t", 2, 1),), timeout_ms=5000), 7)
    assert created.topics[0].error_code == ErrorCode.NONE
    producers = {txn_id: _producer_id(coordinator, txn_id) for txn_id in ("a", "b", "c")}
    added = _call(coordinator, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="a", v3_and_below_producer_id=producers["a"], v3_and_below_producer_epoch=0,
        v3_and_below_topics=(AddPartitionsToTxnTopic("t", (0,)),)), 0)
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.NONE
    host, port = coordinator.bootstrap.rsplit(":", 1)

    async def scenario() -> tuple[list[dict[tuple[str, int], ErrorCode]], int]:
        manager = AddPartitionsToTxnManager(2, lambda _: 1, lambda node: (host, int(port)) if node == 1 else None)
        try:
            answers = await asyncio.gather(
                manager.verify("a", producers["a"], 0, [("t", 0), ("t", 1)]),
                manager.verify("b", producers["b"], 0, [("t", 0)]),
                manager.verify("c", producers["c"], 0, [("t", 0)]),
                manager.verify("a", producers["a"], 0, [("t", 0)]),  # "a" again: the next request
                manager.verify("a", producers["a"], 1, [("t", 0)]))  # and again: the one after
            return list(answers), manager.requests_sent
        finally:
            await manager.shutdown()

    answers, requests_sent = asyncio.run(scenario())
    assert answers == [
        {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.TRANSACTION_ABORTABLE},
        {("t", 0): ErrorCode.TRANSACTION_ABORTABLE},
        {("t", 0): ErrorCode.TRANSACTION_ABORTABLE},
        {("t", 0): ErrorCode.NONE},
        {("t", 0): ErrorCode.PRODUCER_FENCED},
    ]
    assert requests_sent == 3


def test_a_coordinator_that_cannot_be_reached_makes_the_produce_retriable() -> None:
    port = _closed_port()

    async def scenario() -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], ErrorCode], int]:
        manager = AddPartitionsToTxnManager(2, lambda txn_id: 1 if txn_id == "known" else -1,
                                            lambda _: ("127.0.0.1", port))
        try:
            unreachable = await manager.verify("known", 7, 0, [("t", 0)])
            no_coordinator = await manager.verify("unplaced", 7, 0, [("t", 0)])
            return unreachable, no_coordinator, manager.requests_sent
        finally:
            await manager.shutdown()

    unreachable, no_coordinator, requests_sent = asyncio.run(scenario())
    assert unreachable == {("t", 0): ErrorCode.NETWORK_EXCEPTION}
    assert no_coordinator == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert requests_sent == 0  # the connection was refused before any request left
    for error in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_NOT_AVAILABLE):
        assert produce_refusal(error, 9).error == ErrorCode.NOT_ENOUGH_REPLICAS
