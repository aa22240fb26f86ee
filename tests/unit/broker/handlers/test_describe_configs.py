"""DescribeConfigs (32): topic, broker and broker-logger configs with their sources."""

from __future__ import annotations

from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


async def describe(h: BrokerHarness, resource_type: int, name: str, keys: tuple[str, ...] | None = None, *,
                   version: int = 4, synonyms: bool = False, documentation: bool = False) -> Any:
    request = DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type, name, keys),),
        include_synonyms=synonyms, include_documentation=documentation,
    )
    (result,) = (await h.request(request, version=version)).results
    return result


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_a_topic_s_settings_with_overrides_marked(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", configs={"retention.ms": "1000"})
        result = await describe(h, TOPIC, "t", version=version)
        assert (result.error_code, result.resource_type, result.resource_name) == (0, TOPIC, "t")
        configs = {c.name: c for c in result.configs}
        assert {"cleanup.policy", "retention.ms", "segment.bytes", "max.message.bytes"} <= set(configs)
        assert configs["retention.ms"].value == "1000"
        assert configs["cleanup.policy"].value == "delete"
        assert not any(c.read_only for c in result.configs)
        if version == 0:
            # Kafka 3.9 sends false for every config, a default one too.
            assert (configs["retention.ms"].is_default, configs["cleanup.policy"].is_default) == (False, False)
        else:
            assert configs["retention.ms"].config_source == DYNAMIC_TOPIC_CONFIG
            assert configs["cleanup.policy"].config_source == DEFAULT_CONFIG

    broker.run(scenario)


def test_a_broker_log_setting_is_the_topic_s_static_default(broker: BrokerRunner) -> None:
    """Kafka 3.9 lists a topic config's synonyms from its broker property's own name down:
    log.retention.ms given is STATIC (then log.retention.hours's default); only
    log.retention.hours given leaves retention.ms with no synonym, so DEFAULT_CONFIG."""
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        result = await describe(h, TOPIC, "t", ("retention.ms",), synonyms=True)
        (entry,) = result.configs
        assert (entry.name, entry.value, entry.config_source) == ("retention.ms", "7200000", STATIC_BROKER_CONFIG)
        assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
            ("log.retention.ms", "7200000", STATIC_BROKER_CONFIG), ("log.retention.hours", "168", DEFAULT_CONFIG)]

    broker.run(scenario, {"log.retention.ms": "7200000"})


def test_a_synonym_given_alone_is_not_listed_under_the_topic_config(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        result = await describe(h, TOPIC, "t", ("retention.ms", "segment.bytes"), synonyms=True)
        configs = {entry.name: entry for entry in result.configs}
        entry = configs["retention.ms"]
        assert (entry.value, entry.config_source, entry.synonyms) == ("7200000", DEFAULT_CONFIG, ())
        segment = configs["segment.bytes"]  # given, though equal to the default: still STATIC
        assert [(s.name, s.source) for s in segment.synonyms] == [
            ("log.segment.bytes", STATIC_BROKER_CONFIG), ("log.segment.bytes", DEFAULT_CONFIG)]

    broker.run(scenario, {"log.retention.hours": "2", "log.segment.bytes": "1073741824"})


def test_only_the_named_keys_and_documentation_when_asked(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        plain = await describe(h, TOPIC, "t", ("cleanup.policy", "segment.bytes"))
        assert sorted(c.name for c in plain.configs) == ["cleanup.policy", "segment.bytes"]
        assert all(c.documentation is None and c.synonyms == () for c in plain.configs)
        documented = await describe(h, TOPIC, "t", ("cleanup.policy",), documentation=True, synonyms=True)
        assert documented.configs[0].documentation
        assert documented.configs[0].synonyms

    broker.run(scenario)


def test_an_unknown_topic_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert (await describe(h, TOPIC, "absent")).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.run(scenario)


def test_an_illegal_topic_name_is_an_invalid_topic(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert (await describe(h, TOPIC, "bad name")).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION

    broker.run(scenario)


def test_this_broker_s_static_settings_are_read_only_and_dynamic_ones_not(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        result = await describe(h, BROKER, "1")
        assert result.error_code == ErrorCode.NONE
        configs = {c.name: c for c in result.configs}
        assert configs["num.partitions"].value == "3"
        assert configs["num.partitions"].config_source == STATIC_BROKER_CONFIG
        assert configs["delete.topic.enable"].config_source == DEFAULT_CONFIG
        writable = {c.name for c in result.configs if not c.read_only}
        assert {"log.retention.ms", "message.max.bytes", "log.cleaner.threads"} <= writable
        assert not writable & {"num.partitions", "log.dirs", "listeners", "log.retention.hours", "log.cleaner.enable"}

    broker.run(scenario, {"num.partitions": "3"})


def test_the_cluster_default_resource_has_no_dynamic_settings(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        result = await describe(h, BROKER, "")
        assert (result.error_code, result.configs) == (ErrorCode.NONE, ())

    broker.run(scenario)


@pytest.mark.parametrize(("resource_type", "name"), [(BROKER, "2"), (BROKER, "one"), (BROKER_LOGGER, ""),
                                                     (3, "g"), (99, "x")])
def test_another_broker_a_bad_name_or_an_unsupported_resource_is_an_invalid_request(
    broker: BrokerRunner, resource_type: int, name: str
) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert (await describe(h, resource_type, name)).error_code == ErrorCode.INVALID_REQUEST

    broker.run(scenario)


def test_the_broker_s_loggers(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        result = await describe(h, BROKER_LOGGER, "1")
        assert result.error_code == ErrorCode.NONE
        levels = {c.name: c.value for c in result.configs}
        assert "root" in levels
        assert set(levels.values()) <= {"ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}

    broker.run(scenario)
