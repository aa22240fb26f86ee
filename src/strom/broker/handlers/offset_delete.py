"""OffsetDelete (47): delete a group's committed offsets for some partitions (KIP-496).

GROUP_ID_NOT_FOUND for an unknown group; for a consumer group with members, partitions
of topics it subscribes to get GROUP_SUBSCRIBED_TO_TOPIC; NON_EMPTY_GROUP when the
group has members whose subscriptions cannot be read; unknown topics
UNKNOWN_TOPIC_OR_PARTITION. The codec has v0 only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.offset_delete_request import OffsetDeleteRequest
from strom.protocol.messages.offset_delete_response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = OffsetDeleteRequest
VERSIONS = range(0, 1)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, OffsetDeleteRequest)
    errors: dict[TopicPartition, ErrorCode] = {}
    known: list[TopicPartition] = []
    authorizer = broker.authorizer  # ACLs: Delete on the group, Read on each topic
    if authorizer is not None and not allowed(authorizer, AclOperation.DELETE, ResourceType.GROUP, body.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    for topic in body.topics:
        metadata = broker.metadata.get(topic.name)
        refused = authorizer is not None and not allowed(authorizer, AclOperation.READ, ResourceType.TOPIC, topic.name)
        for partition in topic.partitions:
            tp = (topic.name, partition.partition_index)
            if refused:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif metadata is None or not 0 <= tp[1] < metadata.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append(tp)
    error, results = broker.group_coordinator.delete_offsets(body.group_id, known)
    if error:
        return OffsetDeleteResponse(error_code=error)
    errors.update(results)
    return OffsetDeleteResponse(
        error_code=0,
        topics=tuple(
            OffsetDeleteResponseTopic(
                topic.name,
                tuple(
                    OffsetDeleteResponsePartition(p.partition_index, errors[(topic.name, p.partition_index)])
                    for p in topic.partitions
                ),
            )
            for topic in body.topics
        ),
    )
