"""Transactional requests as a client sends them, for the coordinator's handler tests."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from strom.broker.transaction.transaction_log import TransactionState
from strom.broker.transaction.transaction_marker_channel import MarkerRound, MarkerWriter
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from strom.protocol.messages.end_txn_request import EndTxnRequest
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from strom.protocol.records import build_record_batch
from strom.protocol.topic_partition import TopicPartition
from tests.support.broker_harness import BrokerHarness

TRANSACTION = 1
PROPERTIES = {"transaction.state.log.num.partitions": "1", "transaction.max.timeout.ms": "300000"}


async def init(h: BrokerHarness, txn_id: str, *, version: int = 4, timeout_ms: int = 60000,
               producer: tuple[int, int] = (-1, -1)) -> Any:
    return await h.request(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                                                 producer_id=producer[0], producer_epoch=producer[1]),
                           version=version)


async def add(h: BrokerHarness, txn_id: str, producer: tuple[int, int], partitions: list[TopicPartition],
              *, version: int = 0) -> dict[TopicPartition, int]:
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    response = await h.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=producer[0],
        v3_and_below_producer_epoch=producer[1],
        v3_and_below_topics=tuple(AddPartitionsToTxnTopic(t, tuple(i)) for t, i in topics.items())),
        version=version)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


async def end(h: BrokerHarness, txn_id: str, producer: tuple[int, int], *, committed: bool,
              version: int = 1) -> int:
    response = await h.request(EndTxnRequest(transactional_id=txn_id, producer_id=producer[0],
                                             producer_epoch=producer[1], committed=committed), version=version)
    code: int = response.error_code
    return code


async def produce_transactional(h: BrokerHarness, txn_id: str, producer: tuple[int, int], topic: str,
                                values: list[bytes], sequence: int = 0) -> int:
    records = bytes(build_record_batch(((None, v, (), None) for v in values), producer_id=producer[0],
                                       producer_epoch=producer[1], base_sequence=sequence, is_transactional=True))
    response = await h.request(ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=(
        TopicProduceData(topic, (PartitionProduceData(0, records),)),)), version=9)
    code: int = response.responses[0].partition_responses[0].error_code
    return code


async def until_complete(h: BrokerHarness, txn_id: str, producer: tuple[int, int], committed: bool) -> None:
    """EndTxn retried as a client retries it: CONCURRENT_TRANSACTIONS until Complete*, then NONE."""
    for _ in range(500):
        code = await end(h, txn_id, producer, committed=committed)
        if code != ErrorCode.CONCURRENT_TRANSACTIONS:
            assert code == ErrorCode.NONE
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{txn_id} did not complete")


def state_of(h: BrokerHarness, txn_id: str) -> TransactionState:
    found = h.broker.transaction_coordinator.state_manager.get_transaction_state(txn_id)
    assert not isinstance(found, ErrorCode) and found[1] is not None
    return found[1].state


class HeldMarkers:
    """A marker writer that answers REQUEST_TIMED_OUT until released, then hands over to the
    broker's own: a stand-in for a broker that stops before its markers are written."""

    def __init__(self, real: MarkerWriter) -> None:
        self.real = real
        self.released = False

    async def __call__(self, marker_round: MarkerRound) -> Mapping[TopicPartition, ErrorCode]:
        if self.released:
            return await self.real(marker_round)
        return dict.fromkeys(marker_round.partitions, ErrorCode.REQUEST_TIMED_OUT)

    def close(self) -> None:
        self.real.close()
