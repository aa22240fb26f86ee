"""OffsetDelete (47): remove a group's committed offsets for some partitions (KIP-496)."""

from __future__ import annotations

from typing import Any

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.groups import commit, committed, join_new, subscription, sync


async def _delete(h: BrokerHarness, group: str, partitions: list[tuple[str, int]]) -> Any:
    by_topic: dict[str, list[OffsetDeleteRequestPartition]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(OffsetDeleteRequestPartition(partition))
    request = OffsetDeleteRequest(
        group_id=group, topics=tuple(OffsetDeleteRequestTopic(t, tuple(p)) for t, p in by_topic.items())
    )
    return await h.request(request, version=0)


def _errors(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def _consumer_subscribed_to(h: BrokerHarness, group: str, topic: str) -> None:
    """A Stable consumer group whose one member subscribes to ``topic``."""
    joined = await join_new(h, group, protocols=[("range", subscription(topic))])
    synced = await sync(h, group, joined.generation_id, joined.member_id, {joined.member_id: b""})
    assert synced.error_code == ErrorCode.NONE


def test_an_empty_group_s_offsets_are_deleted(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=2)
        await commit(h, "g", {("t", 0): 5, ("t", 1): 6})
        response = await _delete(h, "g", [("t", 0)])
        assert (response.error_code, _errors(response)) == (0, {("t", 0): 0})
        assert await committed(h, "g", "t", (0, 1)) == {0: -1, 1: 6}

    broker.run(scenario)


def test_an_unknown_group_is_not_found(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        response = await _delete(h, "nobody", [("t", 0)])
        assert response.error_code == ErrorCode.GROUP_ID_NOT_FOUND

    broker.run(scenario)


def test_an_unknown_topic_is_refused_per_partition(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await commit(h, "g", {("t", 0): 5})
        response = await _delete(h, "g", [("t", 0), ("absent", 0), ("t", 9)])
        assert response.error_code == ErrorCode.NONE
        assert _errors(response) == {
            ("t", 0): 0, ("absent", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }

    broker.run(scenario)


def test_a_consumer_group_keeps_the_offsets_of_topics_it_subscribes_to(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("read")
        await h.create_topic("unread")
        await commit(h, "g", {("read", 0): 1, ("unread", 0): 2})
        await _consumer_subscribed_to(h, "g", "read")
        response = await _delete(h, "g", [("read", 0), ("unread", 0)])
        assert response.error_code == ErrorCode.NONE
        assert _errors(response) == {("read", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("unread", 0): 0}
        assert await committed(h, "g", "read", (0,)) == {0: 1}
        assert await committed(h, "g", "unread", (0,)) == {0: -1}

    broker.run(scenario)


def test_a_non_consumer_group_with_members_is_not_empty(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await commit(h, "g", {("t", 0): 1})
        joined = await join_new(h, "g", protocol_type="connect", protocols=[("v1", b"")])
        await sync(h, "g", joined.generation_id, joined.member_id, {joined.member_id: b""},
                   protocol_type="connect", protocol_name="v1")
        response = await _delete(h, "g", [("t", 0)])
        assert response.error_code == ErrorCode.NON_EMPTY_GROUP
        assert await committed(h, "g", "t", (0,)) == {0: 1}

    broker.run(scenario)
