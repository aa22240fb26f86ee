"""CreatePartitions (37): grow a topic (or only validate), and Kafka's refusals in its order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.support.broker_harness import BrokerHarness, BrokerRunner


def _grow(name: str, count: int, assignments: Sequence[Sequence[int]] | None = None) -> CreatePartitionsTopic:
    return CreatePartitionsTopic(
        name=name, count=count,
        assignments=None if assignments is None else tuple(CreatePartitionsAssignment(tuple(a)) for a in assignments),
    )


async def _request(h: BrokerHarness, *topics: CreatePartitionsTopic, version: int = 3,
                   validate_only: bool = False) -> Any:
    response = await h.request(
        CreatePartitionsRequest(topics=topics, timeout_ms=5000, validate_only=validate_only), version=version
    )
    return response.results


async def _count(h: BrokerHarness, topic: str) -> int:
    request = MetadataRequest(topics=(MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False)
    response = await h.request(request, version=12)
    return len(response.topics[0].partitions)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_topic_grows(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=1)
        (result,) = await _request(h, _grow("t", 3), version=version)
        assert (result.name, result.error_code) == ("t", 0)
        assert await _count(h, "t") == 3
        await h.produce("t", 2, [b"into a new partition"])

    broker.run(scenario)


def test_with_explicit_assignments_to_this_broker(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        (result,) = await _request(h, _grow("t", 3, [[1], [1]]))
        assert result.error_code == ErrorCode.NONE
        assert await _count(h, "t") == 3

    broker.run(scenario)


def test_validate_only_grows_nothing(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        (result,) = await _request(h, _grow("t", 4), validate_only=True)
        assert result.error_code == ErrorCode.NONE
        assert await _count(h, "t") == 1

    broker.run(scenario)


def test_an_unknown_topic_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        (result,) = await _request(h, _grow("absent", 2))
        assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.run(scenario)


@pytest.mark.parametrize("count", [2, 1])
def test_a_count_that_adds_nothing_is_invalid_partitions(broker: BrokerRunner, count: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=2)
        (result,) = await _request(h, _grow("t", count))
        assert result.error_code == ErrorCode.INVALID_PARTITIONS
        assert await _count(h, "t") == 2

    broker.run(scenario)


def test_a_topic_named_twice_is_one_invalid_request(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.create_topic("u")
        results = await _request(h, _grow("t", 2), _grow("u", 2), _grow("t", 3))
        # Kafka's order: the topics named once, then each name given more than once.
        assert [(r.name, r.error_code) for r in results] == [("u", 0), ("t", ErrorCode.INVALID_REQUEST)]
        assert (await _count(h, "t"), await _count(h, "u")) == (1, 2)

    broker.run(scenario)


@pytest.mark.parametrize("assignments", [[[1], [2]], [[1]], [[1], [1], [1]], [[1, 1], [1]]])
def test_a_wrong_assignment_is_refused(broker: BrokerRunner, assignments: list[list[int]]) -> None:
    """Another broker, too few or too many lists, a replica named twice: INVALID_REPLICA_ASSIGNMENT."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        (result,) = await _request(h, _grow("t", 3, assignments))
        assert result.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert await _count(h, "t") == 1

    broker.run(scenario)
