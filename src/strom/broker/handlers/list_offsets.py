"""ListOffsets (2): earliest (-2), latest (-1), by timestamp, and max timestamp (-3)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

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


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, ListOffsetsRequest)
    committed = body.isolation_level == 1
    with_epoch = request.api_version >= LEADER_EPOCH_FROM
    return ListOffsetsResponse(
        topics=tuple(
            ListOffsetsTopicResponse(
                t.name,
                tuple(_without_epoch(_offset(broker, t.name, p, committed), with_epoch) for p in t.partitions),
            )
            for t in body.topics
        )
    )


def _without_epoch(response: ListOffsetsPartitionResponse, keep: bool) -> ListOffsetsPartitionResponse:
    """LeaderEpoch arrived in v4 and is not ignorable: older answers must not carry one."""
    return response if keep else dataclasses.replace(response, leader_epoch=-1)


def _offset(broker: Broker, topic: str, request: ListOffsetsPartition, committed: bool) -> ListOffsetsPartitionResponse:
    index = request.partition_index
    try:
        partition = broker.replica_manager.partition_or_error(topic, index, request.current_leader_epoch)
        found = partition.fetch_offset_for_timestamp(request.timestamp, committed)
    except StorageError as exc:
        return ListOffsetsPartitionResponse(index, exc.error_code)
    if found is None:
        return ListOffsetsPartitionResponse(index, 0, timestamp=-1, offset=-1, leader_epoch=-1)
    return ListOffsetsPartitionResponse(index, 0, timestamp=found.timestamp, offset=found.offset,
                                        leader_epoch=partition.leader_epoch)
