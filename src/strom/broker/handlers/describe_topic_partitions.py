"""DescribeTopicPartitions (75): topics and their partitions, in pages (KIP-966).

What Metadata tells of topics, for admin clients (the Java admin's ``describeTopics``
and librdkafka's ``DescribeTopics`` use it when offered), paged so that a topic with
very many partitions does not make one huge answer: topics in name order, at most
``min(response_partition_limit, 2000)`` partitions (Kafka's
``max.request.partition.size.limit``), and a ``next_cursor`` naming the first
partition left out. No topics named means every topic. Each topic carries its
authorized operations, from ``authorizer``. Kafka serves this API in KRaft mode; its
semantics here are those of Kafka's handler and ``KRaftMetadataCache``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from strom.broker.authorizer import (
    AclOperation,
    ResourceType,
    allowed,
    authorized_operations,
    refused,
)
from strom.broker.metadata_cache import TopicError, TopicMetadata, validate_topic_name
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from strom.protocol.messages.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request
    from strom.security.acl.authorizer import AclAuthorizer

REQUEST = DescribeTopicPartitionsRequest
VERSIONS = range(0, 1)

MAX_REQUEST_PARTITION_SIZE_LIMIT: Final = 2000  # Kafka's max.request.partition.size.limit default


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DescribeTopicPartitionsRequest)
    cursor = body.cursor
    after = cursor.topic_name if cursor is not None else ""
    every_topic = not body.topics
    authorizer = broker.authorizer  # ACLs: every topic lists those the principal may Describe; one asked for is 29
    if every_topic:
        names = sorted(t.name for t in broker.metadata.topics() if t.name >= after and (
            authorizer is None or allowed(authorizer, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)))
    else:
        names = sorted({t.name for t in body.topics if t.name >= after})
        if cursor is not None and cursor.topic_name not in names:
            error = ErrorCode.INVALID_REQUEST  # Kafka: the cursor's topic must be one asked for
            return DescribeTopicPartitionsResponse(topics=tuple(
                DescribeTopicPartitionsResponseTopic(error_code=error, name=t.name) for t in body.topics))
    remaining = min(MAX_REQUEST_PARTITION_SIZE_LIMIT, body.response_partition_limit)
    hidden = refused(authorizer, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    topics = [DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name)
              for name in names if name in hidden]
    names = [name for name in names if name not in hidden]
    next_cursor: Cursor | None = None
    for name in names:
        if remaining <= 0:  # the page is full: the next one starts at this topic
            next_cursor = Cursor(name, 0)
            break
        topic = broker.metadata.get(name)
        if topic is None:
            if not every_topic:
                topics.append(_missing(name, authorizer))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        shown = range(first, min(topic.partitions, first + remaining))
        topics.append(_describe(broker, topic, shown))
        if shown.stop < topic.partitions:
            next_cursor = Cursor(name, shown.stop)
            break
        remaining -= len(shown)
    return DescribeTopicPartitionsResponse(topics=tuple(topics), next_cursor=next_cursor)


def _missing(name: str, authorizer: AclAuthorizer | None) -> DescribeTopicPartitionsResponseTopic:
    try:
        validate_topic_name(name)
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except TopicError:
        error = ErrorCode.INVALID_TOPIC_EXCEPTION
    return DescribeTopicPartitionsResponseTopic(
        error_code=error, name=name,
        topic_authorized_operations=authorized_operations(ResourceType.TOPIC, name, authorizer=authorizer))


def _describe(broker: Broker, topic: TopicMetadata, shown: range) -> DescribeTopicPartitionsResponseTopic:
    hosted = broker.replica_manager.partitions
    partitions = []
    for index in shown:
        partition = hosted.get((topic.name, index))
        if partition is None:  # known to the cache but not (yet) hosted: no leader
            partitions.append(DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.LEADER_NOT_AVAILABLE, partition_index=index, leader_id=-1,
                eligible_leader_replicas=(), last_known_elr=()))
            continue
        partitions.append(DescribeTopicPartitionsResponsePartition(
            error_code=0,
            partition_index=index,
            leader_id=partition.leader_id,
            leader_epoch=partition.leader_epoch,
            replica_nodes=partition.replicas,
            isr_nodes=tuple(sorted(partition.isr)),
            eligible_leader_replicas=(),  # KIP-966's ELR: not kept (Kafka's default is off)
            last_known_elr=(),
            offline_replicas=(),
        ))
    return DescribeTopicPartitionsResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=tuple(partitions),
        topic_authorized_operations=authorized_operations(ResourceType.TOPIC, topic.name, authorizer=broker.authorizer),
    )
