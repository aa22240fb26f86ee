"""OffsetFetch (9): a group's committed offsets; -1 where there is none.

v0-v7 ask for one group (v2+: null topics = every committed partition; v2+ carry a
top-level error), v8+ for a batch of groups. ``require_stable`` (v7+): a partition
asked for by name with an offset commit pending (a TxnOffsetCommit before its marker,
a commit before its replication) answers UNSTABLE_OFFSET_COMMIT with offset -1, and the
consumer retries (Kafka's ``getOffsets``; in a request for every partition, the
committed ones are checked, as Kafka 3.9 answers). Without it the last committed offset
is answered. v9's member id and
epoch are not checked for classic groups (as Kafka). Every codec version is served.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.broker.group.group_metadata import OffsetAndMetadata
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.offset_fetch_request import OffsetFetchRequest
from strom.protocol.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = OffsetFetchRequest
VERSIONS = range(0, 10)
Fetched = dict[TopicPartition, OffsetAndMetadata | None]



async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, OffsetFetchRequest)
    version = request.api_version
    if version >= 8:
        groups = []
        for group in body.groups:
            error, fetched, refused = _fetch(broker, group.group_id, group.topics)
            unstable = _unstable(broker, group.group_id, fetched, group.topics, body.require_stable)
            group_topics = tuple(
                OffsetFetchResponseTopics(name, tuple(
                    OffsetFetchResponsePartitions(*_partition(i, o, _stability(name, i, unstable, refused)))
                    for i, o in parts))
                for name, parts in _by_topic(fetched)
            )
            groups.append(OffsetFetchResponseGroup(group.group_id, group_topics, error))
        return OffsetFetchResponse(groups=tuple(groups))
    requested = body.topics if version >= 2 else body.topics or ()
    error, fetched, refused = _fetch(broker, body.group_id, requested)
    if error and version < 2:  # Kafka's getErrorResponse: every partition asked for carries the error
        fetched = {(topic.name, index): None for topic in requested or () for index in topic.partition_indexes}
    partition_error = error if version < 2 else ErrorCode.NONE
    unstable = _unstable(broker, body.group_id, fetched, requested, version >= 7 and body.require_stable)
    topics = tuple(
        OffsetFetchResponseTopic(
            name,
            tuple(OffsetFetchResponsePartition(*_partition(i, o, partition_error or _stability(name, i, unstable,
                                                                                               refused)))
                  for i, o in parts),
        )
        for name, parts in _by_topic(fetched)
    )
    return OffsetFetchResponse(topics=topics, error_code=error)


def _fetch(broker: Broker, group_id: str, topics: Sequence[object] | None
           ) -> tuple[ErrorCode, Fetched, set[TopicPartition]]:
    """The group's offsets, and the partitions asked for whose topic the principal may not
    Describe (answered TOPIC_AUTHORIZATION_FAILED; left out of an all-partitions answer)."""
    authorizer = broker.authorizer  # ACLs: Describe on the group, then on each topic, as Kafka
    if authorizer is not None and not allowed(authorizer, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}, set()
    partitions = None
    if topics is not None:
        partitions = [
            (topic.name, index)  # type: ignore[attr-defined]
            for topic in topics
            for index in topic.partition_indexes  # type: ignore[attr-defined]
        ]
    error, fetched = broker.group_coordinator.fetch_offsets(group_id, partitions)
    if authorizer is None:
        return error, fetched, set()
    refused = {tp for tp in fetched if not allowed(authorizer, AclOperation.DESCRIBE, ResourceType.TOPIC, tp[0])}
    if partitions is None:
        return error, {tp: offset for tp, offset in fetched.items() if tp not in refused}, set()
    return error, {tp: None if tp in refused else offset for tp, offset in fetched.items()}, refused


def _unstable(broker: Broker, group_id: str, fetched: Fetched, topics: Sequence[object] | None,
              require_stable: bool) -> set[TopicPartition]:
    if not require_stable or not fetched:
        return set()
    return broker.group_coordinator.unstable_offsets(group_id, fetched)


def _stability(topic: str, index: int, unstable: set[TopicPartition], refused: set[TopicPartition]) -> ErrorCode:
    if refused and (topic, index) in refused:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return ErrorCode.UNSTABLE_OFFSET_COMMIT if (topic, index) in unstable else ErrorCode.NONE


def _by_topic(fetched: Fetched) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]:
    topics: dict[str, list[tuple[int, OffsetAndMetadata | None]]] = {}
    for (topic, partition), offset in fetched.items():
        topics.setdefault(topic, []).append((partition, offset))
    return list(topics.items())


def _partition(
    index: int, offset: OffsetAndMetadata | None, error: ErrorCode = ErrorCode.NONE
) -> tuple[int, int, int, str, int]:
    if offset is None or error == ErrorCode.UNSTABLE_OFFSET_COMMIT:
        return index, -1, -1, "", error
    return index, offset.offset, offset.leader_epoch, offset.metadata, error
