"""DeleteTopics (20): by name (v0-v5) or by name or id (v6+)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from strom.broker.metadata_cache import TopicError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.delete_topics_request import DeleteTopicsRequest
from strom.protocol.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DeleteTopicsRequest
VERSIONS = range(0, 7)
ZERO_ID = uuid.UUID(int=0)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DeleteTopicsRequest)
    wanted: list[tuple[str | None, uuid.UUID]] = [(name, ZERO_ID) for name in body.topic_names]
    wanted += [(t.name, t.topic_id) for t in body.topics]
    return DeleteTopicsResponse(responses=tuple(_delete(broker, name, topic_id) for name, topic_id in wanted))


def _delete(broker: Broker, name: str | None, topic_id: uuid.UUID) -> DeletableTopicResult:
    if name is None:
        found = broker.metadata.by_id(topic_id)
        if found is None:
            return DeletableTopicResult(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, "no topic with this id")
        name = found.name
    if not broker.config.delete_topic_enable:
        return DeletableTopicResult(name, topic_id, ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable=false")
    try:
        deleted = broker.admin_manager.delete_topic(name)
    except TopicError as exc:
        return DeletableTopicResult(name, topic_id, exc.error_code, str(exc))
    return DeletableTopicResult(name, deleted.topic_id, 0, None)
