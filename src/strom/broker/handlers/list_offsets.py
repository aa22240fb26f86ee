"""ListOffsets (2): earliest (-2), latest (-1), by timestamp, and max timestamp (-3).

A leader just elected whose high watermark is still below its epoch's start answers
"latest" (and a lookup that lands past the HW) with OFFSET_NOT_AVAILABLE (KIP-207;
``Partition.fetch_offset_for_timestamp``): the client retries rather than take an
offset that the HW will pass again.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, refused
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest
from strom.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from strom.storage.errors import StorageError

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = ListOffsetsRequest
VERSIONS = range(1, 10)

LEADER_EPOCH_FROM = 4
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
# The special timestamps and the first version allowed to ask for them; older requests
# get UNSUPPORTED_VERSION for that partition, as from Kafka's ReplicaManager.
LATEST_TIERED = -5
SPECIAL_TIMESTAMP_FROM = {-3: 7, -4: 8, -5: 9}  # max timestamp, earliest local, latest tiered


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, ListOffsetsRequest)
    committed = body.isolation_level == 1
    with_epoch = request.api_version >= LEADER_EPOCH_FROM
    hidden = refused(broker.authorizer, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in body.topics))
    return ListOffsetsResponse(
        topics=tuple(
            ListOffsetsTopicResponse(
                t.name,
                tuple(_without_epoch(_offset(broker, t.name, p, committed, request.api_version, body.replica_id),
                                     with_epoch)
                      for p in t.partitions) if t.name not in hidden else tuple(
                    ListOffsetsPartitionResponse(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for p in t.partitions),
            )
            for t in body.topics
        )
    )


def _without_epoch(response: ListOffsetsPartitionResponse, keep: bool) -> ListOffsetsPartitionResponse:
    """LeaderEpoch arrived in v4 and is not ignorable: older answers must not carry one."""
    return response if keep else dataclasses.replace(response, leader_epoch=-1)


def _offset(broker: Broker, topic: str, request: ListOffsetsPartition, committed: bool,
            version: int, replica_id: int) -> ListOffsetsPartitionResponse:
    index = request.partition_index
    # Only the debugging replica may ask a follower (Kafka's fetchOnlyFromLeader).
    require_leader = replica_id != DEBUGGING_REPLICA_ID
    if version < SPECIAL_TIMESTAMP_FROM.get(request.timestamp, 0):
        return ListOffsetsPartitionResponse(index, ErrorCode.UNSUPPORTED_VERSION, timestamp=-1, offset=-1,
                                            leader_epoch=-1)
    if request.timestamp == LATEST_TIERED:  # nothing is tiered: Kafka answers "none"
        try:
            broker.replica_manager.partition_or_error(topic, index, request.current_leader_epoch,
                                                      require_leader=require_leader)
        except StorageError as exc:
            return ListOffsetsPartitionResponse(index, exc.error_code)
        return ListOffsetsPartitionResponse(index, 0, timestamp=-1, offset=-1, leader_epoch=-1)
    try:
        partition = broker.replica_manager.partition_or_error(topic, index, request.current_leader_epoch,
                                                              require_leader=require_leader)
        # KIP-207's OFFSET_NOT_AVAILABLE is for clients only, as Kafka's isolation level is.
        found = partition.fetch_offset_for_timestamp(request.timestamp, committed,
                                                     client=replica_id == CONSUMER_REPLICA_ID)
    except StorageError as exc:
        return ListOffsetsPartitionResponse(index, exc.error_code)
    if found is None:
        return ListOffsetsPartitionResponse(index, 0, timestamp=-1, offset=-1, leader_epoch=-1)
    return ListOffsetsPartitionResponse(index, 0, timestamp=found.timestamp, offset=found.offset,
                                        leader_epoch=partition.leader_epoch)
