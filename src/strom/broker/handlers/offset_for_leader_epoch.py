"""OffsetForLeaderEpoch (23): where each requested leader epoch ends in the log.

Consumers (KIP-320) and followers ask this after a leader change to find out whether
their position is still on the log. The answer is the largest epoch at or below the
requested one and the offset where the next epoch starts (the log end offset for the
current epoch); an epoch newer than any the log knows gets (-1, -1), as in Kafka.
``current_leader_epoch`` (v2+) fences stale or future callers as ListOffsets does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed_on_cluster, refused
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
)
from strom.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from strom.storage.errors import StorageError

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = OffsetForLeaderEpochRequest
VERSIONS = range(0, 5)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, OffsetForLeaderEpochRequest)
    # ACLs: ClusterAction on the cluster (a follower) allows every topic, else Describe on each.
    authorizer = broker.authorizer
    hidden = refused(None if authorizer is None or allowed_on_cluster(authorizer, AclOperation.CLUSTER_ACTION)
                     else authorizer, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in body.topics))
    return OffsetForLeaderEpochResponse(
        topics=tuple(
            OffsetForLeaderTopicResult(t.topic, tuple(
                _end_offset(broker, t.topic, p) if t.topic not in hidden
                else EpochEndOffset(ErrorCode.TOPIC_AUTHORIZATION_FAILED, p.partition) for p in t.partitions))
            for t in body.topics
        )
    )


def _end_offset(broker: Broker, topic: str, request: OffsetForLeaderPartition) -> EpochEndOffset:
    index = request.partition
    try:
        partition = broker.replica_manager.partition_or_error(topic, index, request.current_leader_epoch)
    except StorageError as exc:
        return EpochEndOffset(exc.error_code, index)
    found_epoch, end_offset = partition.last_offset_for_leader_epoch(request.leader_epoch)
    return EpochEndOffset(0, index, leader_epoch=found_epoch, end_offset=end_offset)
