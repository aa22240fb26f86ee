"""DeleteTopics (20): by name (v0-v5) or by name or id (v6+), and Kafka's refusals."""

from __future__ import annotations

import uuid

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from strom.protocol.messages.metadata_request import MetadataRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.fetch_requests import fetch, partitions_of


async def _topics(h: BrokerHarness) -> set[str]:
    response = await h.request(MetadataRequest(topics=None), version=12)
    return {t.name for t in response.topics}


@pytest.mark.parametrize("version", [0, 3, 5])
def test_by_name(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("gone", partitions=2)
        await h.create_topic("kept")
        await h.produce("gone", 0, [b"a"])
        response = await h.request(DeleteTopicsRequest(topic_names=("gone",), timeout_ms=5000), version=version)
        assert [(r.name, r.error_code) for r in response.responses] == [("gone", 0)]
        assert await _topics(h) == {"kept"}
        read = partitions_of(await h.request(fetch([("gone", 0, 0)]), version=12))[("gone", 0)]
        assert read.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.run(scenario)


def test_by_id(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        topic_id = await h.create_topic("gone")
        request = DeleteTopicsRequest(topics=(DeleteTopicState(name=None, topic_id=topic_id),), timeout_ms=5000)
        response = await h.request(request, version=6)
        assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [("gone", topic_id, 0)]
        assert await _topics(h) == set()

    broker.run(scenario)


def test_a_deleted_name_can_be_created_again_from_scratch(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        first_id = await h.create_topic("again", configs={"cleanup.policy": "compact"})
        await h.produce("again", 0, [b"old"], keys=[b"k"])
        await h.request(DeleteTopicsRequest(topic_names=("again",), timeout_ms=5000), version=5)
        second_id = await h.create_topic("again")
        assert second_id != first_id
        assert await h.list_offset("again", 0) == 0
        await h.produce("again", 0, [b"keyless is fine: not compacted any more"])

    broker.run(scenario)


def test_an_unknown_name_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(DeleteTopicsRequest(topic_names=("absent",), timeout_ms=5000), version=5)
        assert [(r.name, r.error_code) for r in response.responses] == [("absent", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]

    broker.run(scenario)


def test_an_unknown_id_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        unknown = uuid.uuid4()
        request = DeleteTopicsRequest(topics=(DeleteTopicState(name=None, topic_id=unknown),), timeout_ms=5000)
        response = await h.request(request, version=6)
        assert [(r.topic_id, r.error_code) for r in response.responses] == [(unknown, ErrorCode.UNKNOWN_TOPIC_ID)]

    broker.run(scenario)


def test_deletion_disabled_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("stays")
        response = await h.request(DeleteTopicsRequest(topic_names=("stays",), timeout_ms=5000), version=5)
        assert [r.error_code for r in response.responses] == [ErrorCode.TOPIC_DELETION_DISABLED]
        assert await _topics(h) == {"stays"}

    broker.run(scenario, {"delete.topic.enable": "false"})
