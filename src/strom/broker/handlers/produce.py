"""Produce (0): append each partition's batches as sent; acks=0 gets no answer at all.

On one node acks=1 and acks=-1 mean the same: the append is in the log (and, with
``flush.messages=1``, on disk) before the answer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.produce_request import PartitionProduceData, ProduceRequest
from strom.protocol.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from strom.storage.errors import StorageError

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

logger = logging.getLogger(__name__)

API_KEY = 0
VERSIONS = range(0, 12)


async def handle(broker: Broker, request: Request) -> Message | None:
    body = request.body
    assert isinstance(body, ProduceRequest)
    if body.acks not in (0, 1, -1):
        error = ErrorCode.INVALID_REQUIRED_ACKS
        responses = tuple(
            TopicProduceResponse(t.name, tuple(PartitionProduceResponse(p.index, error) for p in t.partition_data))
            for t in body.topic_data
        )
    else:
        responses = tuple(
            TopicProduceResponse(t.name, tuple(_append(broker, t.name, p) for p in t.partition_data))
            for t in body.topic_data
        )
    return None if body.acks == 0 else ProduceResponse(responses=responses)


def _append(broker: Broker, topic: str, data: PartitionProduceData) -> PartitionProduceResponse:
    records = data.records
    if not isinstance(records, bytes | bytearray | memoryview):  # null records
        return PartitionProduceResponse(data.index, ErrorCode.CORRUPT_MESSAGE)
    try:  # the log refuses empty sets and missing partitions with Kafka's codes
        result = broker.replica_manager.append(topic, data.index, records)
    except StorageError as exc:
        logger.info("produce to %s-%d refused: %s", topic, data.index, exc)
        return PartitionProduceResponse(data.index, exc.error_code, error_message=str(exc))
    return PartitionProduceResponse(
        index=data.index,
        error_code=0,
        base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time,
        log_start_offset=result.log_start_offset,
    )

