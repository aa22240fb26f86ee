"""IncrementalAlterConfigs (44): SET/DELETE/APPEND/SUBTRACT on topic overrides or a dynamic broker layer.

Each operation changes one setting and leaves the others as they are. APPEND and
SUBTRACT apply only to list-valued settings (``cleanup.policy``, ``log.cleanup.policy``);
APPEND adds the values not yet in the list, SUBTRACT removes them. On a topic they start
from the setting's current value (the topic's override, else the broker default); on a
BROKER resource from the layer's own value, else Kafka's default (ConfigAdminManager's
prepareIncrementalConfigs). Anything else APPEND/SUBTRACT is INVALID_CONFIG, as in
Kafka; so are unknown topic settings and values the topic config refuses (an empty
cleanup.policy among them). The changed broker layer is then checked as a whole, as
AlterConfigs checks it (INVALID_REQUEST for a setting that is not dynamic or a bad
value). An unknown operation or a null value for SET/APPEND/SUBTRACT is
INVALID_REQUEST. Resource checks (missing topic, broker id, duplicates) are those of
AlterConfigs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from strom.broker.authorizer import AclOperation, config_refusal
from strom.broker.config import BROKER_TO_TOPIC
from strom.broker.handlers.alter_configs import (
    Outcome,
    answer_each_resource,
    apply_broker_configs,
    apply_topic_overrides,
    check_resource,
)
from strom.broker.handlers.describe_configs import CONFIG_TYPES, ConfigType, ResourceType
from strom.broker.kafka_broker_configs import NO_EFFECT_CONFIGS
from strom.broker.metadata_cache import TopicError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException
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
_KAFKA_TOPIC_DEFAULTS: Final = LogConfig().to_properties()


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, IncrementalAlterConfigsRequest)
    answers = await answer_each_resource(body.resources, lambda r: _alter(broker, r, body.validate_only))
    return IncrementalAlterConfigsResponse(
        responses=tuple(AlterConfigsResourceResponse(code, message, kind, name) for code, message, kind, name in answers)
    )


async def _alter(broker: Broker, resource: AlterConfigsResource, validate_only: bool) -> Outcome:
    if broker.authorizer is not None and (refusal := config_refusal(
            broker.authorizer, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)):
        return refusal, None
    name = resource.resource_name
    refused = check_resource(broker, resource.resource_type, name, [c.name for c in resource.configs])
    if refused is not None:
        return refused
    if resource.resource_type == ResourceType.BROKER:
        layer = dict(broker.dynamic_config.layer(per_broker=bool(name)))
        try:
            for change in resource.configs:
                _apply(layer, lambda setting: layer.get(setting, _kafka_default(setting)), change, known=None)
        except TopicError as exc:
            return exc.error_code, str(exc)
        return await apply_broker_configs(broker, name, layer, validate_only)
    if broker.cluster is not None:  # a cluster's topic configs live in ZooKeeper, whoever hosts the topic
        try:
            overrides = await broker.cluster.read_topic_config(name)
        except KafkaException as exc:
            return ErrorCode(exc.error_code or ErrorCode.UNKNOWN_SERVER_ERROR), str(exc)
    else:
        overrides = dict(broker.log_manager.topic_overrides.get(name, {}))
    current = broker.log_manager.default_config.with_overrides(overrides).to_properties()
    try:
        for change in resource.configs:
            _apply(overrides, lambda setting: overrides.get(setting, current[setting]), change, known=TOPIC_SETTINGS)
    except TopicError as exc:
        return exc.error_code, str(exc)
    return await apply_topic_overrides(broker, name, overrides, validate_only)


def _apply(values: dict[str, str], current: Callable[[str], str], change: AlterableConfig,
           known: frozenset[str] | None) -> None:
    """One operation on ``values``; ``current`` gives the list APPEND/SUBTRACT start from."""
    name, operation, value = change.name, change.config_operation, change.value
    if operation not in (SET, DELETE, APPEND, SUBTRACT):
        raise TopicError(ErrorCode.INVALID_REQUEST, f"unknown config operation {operation} for {name}")
    if known is not None and name not in known:
        raise TopicError(ErrorCode.INVALID_CONFIG, f"unknown topic config {name!r}")
    if operation == DELETE:
        values.pop(name, None)
        return
    if value is None:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")  # Kafka's words
    if operation == SET:
        values[name] = value
        return
    if not _is_list(name):
        verb = "append" if operation == APPEND else "subtract"
        raise TopicError(ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}")
    items = _split(current(name))
    given = _split(value)
    if operation == APPEND:
        items += [item for item in given if item not in items]
    else:
        items = [item for item in items if item not in given]
    values[name] = ",".join(items)


def _is_list(name: str) -> bool:
    """Kafka's type of the setting is LIST (a topic's, a broker's, or one Strom keeps only)."""
    setting = NO_EFFECT_CONFIGS.get(name)
    return CONFIG_TYPES.get(name) == ConfigType.LIST or (setting is not None and setting.type == "LIST")


def _kafka_default(broker_setting: str) -> str:
    """Kafka's default of a broker setting that is a list (a topic default, or one of the
    Kafka configs Strom keeps without using)."""
    topic_setting = BROKER_TO_TOPIC.get(broker_setting)
    if topic_setting is not None:
        return _KAFKA_TOPIC_DEFAULTS[topic_setting]
    setting = NO_EFFECT_CONFIGS.get(broker_setting)
    return (setting.default or "") if setting is not None else ""


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
