"""AlterConfigs (33): replace a topic's config overrides with the given set, or only validate.

The legacy, non-incremental API: the overrides named become the topic's whole set,
and every setting not named goes back to the broker default, as in Kafka. Unknown
names and bad values are INVALID_CONFIG; a null value, a name given twice or a
resource named twice INVALID_REQUEST; a missing topic UNKNOWN_TOPIC_OR_PARTITION.
BROKER and BROKER_LOGGER resources cannot be altered yet (dynamic broker configs are
not supported): changing any of their settings is INVALID_REQUEST with a message
saying so, the answer Kafka gives for a broker setting that is not dynamic. The
resource checks here are shared with IncrementalAlterConfigs.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from strom.broker.handlers.describe_configs import ResourceType, broker_id
from strom.broker.metadata_cache import TopicError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.alter_configs_request import AlterConfigsRequest, AlterConfigsResource
from strom.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from strom.storage.errors import StorageError

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
    answers = answer_each_resource(body.resources, lambda r: _alter(broker, r, body.validate_only))
    return AlterConfigsResponse(
        responses=tuple(AlterConfigsResourceResponse(code, message, kind, name) for code, message, kind, name in answers)
    )


class _Resource(Protocol):
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...


R = TypeVar("R", bound=_Resource)


def answer_each_resource(
    resources: Iterable[R], alter: Callable[[R], Outcome]
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
            outcome = alter(resource)
        answers.append((outcome[0], outcome[1], resource.resource_type, resource.resource_name))
    return answers


def _alter(broker: Broker, resource: AlterConfigsResource, validate_only: bool) -> Outcome:
    names = [config.name for config in resource.configs]
    refused = check_resource(broker, resource.resource_type, resource.resource_name, names)
    if refused is not None:
        return refused
    nulls = [config.name for config in resource.configs if config.value is None]
    if nulls:
        return ErrorCode.INVALID_REQUEST, f"null values are not supported: {', '.join(nulls)}"
    overrides = {config.name: config.value for config in resource.configs if config.value is not None}
    return apply_topic_overrides(broker, resource.resource_name, overrides, validate_only)


def check_resource(broker: Broker, resource_type: int, name: str, config_names: list[str]) -> Outcome | None:
    """None for an existing topic with each setting named once; else the resource's answer."""
    if resource_type == ResourceType.TOPIC:
        if broker.metadata.get(name) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}"
        twice = sorted(n for n, count in Counter(config_names).items() if count > 1)
        if twice:
            return ErrorCode.INVALID_REQUEST, f"settings named more than once: {', '.join(twice)}"
        return None
    if resource_type not in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
        return ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource_type}"
    try:
        broker_id(broker, name, allow_empty=resource_type == ResourceType.BROKER)
    except TopicError as exc:
        return exc.error_code, str(exc)
    if not config_names:
        return OK
    what = "broker" if resource_type == ResourceType.BROKER else "log level"
    return (
        ErrorCode.INVALID_REQUEST,
        f"dynamic {what} configs are not supported yet; set {', '.join(sorted(config_names))} "
        "in server.properties (or with --override) and restart",
    )


def apply_topic_overrides(broker: Broker, topic: str, overrides: Mapping[str, str], validate_only: bool) -> Outcome:
    """Validate a topic's new override set and, unless validating only, persist it."""
    log_manager = broker.log_manager
    try:
        log_manager.default_config.with_overrides(overrides)
        if not validate_only:
            log_manager.set_topic_config(topic, overrides)
    except StorageError as exc:
        return exc.error_code, str(exc)
    if not validate_only:
        logger.info("topic %s config overrides are now %s", topic, dict(overrides))
    return OK
