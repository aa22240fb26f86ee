"""DeleteTopics (20): by name (v0-v5) or by name or id (v6+).

In cluster mode only the controller deletes topics: any other broker answers every
entry NOT_CONTROLLER, as Kafka's ZooKeeper mode does.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
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
    if not broker.is_controller():  # a cluster's broker that is not the controller: as Kafka's ZK mode
        return DeleteTopicsResponse(responses=tuple(
            DeletableTopicResult(name, topic_id, ErrorCode.NOT_CONTROLLER, None) for name, topic_id in wanted))
    if any(name is not None and topic_id != ZERO_ID for name, topic_id in wanted):
        # Kafka refuses the whole request ("Topic name and topic ID can not both be
        # specified"): every topic INVALID_REQUEST, nothing deleted.
        return DeleteTopicsResponse(responses=tuple(
            DeletableTopicResult(name, topic_id, ErrorCode.INVALID_REQUEST, None) for name, topic_id in wanted))
    return DeleteTopicsResponse(responses=tuple(_delete(broker, name, topic_id) for name, topic_id in wanted))


def _delete(broker: Broker, name: str | None, topic_id: uuid.UUID) -> DeletableTopicResult:
    """One topic's result. Like Kafka, no error message (its DeleteTopics sets none) and the
    topic id as the request gave it (zero when named)."""
    by_id = name is None
    if name is None:
        found = broker.metadata.by_id(topic_id)
        if found is None:
            return DeletableTopicResult(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, None)
        name = found.name
    if not broker.config.delete_topic_enable:
        return DeletableTopicResult(name, topic_id, ErrorCode.TOPIC_DELETION_DISABLED, None)
    if (authorizer := broker.authorizer) is not None:  # ACLs: Delete; a topic named by id also Describe, or no name
        if by_id and not allowed(authorizer, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            return DeletableTopicResult(None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
        if not allowed(authorizer, AclOperation.DELETE, ResourceType.TOPIC, name):
            return DeletableTopicResult(name, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    try:
        broker.admin_manager.delete_topic(name)
    except TopicError as exc:
        return DeletableTopicResult(name, topic_id, exc.error_code, None)
    return DeletableTopicResult(name, topic_id, 0, None)
