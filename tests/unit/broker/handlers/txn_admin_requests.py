"""The transaction admin requests (KIP-664) as an admin client sends them, for their handler tests."""

from __future__ import annotations

from typing import Any

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from strom.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from strom.protocol.messages.list_transactions_request import ListTransactionsRequest
from tests.support.broker_harness import BrokerHarness


async def describe(h: BrokerHarness, *transactional_ids: str) -> Any:
    """DescribeTransactions: one state per id, in the request's order."""
    return (await h.request(DescribeTransactionsRequest(transactional_ids=transactional_ids), version=0)
            ).transaction_states


async def listed(h: BrokerHarness, states: tuple[str, ...] = (), producer_ids: tuple[int, ...] = (),
                 duration_ms: int = -1) -> Any:
    """ListTransactions v1: the whole answer."""
    return await h.request(ListTransactionsRequest(state_filters=states, producer_id_filters=producer_ids,
                                                   duration_filter=duration_ms), version=1)


async def producers(h: BrokerHarness, topic: str, partition: int = 0) -> Any:
    """DescribeProducers of one partition, which must answer NONE: its active producers."""
    response = await h.request(DescribeProducersRequest(topics=(TopicRequest(topic, (partition,)),)), version=0)
    (answer,) = response.topics[0].partitions
    assert answer.error_code == ErrorCode.NONE
    return answer.active_producers
