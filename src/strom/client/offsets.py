"""Committed offsets: what a group stores per partition, and the requests that carry them.

OffsetCommit and OffsetFetch changed shape across versions (the generation and member
id from OffsetCommit v1, the leader epoch from v6, the instance id from v7; OffsetFetch
v8 batches groups), and the generated encoders refuse a field the chosen version does
not have. So each request is built for the version the connection negotiated, and each
answer read in whichever shape that version has.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from strom.client.errors import KafkaError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from strom.protocol.messages.offset_commit_response import OffsetCommitResponse
from strom.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from strom.protocol.messages.offset_fetch_response import OffsetFetchResponse
from strom.protocol.topic_partition import TopicPartition

# OffsetCommit v0 has no generation: a member's commit could not be fenced. v1 is the floor.
OFFSET_COMMIT_VERSIONS = range(1, OffsetCommitRequest.VALID_VERSIONS.stop)
# OffsetFetch v0 reads offsets from ZooKeeper, not from the group coordinator.
OFFSET_FETCH_VERSIONS = range(1, OffsetFetchRequest.VALID_VERSIONS.stop)


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """The next offset to consume, a free-form note, and the leader epoch it was read in."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class CommitFailedError(KafkaError):
    """The commit was refused because this member is no longer in the generation.

    As the Java client's ``CommitFailedException``: the group rebalanced without this
    member (it was too slow between polls, or its session expired), so its partitions
    may already be consumed by others. Not retriable: rejoin, then commit what is
    processed of the new assignment.
    """

    @property
    def retriable(self) -> bool:
        return False


def offset_commit_request(version: int, group_id: str, generation_id: int, member_id: str,
                          group_instance_id: str | None,
                          offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> OffsetCommitRequest:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = defaultdict(list)
    for (topic, partition), committed in sorted(offsets.items()):
        epoch = committed.leader_epoch if committed.leader_epoch is not None and version >= 6 else -1
        by_topic[topic].append(OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=committed.offset,
            committed_leader_epoch=epoch, committed_metadata=committed.metadata))
    return OffsetCommitRequest(
        group_id=group_id, generation_id_or_member_epoch=generation_id, member_id=member_id,
        group_instance_id=group_instance_id if version >= 7 else None,
        topics=tuple(OffsetCommitRequestTopic(name=topic, partitions=tuple(partitions))
                     for topic, partitions in by_topic.items()))


def offset_commit_errors(response: OffsetCommitResponse) -> dict[TopicPartition, ErrorCode]:
    return {(topic.name, p.partition_index): ErrorCode.from_code(p.error_code)
            for topic in response.topics for p in topic.partitions}


def offset_fetch_request(version: int, group_id: str,
                         partitions: Collection[TopicPartition]) -> OffsetFetchRequest:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(partitions):
        by_topic[topic].append(partition)
    # require_stable (v7+): wait out pending transactional commits instead of reading past them.
    if version >= 8:
        topics = tuple(OffsetFetchRequestTopics(name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items())
        return OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id=group_id, topics=topics),),
                                  require_stable=True)
    return OffsetFetchRequest(
        group_id=group_id,
        topics=tuple(OffsetFetchRequestTopic(name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items()),
        require_stable=version >= 7)


def offset_fetch_result(version: int, response: OffsetFetchResponse) -> tuple[
        ErrorCode, dict[TopicPartition, tuple[ErrorCode, OffsetAndMetadata | None]]]:
    """The group-level error, and per partition its error and committed offset (None: none)."""
    if version >= 8:
        if not response.groups:
            return ErrorCode.UNKNOWN_SERVER_ERROR, {}
        group = response.groups[0]
        error = ErrorCode.from_code(group.error_code)
        rows = [(topic.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata,
                 p.error_code) for topic in group.topics for p in topic.partitions]
    else:
        error = ErrorCode.from_code(response.error_code)
        rows = [(topic.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata,
                 p.error_code) for topic in response.topics for p in topic.partitions]
    result: dict[TopicPartition, tuple[ErrorCode, OffsetAndMetadata | None]] = {}
    for topic_name, partition, offset, epoch, metadata, code in rows:
        committed = None if offset < 0 else OffsetAndMetadata(offset, metadata or "", epoch if epoch >= 0 else None)
        result[(topic_name, partition)] = (ErrorCode.from_code(code), committed)
    return error, result
