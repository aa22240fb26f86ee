"""Deprecated topic configs Kafka 3.9 still accepts: taken, ignored with a warning, described.

``message.format.version`` (ignored since the 3.0 inter-broker protocol) and
``message.downconversion.enable`` (Strom serves no Fetch version that would down-convert)
pass CreateTopics, AlterConfigs and IncrementalAlterConfigs, are listed by DescribeConfigs
with Kafka 3.9's defaults, and log one warning per topic and value.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.alter_configs_request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from strom.protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from strom.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig as IncrementalConfig,
)
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterConfigsResource as IncrementalResource,
)
from strom.protocol.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner

TOPIC = 2
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
SET = 0
BOOLEAN, STRING = 1, 2
DEPRECATED = ("message.format.version", "message.downconversion.enable")


async def describe(h: BrokerHarness, topic: str) -> dict[str, Any]:
    request = DescribeConfigsRequest(resources=(DescribeConfigsResource(TOPIC, topic, DEPRECATED),), include_synonyms=True)
    (result,) = (await h.request(request, version=4)).results
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {c.name: c for c in result.configs}


async def create(h: BrokerHarness, topic: str, configs: dict[str, str]) -> tuple[int, dict[str, tuple[str, int]]]:
    """CreateTopics v7: the error and the new topic's (value, source) of each deprecated setting."""
    request = CreateTopicsRequest(topics=(CreatableTopic(
        topic, 1, 1, (), tuple(CreatableTopicConfig(k, v) for k, v in configs.items())),), timeout_ms=5000)
    (result,) = (await h.request(request, version=7)).topics
    return result.error_code, {c.name: (c.value, c.config_source) for c in result.configs if c.name in DEPRECATED}


def test_a_plain_topic_lists_them_with_kafka_s_defaults(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        configs = await describe(h, "t")
        version, conversion = configs["message.format.version"], configs["message.downconversion.enable"]
        assert (version.value, version.config_source, version.config_type) == ("3.0-IV1", DEFAULT_CONFIG, STRING)
        assert [(s.name, s.source) for s in version.synonyms] == [("log.message.format.version", DEFAULT_CONFIG)]
        assert (conversion.value, conversion.config_source, conversion.config_type) == ("true", DEFAULT_CONFIG, BOOLEAN)

    broker.run(scenario)


def test_create_topics_accepts_them_and_warns_once(broker: BrokerRunner, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(h: BrokerHarness) -> None:
        given = {"message.format.version": "0.10.2", "message.downconversion.enable": "false"}
        error, described = await create(h, "old-tools", given)
        assert error == ErrorCode.NONE
        assert described == {name: (value, DYNAMIC_TOPIC_CONFIG) for name, value in given.items()}
        configs = await describe(h, "old-tools")
        assert configs["message.format.version"].value == "0.10.2"
        assert configs["message.downconversion.enable"].config_source == DYNAMIC_TOPIC_CONFIG
        # The same value again (the legacy API resends the whole set) is not warned twice.
        resource = AlterConfigsResource(TOPIC, "old-tools", tuple(AlterableConfig(k, v) for k, v in given.items()))
        response = await h.request(AlterConfigsRequest(resources=(resource,)), version=2)
        assert response.responses[0].error_code == ErrorCode.NONE

    with caplog.at_level(logging.WARNING, logger="strom.broker.handlers.alter_configs"):
        broker.run(scenario)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert any("message.format.version with value `0.10.2` is ignored" in w and "`old-tools`" in w for w in warnings)
    assert any("message.downconversion.enable with value `false` is ignored" in w for w in warnings)


def test_incremental_alter_configs_accepts_them(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        resource = IncrementalResource(TOPIC, "t", (IncrementalConfig("message.format.version", SET, "2.8-IV1"),))
        response = await h.request(IncrementalAlterConfigsRequest(resources=(resource,)), version=1)
        assert response.responses[0].error_code == ErrorCode.NONE
        entry = (await describe(h, "t"))["message.format.version"]
        assert (entry.value, entry.config_source) == ("2.8-IV1", DYNAMIC_TOPIC_CONFIG)

    broker.run(scenario)


@pytest.mark.parametrize("configs", [{"message.format.version": "latest"}, {"message.format.version": "9.9"},
                                     {"message.downconversion.enable": "maybe"}])
def test_a_value_kafka_would_refuse_is_an_invalid_config(broker: BrokerRunner, configs: dict[str, str]) -> None:
    async def scenario(h: BrokerHarness) -> None:
        error, _ = await create(h, "t", configs)
        assert error == ErrorCode.INVALID_CONFIG

    broker.run(scenario)


def test_the_broker_default_is_a_static_setting(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        entry = (await describe(h, "t"))["message.format.version"]
        assert (entry.value, entry.config_source) == ("2.1", STATIC_BROKER_CONFIG)

    broker.run(scenario, {"log.message.format.version": "2.1"})
