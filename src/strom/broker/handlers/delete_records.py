"""DeleteRecords (21): move partitions' log start offsets up (offset -1: to the high watermark).

The records below the new low watermark become unreadable at once; whole segments
below it go with the next retention run, as in Kafka. Offsets past the high watermark
or negative (other than -1) get OFFSET_OUT_OF_RANGE; an offset at or below the current
log start offset changes nothing and answers it. A topic whose cleanup.policy lacks
``delete`` refuses with POLICY_VIOLATION, as Kafka's ReplicaManager does.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, refused
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
)
from strom.protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from strom.storage.errors import StorageError

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

logger = logging.getLogger(__name__)

REQUEST = DeleteRecordsRequest
VERSIONS = range(0, 3)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DeleteRecordsRequest)
    hidden = refused(broker.authorizer, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in body.topics))
    return DeleteRecordsResponse(
        topics=tuple(
            DeleteRecordsTopicResult(t.name, tuple(
                _delete(broker, t.name, p) if t.name not in hidden
                else _failed(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions))
            for t in body.topics
        )
    )


def _delete(broker: Broker, topic: str, request: DeleteRecordsPartition) -> DeleteRecordsPartitionResult:
    index = request.partition_index
    try:
        low_watermark = broker.replica_manager.delete_records(topic, index, request.offset)
    except StorageError as exc:
        logger.info("DeleteRecords on %s-%d up to %d refused: %s", topic, index, request.offset, exc)
        return _failed(index, exc.error_code)
    return DeleteRecordsPartitionResult(index, low_watermark, 0)


def _failed(index: int, error: ErrorCode) -> DeleteRecordsPartitionResult:
    return DeleteRecordsPartitionResult(index, -1, error)
