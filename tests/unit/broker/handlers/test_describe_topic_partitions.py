"""DescribeTopicPartitions (75): topics in name order, paged by partition count (KIP-966)."""

from __future__ import annotations

from typing import Any

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_topic_partitions_request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner

TOPIC_OPERATIONS = {3, 4, 5, 6, 7, 8, 10, 11}


def _request(*names: str, limit: int = 2000, cursor: tuple[str, int] | None = None) -> DescribeTopicPartitionsRequest:
    return DescribeTopicPartitionsRequest(
        topics=tuple(TopicRequest(n) for n in names), response_partition_limit=limit,
        cursor=Cursor(*cursor) if cursor else None)


def _pages(response: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


def test_named_topics_in_name_order_with_ids_leaders_and_operations(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        b_id = await h.create_topic("b", partitions=2)
        await h.create_topic("a")
        response = await h.request(_request("b", "a", "missing", "bad/name"), version=0)
        assert [(t.name, t.error_code) for t in response.topics] == [
            ("a", 0), ("b", 0), ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION),
            ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        b = response.topics[1]
        assert b.topic_id == b_id and not b.is_internal
        assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in b.partitions] == [
            (0, 1, (1,), (1,)), (1, 1, (1,), (1,))]
        assert {bit for bit in range(32) if b.topic_authorized_operations >> bit & 1} == TOPIC_OPERATIONS
        assert response.next_cursor is None

    broker.run(scenario)


def test_no_topics_named_means_every_topic_and_unknown_ones_are_not_invented(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("y")
        await h.create_topic("x", partitions=3)
        response = await h.request(_request(), version=0)
        assert _pages(response) == [("x", [0, 1, 2]), ("y", [0])]

    broker.run(scenario)


def test_pages_follow_the_cursor_until_every_partition_was_shown(broker: BrokerRunner) -> None:
    """A limit of 2 over topics of 3 and 2 partitions: four pages, each naming where the next starts."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("p", partitions=3)
        await h.create_topic("q", partitions=2)
        seen: list[tuple[str, list[int]]] = []
        cursor: tuple[str, int] | None = None
        cursors = []
        for _ in range(10):
            response = await h.request(_request("p", "q", limit=2, cursor=cursor), version=0)
            seen += [page for page in _pages(response) if page[1]]
            if response.next_cursor is None:
                break
            cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
            cursors.append(cursor)
        assert cursors == [("p", 2), ("q", 1)]
        assert seen == [("p", [0, 1]), ("p", [2]), ("q", [0]), ("q", [1])]

    broker.run(scenario)


def test_a_full_page_points_the_cursor_at_the_next_topic(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("p", partitions=2)
        await h.create_topic("q")
        response = await h.request(_request(limit=2), version=0)
        assert _pages(response) == [("p", [0, 1])]
        assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == ("q", 0)

    broker.run(scenario)


def test_a_cursor_naming_a_topic_not_asked_for_is_an_invalid_request(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("p")
        response = await h.request(_request("p", cursor=("other", 0)), version=0)
        assert [(t.name, t.error_code) for t in response.topics] == [("p", ErrorCode.INVALID_REQUEST)]

    broker.run(scenario)
