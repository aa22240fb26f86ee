"""Fetch (1): file regions of each partition's log, long-polling for ``min_bytes``.

Records larger than a few KiB leave as ``SendfileRegion``s that the connection writes
with ``os.sendfile`` straight from the segment file. Fetch sessions (KIP-227) are
declined for now: every answer has session id 0, which tells the client to keep
sending full fetch requests — a broker is allowed to do this, and clients handle it.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from strom.broker.replica_manager import PartitionRead
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from strom.protocol.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from strom.storage.log import FetchIsolation

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

API_KEY = 1
VERSIONS = range(4, 17)
TOPIC_IDS_FROM = 13  # Fetch v13 addresses topics by id


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, FetchRequest)
    by_id = request.api_version >= TOPIC_IDS_FROM
    isolation = FetchIsolation.TXN_COMMITTED if body.isolation_level == 1 else FetchIsolation.HIGH_WATERMARK
    names = [_topic_name(broker, topic, by_id) for topic in body.topics]
    deadline = time.monotonic() + max(body.max_wait_ms, 0) / 1000
    while True:
        reads, total = _read_all(broker, body, names, isolation)
        errors = any(r.error_code for topic in reads for r in topic)
        remaining = deadline - time.monotonic()
        if total >= body.min_bytes or errors or remaining <= 0:
            break
        wanted = [(name, p.partition) for name, topic in zip(names, body.topics, strict=True) if name
                  for p in topic.partitions]
        await broker.replica_manager.wait_for_data(wanted, remaining)
    responses = tuple(
        FetchableTopicResponse(
            topic="" if by_id else (name or topic.topic),
            topic_id=topic.topic_id if by_id else uuid.UUID(int=0),
            partitions=tuple(_partition(p, r) for p, r in zip(topic.partitions, topic_reads, strict=True)),
        )
        for name, topic, topic_reads in zip(names, body.topics, reads, strict=True)
    )
    return FetchResponse(error_code=0, session_id=0, responses=responses)


def _topic_name(broker: Broker, topic: FetchTopic, by_id: bool) -> str | None:
    if not by_id:
        return topic.topic
    found = broker.metadata.by_id(topic.topic_id)
    return None if found is None else found.name


def _read_all(
    broker: Broker, body: FetchRequest, names: list[str | None], isolation: FetchIsolation
) -> tuple[list[list[PartitionRead]], int]:
    """One pass over the requested partitions, within the response's ``max_bytes``."""
    budget = body.max_bytes
    total = 0
    reads: list[list[PartitionRead]] = []
    for name, topic in zip(names, body.topics, strict=True):
        topic_reads = []
        for partition in topic.partitions:
            read = _read_one(broker, name, partition, isolation, min(partition.partition_max_bytes, budget))
            # KIP-74: the first non-empty partition may exceed the budget by one batch.
            budget = max(0, budget - read.size)
            total += read.size
            topic_reads.append(read)
        reads.append(topic_reads)
    return reads, total


def _read_one(
    broker: Broker, name: str | None, partition: FetchPartition, isolation: FetchIsolation, max_bytes: int
) -> PartitionRead:
    if name is None:
        return PartitionRead(ErrorCode.UNKNOWN_TOPIC_ID)
    epoch = broker.replica_manager.leader_epoch
    if partition.current_leader_epoch > epoch:
        return PartitionRead(ErrorCode.UNKNOWN_LEADER_EPOCH)
    if 0 <= partition.current_leader_epoch < epoch:
        return PartitionRead(ErrorCode.FENCED_LEADER_EPOCH)
    return broker.replica_manager.read(name, partition.partition, partition.fetch_offset, max_bytes, isolation)


def _partition(request: FetchPartition, read: PartitionRead) -> PartitionData:
    result = read.result
    if result is None:
        return PartitionData(partition_index=request.partition, error_code=read.error_code, high_watermark=-1, records=b"")
    return PartitionData(
        partition_index=request.partition,
        error_code=read.error_code,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        aborted_transactions=(),
        records=read.records if read.records is not None else b"",
    )
