"""IncrementalAlterConfigs (44): SET, DELETE, APPEND and SUBTRACT on a topic's settings."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def alter(h: BrokerHarness, topic: str, *changes: tuple[str, int, str | None], version: int = 1,
                validate_only: bool = False, resource_type: int = TOPIC) -> int:
    request = IncrementalAlterConfigsRequest(
        resources=(AlterConfigsResource(resource_type, topic, tuple(AlterableConfig(n, op, v) for n, op, v in changes)),),
        validate_only=validate_only,
    )
    (answer,) = (await h.request(request, version=version)).responses
    assert answer.resource_name == topic
    error: int = answer.error_code
    return error


async def value(h: BrokerHarness, topic: str, name: str) -> str:
    request = DescribeConfigsRequest(resources=(DescribeConfigsResource(TOPIC, topic, (name,)),))
    (result,) = (await h.request(request, version=4)).results
    found: str = result.configs[0].value
    return found


@pytest.mark.parametrize("version", [0, 1])
def test_set_and_delete_leave_the_other_settings_alone(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", configs={"retention.ms": "1000"})
        assert await alter(h, "t", ("segment.ms", SET, "60000"), version=version) == 0
        assert (await value(h, "t", "segment.ms"), await value(h, "t", "retention.ms")) == ("60000", "1000")
        assert await alter(h, "t", ("retention.ms", DELETE, None), version=version) == 0
        assert (await value(h, "t", "segment.ms"), await value(h, "t", "retention.ms")) == ("60000", "604800000")

    broker.run(scenario)


def test_append_and_subtract_on_a_list_setting(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        assert await alter(h, "t", ("cleanup.policy", APPEND, "compact")) == 0
        assert await value(h, "t", "cleanup.policy") == "delete,compact"
        assert await alter(h, "t", ("cleanup.policy", APPEND, "compact")) == 0  # already there: unchanged
        assert await value(h, "t", "cleanup.policy") == "delete,compact"
        assert await alter(h, "t", ("cleanup.policy", SUBTRACT, "delete")) == 0
        assert await value(h, "t", "cleanup.policy") == "compact"

    broker.run(scenario)


def test_validate_only_changes_nothing(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        assert await alter(h, "t", ("retention.ms", SET, "5"), validate_only=True) == 0
        assert await value(h, "t", "retention.ms") == "604800000"

    broker.run(scenario)


@pytest.mark.parametrize("change", [("retention.ms", APPEND, "5"), ("segment.bytes", SUBTRACT, "1"),
                                    ("no.such.setting", SET, "1"), ("retention.ms", SET, "soon"),
                                    ("cleanup.policy", SUBTRACT, "delete")])
def test_an_impossible_change_is_an_invalid_config(broker: BrokerRunner, change: tuple[str, int, str]) -> None:
    """APPEND/SUBTRACT on a non-list, unknown names, bad values, and an emptied cleanup.policy."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        assert await alter(h, "t", change) == ErrorCode.INVALID_CONFIG
        assert await value(h, "t", "retention.ms") == "604800000"

    broker.run(scenario)


@pytest.mark.parametrize("change", [("retention.ms", 7, "5"), ("retention.ms", SET, None)])
def test_an_unknown_operation_or_a_null_value_is_an_invalid_request(
    broker: BrokerRunner, change: tuple[str, int, str | None]
) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        assert await alter(h, "t", change) == ErrorCode.INVALID_REQUEST

    broker.run(scenario)


def test_a_setting_named_twice_is_an_invalid_request(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        assert await alter(h, "t", ("retention.ms", SET, "5"), ("retention.ms", SET, "6")) == ErrorCode.INVALID_REQUEST

    broker.run(scenario)


def test_an_unknown_topic_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert await alter(h, "absent", ("retention.ms", SET, "5")) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.run(scenario)


def test_a_static_broker_setting_cannot_be_altered(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        error = await alter(h, "1", ("num.partitions", SET, "5"), resource_type=BROKER)
        assert error == ErrorCode.INVALID_REQUEST

    broker.run(scenario)
