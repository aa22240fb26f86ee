"""AlterConfigs (33): replace a topic's config overrides with the given set, or only validate.

The legacy, non-incremental API: the settings named become the resource's whole set,
and every setting not named goes back to the layer below, as in Kafka. TOPIC: the
topic's overrides; unknown names and bad values are INVALID_CONFIG; a missing topic
UNKNOWN_TOPIC_OR_PARTITION. BROKER: a dynamic layer (``strom.broker.dynamic_config``),
this broker's own when the name is its id, the cluster-wide default when the name is
empty; Kafka's dynamic configs Strom has no equivalent for and unknown names are kept
with no effect, as Kafka keeps them; another broker's id, a setting that is not dynamic
or a bad value is INVALID_REQUEST with Kafka's message (ConfigAdminManager answers INVALID_REQUEST for
every refused broker config), but a password config on this broker is INVALID_CONFIG, as in
Kafka's ZooKeeper mode without ``password.encoder.secret``. Deprecated topic settings Kafka 3.9 still accepts are
taken and ignored, with a warning once per topic and value. A null value, a name given
twice or a resource named twice is INVALID_REQUEST. BROKER_LOGGER levels cannot be set
yet. The resource checks here are shared with IncrementalAlterConfigs.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from strom.broker.authorizer import AclOperation, config_refusal
from strom.broker.dynamic_config import DynamicConfigError
from strom.broker.handlers.describe_configs import ResourceType, broker_id
from strom.broker.metadata_cache import TopicError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException
from strom.protocol.message import Message
from strom.protocol.messages.alter_configs_request import AlterConfigsRequest, AlterConfigsResource
from strom.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from strom.storage.config import DEPRECATED_TOPIC_CONFIGS

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

logger = logging.getLogger(__name__)

REQUEST = AlterConfigsRequest
VERSIONS = range(0, 3)

Outcome = tuple[ErrorCode, str | None]
OK: Final[Outcome] = (ErrorCode.NONE, None)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, AlterConfigsRequest)
    answers = await answer_each_resource(body.resources, lambda r: _alter(broker, r, body.validate_only))
    return AlterConfigsResponse(
        responses=tuple(AlterConfigsResourceResponse(code, message, kind, name) for code, message, kind, name in answers)
    )


class _Resource(Protocol):
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...


R = TypeVar("R", bound=_Resource)


async def answer_each_resource(
    resources: Iterable[R], alter: Callable[[R], Awaitable[Outcome]]
) -> list[tuple[ErrorCode, str | None, int, str]]:
    """(error, message, type, name) per resource; one named twice is refused once, as Kafka."""
    resources = list(resources)
    named = Counter((r.resource_type, r.resource_name) for r in resources)
    answers = []
    answered: set[tuple[int, str]] = set()
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        if key in answered:
            continue
        answered.add(key)
        if named[key] > 1:
            outcome: Outcome = (ErrorCode.INVALID_REQUEST, "resource named more than once")
        else:
            outcome = await alter(resource)
        answers.append((outcome[0], outcome[1], resource.resource_type, resource.resource_name))
    return answers


async def _alter(broker: Broker, resource: AlterConfigsResource, validate_only: bool) -> Outcome:
    if broker.authorizer is not None and (refusal := config_refusal(
            broker.authorizer, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)):
        return refusal, None
    names = [config.name for config in resource.configs]
    refused = check_resource(broker, resource.resource_type, resource.resource_name, names)
    if refused is not None:
        return refused
    nulls = [config.name for config in resource.configs if config.value is None]
    if nulls:
        return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}"  # Kafka's words
    values = {config.name: config.value for config in resource.configs if config.value is not None}
    if resource.resource_type == ResourceType.BROKER:
        return await apply_broker_configs(broker, resource.resource_name, values, validate_only)
    return await apply_topic_overrides(broker, resource.resource_name, values, validate_only)


def check_resource(broker: Broker, resource_type: int, name: str, config_names: list[str]) -> Outcome | None:
    """None to go on (an existing topic, or this broker / the default, each setting named
    once); else the resource's answer."""
    if resource_type == ResourceType.TOPIC:
        if broker.metadata.get(name) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}"
        twice = sorted(n for n, count in Counter(config_names).items() if count > 1)
        if twice:
            return ErrorCode.INVALID_REQUEST, f"settings named more than once: {', '.join(twice)}"
        return None
    if resource_type == ResourceType.BROKER:
        return _check_broker(broker, name, config_names)
    if resource_type != ResourceType.BROKER_LOGGER:
        return ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource_type}"
    try:
        broker_id(broker, name, allow_empty=False)
    except TopicError as exc:
        return exc.error_code, str(exc)
    if not config_names:
        return OK
    return (
        ErrorCode.INVALID_REQUEST,
        f"dynamic log level configs are not supported yet; set {', '.join(sorted(config_names))} "
        "in the logging configuration and restart",
    )


def _check_broker(broker: Broker, name: str, config_names: list[str]) -> Outcome | None:
    """Kafka's ConfigAdminManager checks: the name is empty or this broker's id; no key twice."""
    if name:
        try:
            node = int(name)
        except ValueError:
            return ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
        if node != broker.node_id:
            return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id}, but received {name}"
    if len(set(config_names)) != len(config_names):
        return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
    return None


async def apply_broker_configs(broker: Broker, name: str, configs: Mapping[str, str], validate_only: bool) -> Outcome:
    """Make ``configs`` the whole dynamic layer named (this broker's id, or "" for the default)."""
    dynamic = broker.dynamic_config
    per_broker = bool(name)
    try:
        if validate_only:
            dynamic.validate(configs, per_broker=per_broker)
        else:
            await dynamic.update(configs, per_broker=per_broker)
    except DynamicConfigError as exc:
        return exc.error_code, str(exc)
    except OSError as exc:  # the store could not be written: nothing was applied
        logger.error("dynamic broker configs not saved: %s", exc)
        return ErrorCode.UNKNOWN_SERVER_ERROR, f"dynamic broker configs could not be saved: {exc.strerror or exc}"
    return OK


async def apply_topic_overrides(broker: Broker, topic: str, overrides: Mapping[str, str],
                                validate_only: bool) -> Outcome:
    """Validate a topic's new override set and, unless validating only, persist it."""
    log_manager = broker.log_manager
    try:
        log_manager.default_config.with_overrides(overrides)
        if not validate_only:
            if broker.cluster is not None:
                # ZooKeeper keeps a cluster's topic configs: /config/topics/<t> and a change
                # notification every broker (this one too) applies.
                await broker.cluster.write_topic_config(topic, overrides)
            log_manager.set_topic_config(topic, overrides)
    except KafkaException as exc:  # StorageError, or ZooKeeper's answer in a cluster
        return ErrorCode(exc.error_code or ErrorCode.UNKNOWN_SERVER_ERROR), str(exc)
    if not validate_only:
        logger.info("topic %s config overrides are now %s", topic, dict(overrides))
    warn_deprecated(topic, overrides)
    return OK


_warned: set[tuple[str, str, str]] = set()


def warn_deprecated(topic: str, configs: Mapping[str, str]) -> None:
    """Kafka's warning for a deprecated topic setting that is ignored; once per topic and value."""
    for name, value in configs.items():
        reason = DEPRECATED_TOPIC_CONFIGS.get(name)
        if reason is not None and (topic, name, value) not in _warned:
            _warned.add((topic, name, value))
            logger.warning("Topic configuration %s with value `%s` %s (topic `%s`).", name, value, reason, topic)
