"""ListOffsets (2): earliest (-2), latest (-1), by timestamp, and max timestamp (-3)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest
from strom.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from strom.storage.log import Log
from strom.storage.time_index import TimestampOffset

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

API_KEY = 2
VERSIONS = range(1, 10)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
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
    log = broker.log_manager.get_log(topic, index)
    if log is None:
        return ListOffsetsPartitionResponse(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    fenced = broker.replica_manager.check_leader_epoch(request.current_leader_epoch)
    if fenced:
        return ListOffsetsPartitionResponse(index, fenced)
    epoch = broker.replica_manager.leader_epoch
    if request.timestamp == EARLIEST:
        return ListOffsetsPartitionResponse(index, 0, timestamp=-1, offset=log.log_start_offset, leader_epoch=epoch)
    if request.timestamp == LATEST:
        offset = log.last_stable_offset if committed else log.high_watermark
        return ListOffsetsPartitionResponse(index, 0, timestamp=-1, offset=offset, leader_epoch=epoch)
    if request.timestamp == MAX_TIMESTAMP:
        found = _max_timestamp(log)
    elif request.timestamp >= 0:
        found = log.offset_for_timestamp(request.timestamp)
    else:
        return ListOffsetsPartitionResponse(index, ErrorCode.INVALID_REQUEST)
    if found is None:
        return ListOffsetsPartitionResponse(index, 0, timestamp=-1, offset=-1, leader_epoch=-1)
    return ListOffsetsPartitionResponse(index, 0, timestamp=found.timestamp, offset=found.offset, leader_epoch=epoch)


def _max_timestamp(log: Log) -> TimestampOffset | None:
    """KIP-734: the offset of the (last batch holding the) largest timestamp below the HW."""
    best: TimestampOffset | None = None
    for segment in log.segments:
        offset = segment.offset_of_max_timestamp
        if segment.max_timestamp < 0 or not log.log_start_offset <= offset < log.high_watermark:
            continue
        if best is None or segment.max_timestamp > best.timestamp:
            best = TimestampOffset(segment.max_timestamp, offset)
    return best
