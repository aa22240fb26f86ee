"""DescribeProducers (61): the producers a partition's log knows (KIP-664).

Kafka's ``handleDescribeProducersRequest``: per topic, an illegal name is
INVALID_TOPIC_EXCEPTION and a topic the cluster does not know UNKNOWN_TOPIC_OR_PARTITION
(with the error's message, as Kafka's ``ApiError``); per partition, one not hosted here
is NOT_LEADER_OR_FOLLOWER if the cluster has it, else UNKNOWN_TOPIC_OR_PARTITION. A
hosted replica answers, leader or follower, as Kafka's (``Admin.describeProducers``
asks the leader unless told a broker). Each producer: id, epoch (int32 on the wire),
last sequence, last batch timestamp, the coordinator epoch of its last marker and the
first offset of its open transaction (-1: none), what ``Admin.abortTransaction`` needs
to abort a hanging transaction with WriteTxnMarkers. The READ authorization comes with
the security work. v0 only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.broker.metadata_cache import TopicError, validate_topic_name
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from strom.protocol.messages.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from strom.storage.errors import StorageError

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DescribeProducersRequest
VERSIONS = range(0, 1)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DescribeProducersRequest)
    return DescribeProducersResponse(topics=tuple(_describe_topic(broker, topic) for topic in body.topics))


def _describe_topic(broker: Broker, topic: TopicRequest) -> TopicResponse:
    error: tuple[ErrorCode, str] | None = None
    try:
        validate_topic_name(topic.name)
    except TopicError as exc:
        error = (exc.error_code, str(exc))
    if (authorizer := broker.authorizer) is not None and not allowed(authorizer, AclOperation.READ,
                                                                     ResourceType.TOPIC, topic.name):
        error = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED.message)
    if error is None and broker.metadata.get(topic.name) is None:
        error = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message)
    if error is not None:
        code, message = error
        return TopicResponse(topic.name, tuple(
            PartitionResponse(index, code, message) for index in topic.partition_indexes))
    return TopicResponse(topic.name, tuple(_describe_partition(broker, topic.name, index)
                                           for index in topic.partition_indexes))


def _describe_partition(broker: Broker, topic: str, index: int) -> PartitionResponse:
    try:
        partition = broker.replica_manager.partition_or_error(topic, index, require_leader=False)
    except StorageError as exc:
        return PartitionResponse(index, exc.error_code)
    return PartitionResponse(index, active_producers=tuple(
        ProducerState(entry.producer_id, entry.producer_epoch, entry.last_sequence, entry.last_timestamp,
                      entry.coordinator_epoch, entry.current_txn_first_offset)
        for entry in partition.log.producer_state.active_producers()))
