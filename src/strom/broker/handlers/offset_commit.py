"""OffsetCommit (8): store a group's consumed positions in ``__consumer_offsets``.

The commits of one request are one record batch on the group's partition, appended
(and, with ``offsets.commit.required.acks=-1``, replicated to the ISR) before the answer. v1 carries a commit timestamp per partition, v2-v4 a retention
time (the offset's expire timestamp), v6+ the leader epoch, v7+ ``group.instance.id``;
v9's member epoch is the generation for a classic group. Unknown topics or
partitions get UNKNOWN_TOPIC_OR_PARTITION, as Kafka. Every codec version is served.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.broker.group.group_metadata import OffsetAndMetadata
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.offset_commit_request import OffsetCommitRequest
from strom.protocol.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = OffsetCommitRequest
VERSIONS = range(0, 10)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, OffsetCommitRequest)
    version = request.api_version
    now = time.time_ns() // 1_000_000
    expire = now + body.retention_time_ms if 2 <= version <= 4 and body.retention_time_ms >= 0 else -1
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    authorizer = broker.authorizer  # ACLs: Read on the group, then Read on each topic (Kafka's order)
    group_refused = authorizer is not None and not allowed(authorizer, AclOperation.READ, ResourceType.GROUP,
                                                           body.group_id)
    for topic in body.topics:
        metadata = broker.metadata.get(topic.name)
        refusal = ErrorCode.GROUP_AUTHORIZATION_FAILED if group_refused else (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED if authorizer is not None and not allowed(
                authorizer, AclOperation.READ, ResourceType.TOPIC, topic.name) else None)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if refusal is not None:
                errors[tp] = refusal
                continue
            if metadata is None or not 0 <= p.partition_index < metadata.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            commit_timestamp = p.commit_timestamp if version == 1 and p.commit_timestamp >= 0 else now
            offsets[tp] = OffsetAndMetadata(
                p.committed_offset,
                p.committed_leader_epoch if version >= 6 else -1,
                p.committed_metadata or "",
                commit_timestamp,
                expire,
            )
    if offsets:
        errors.update(
            await broker.group_coordinator.commit_offsets(
                body.group_id,
                body.member_id,
                body.group_instance_id if version >= 7 else None,
                body.generation_id_or_member_epoch,
                offsets,
            )
        )
    return OffsetCommitResponse(
        topics=tuple(
            OffsetCommitResponseTopic(
                topic.name,
                tuple(
                    OffsetCommitResponsePartition(p.partition_index, errors[(topic.name, p.partition_index)])
                    for p in topic.partitions
                ),
            )
            for topic in body.topics
        )
    )
