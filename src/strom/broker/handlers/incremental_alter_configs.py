"""IncrementalAlterConfigs (44): SET/DELETE/APPEND/SUBTRACT on topic config overrides.

Each operation changes one setting and leaves the others as they are. APPEND and
SUBTRACT apply only to list-valued settings (``cleanup.policy``) and start from the
setting's current value (the topic's override, else the broker default); APPEND adds
the values not yet in the list, SUBTRACT removes them. Anything else APPEND/SUBTRACT
is INVALID_CONFIG, as in Kafka; so are unknown names and values the topic config
refuses (an empty cleanup.policy among them). An unknown operation or a null value for
SET/APPEND/SUBTRACT is INVALID_REQUEST. Resource checks (missing topic, broker
resources, duplicates) are those of AlterConfigs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from strom.broker.handlers.alter_configs import (
    Outcome,
    answer_each_resource,
    apply_topic_overrides,
    check_resource,
)
from strom.broker.handlers.describe_configs import CONFIG_TYPES, ConfigType
from strom.broker.metadata_cache import TopicError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from strom.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)
from strom.storage.config import LogConfig

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = IncrementalAlterConfigsRequest
VERSIONS = range(0, 2)

SET: Final = 0
DELETE: Final = 1
APPEND: Final = 2
SUBTRACT: Final = 3
TOPIC_SETTINGS: Final = frozenset(LogConfig().to_properties())


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, IncrementalAlterConfigsRequest)
    answers = answer_each_resource(body.resources, lambda r: _alter(broker, r, body.validate_only))
    return IncrementalAlterConfigsResponse(
        responses=tuple(AlterConfigsResourceResponse(code, message, kind, name) for code, message, kind, name in answers)
    )


def _alter(broker: Broker, resource: AlterConfigsResource, validate_only: bool) -> Outcome:
    topic = resource.resource_name
    refused = check_resource(broker, resource.resource_type, topic, [c.name for c in resource.configs])
    if refused is not None:
        return refused
    overrides = dict(broker.log_manager.topic_overrides.get(topic, {}))
    current = broker.log_manager.topic_config(topic).to_properties()
    try:
        for change in resource.configs:
            _apply(overrides, current, change)
    except TopicError as exc:
        return exc.error_code, str(exc)
    return apply_topic_overrides(broker, topic, overrides, validate_only)


def _apply(overrides: dict[str, str], current: dict[str, str], change: AlterableConfig) -> None:
    name, operation, value = change.name, change.config_operation, change.value
    if operation not in (SET, DELETE, APPEND, SUBTRACT):
        raise TopicError(ErrorCode.INVALID_REQUEST, f"unknown config operation {operation} for {name}")
    if name not in TOPIC_SETTINGS:
        raise TopicError(ErrorCode.INVALID_CONFIG, f"unknown topic config {name!r}")
    if operation == DELETE:
        overrides.pop(name, None)
        return
    if value is None:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"null value for {name}")
    if operation == SET:
        overrides[name] = value
        return
    if CONFIG_TYPES.get(name) != ConfigType.LIST:
        raise TopicError(ErrorCode.INVALID_CONFIG, f"{name} is not a list: APPEND/SUBTRACT do not apply")
    items = _split(overrides.get(name, current[name]))
    given = _split(value)
    if operation == APPEND:
        items += [item for item in given if item not in items]
    else:
        items = [item for item in items if item not in given]
    overrides[name] = ",".join(items)


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
