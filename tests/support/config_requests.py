"""AlterConfigs, IncrementalAlterConfigs and DescribeConfigs on BROKER resources through the
in-process harness, and the codes their answers carry (shared by the dynamic-config tests)."""

from __future__ import annotations

from typing import Any

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
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig as IncrementalConfig,
)
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterConfigsResource as IncrementalResource,
)
from strom.protocol.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from tests.support.broker_harness import BrokerHarness

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
INT = 3


async def alter(h: BrokerHarness, name: str, configs: dict[str, str], *,
                validate_only: bool = False) -> tuple[int, str | None]:
    """Legacy AlterConfigs (v2) on BROKER ``name``: (error code, message)."""
    resource = AlterConfigsResource(BROKER, name, tuple(AlterableConfig(k, v) for k, v in configs.items()))
    response = await h.request(AlterConfigsRequest(resources=(resource,), validate_only=validate_only), version=2)
    (answer,) = response.responses
    return answer.error_code, answer.error_message


async def incremental(h: BrokerHarness, name: str, *changes: tuple[str, int, str | None]) -> tuple[int, str | None]:
    resource = IncrementalResource(BROKER, name, tuple(IncrementalConfig(n, op, v) for n, op, v in changes))
    response = await h.request(IncrementalAlterConfigsRequest(resources=(resource,)), version=1)
    (answer,) = response.responses
    return answer.error_code, answer.error_message


async def describe(h: BrokerHarness, resource_type: int, name: str, *keys: str) -> dict[str, Any]:
    request = DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type, name, keys or None),), include_synonyms=True
    )
    (result,) = (await h.request(request, version=4)).results
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {c.name: c for c in result.configs}


def layers(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]
