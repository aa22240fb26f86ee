"""AlterConfigs (33): a topic's override set replaced whole, or only validated; the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.alter_configs_request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from strom.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner, batch, produce_request

TOPIC, BROKER = 2, 4


async def alter(h: BrokerHarness, *resources: tuple[int, str, dict[str, str | None]], version: int = 2,
                validate_only: bool = False) -> list[tuple[str, int]]:
    request = AlterConfigsRequest(
        resources=tuple(
            AlterConfigsResource(kind, name, tuple(AlterableConfig(k, v) for k, v in configs.items()))
            for kind, name, configs in resources
        ),
        validate_only=validate_only,
    )
    response = await h.request(request, version=version)
    return [(r.resource_name, r.error_code) for r in response.responses]


async def topic_values(h: BrokerHarness, topic: str, *names: str) -> dict[str, Any]:
    request = DescribeConfigsRequest(resources=(DescribeConfigsResource(TOPIC, topic, names),))
    (result,) = (await h.request(request, version=4)).results
    return {c.name: c.value for c in result.configs}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_named_overrides_become_the_topic_s_whole_set(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", configs={"retention.ms": "1000"})
        assert await alter(h, (TOPIC, "t", {"segment.ms": "60000"}), version=version) == [("t", 0)]
        # retention.ms was not named: back to the default (the legacy API replaces the whole set).
        assert await topic_values(h, "t", "segment.ms", "retention.ms") == {"segment.ms": "60000", "retention.ms": "604800000"}

    broker.run(scenario)


def test_the_new_settings_apply_to_the_topic(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        assert await alter(h, (TOPIC, "t", {"max.message.bytes": "200"})) == [("t", 0)]
        response = await h.request(produce_request("t", 0, batch([b"x" * 500])), version=9)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE

    broker.run(scenario)


def test_validate_only_changes_nothing(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", configs={"retention.ms": "1000"})
        assert await alter(h, (TOPIC, "t", {"retention.ms": "5"}), validate_only=True) == [("t", 0)]
        assert await topic_values(h, "t", "retention.ms") == {"retention.ms": "1000"}

    broker.run(scenario)


def test_an_unknown_topic_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert await alter(h, (TOPIC, "absent", {"retention.ms": "5"})) == [("absent", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]

    broker.run(scenario)


@pytest.mark.parametrize("configs", [{"no.such.setting": "1"}, {"retention.ms": "soon"}])
def test_an_unknown_setting_or_bad_value_is_an_invalid_config(broker: BrokerRunner, configs: dict[str, str | None]) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", configs={"retention.ms": "1000"})
        assert await alter(h, (TOPIC, "t", configs)) == [("t", ErrorCode.INVALID_CONFIG)]
        assert await topic_values(h, "t", "retention.ms") == {"retention.ms": "1000"}

    broker.run(scenario)


def test_a_null_value_is_an_invalid_request(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        assert await alter(h, (TOPIC, "t", {"retention.ms": None})) == [("t", ErrorCode.INVALID_REQUEST)]

    broker.run(scenario)


def test_a_resource_named_twice_is_refused_once(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.create_topic("u")
        answers = await alter(h, (TOPIC, "t", {"retention.ms": "1"}), (TOPIC, "u", {"retention.ms": "2"}),
                              (TOPIC, "t", {"retention.ms": "3"}))
        assert sorted(answers) == [("t", ErrorCode.INVALID_REQUEST), ("u", 0)]

    broker.run(scenario)


def test_a_static_broker_setting_cannot_be_altered(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert await alter(h, (BROKER, "1", {"num.partitions": "5"})) == [("1", ErrorCode.INVALID_REQUEST)]
        assert await alter(h, (BROKER, "7", {})) == [("7", ErrorCode.INVALID_REQUEST)]  # not this broker
        assert await alter(h, (BROKER, "1", {})) == [("1", 0)]  # nothing to change

    broker.run(scenario)
