"""AddPartitionsToTxn (24): a transactional producer names the partitions it will write to.

Only the clients' versions (0-3; v4+ is Kafka's broker-to-coordinator verification,
KIP-890). All or nothing, as Kafka's ``handleAddPartitionsToTxnRequest``: if any
partition is unknown, those answer UNKNOWN_TOPIC_OR_PARTITION and every other
OPERATION_NOT_ATTEMPTED, and nothing is added; otherwise every partition answers the
coordinator's one error (PRODUCER_FENCED as INVALID_PRODUCER_EPOCH before v2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from strom.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = AddPartitionsToTxnRequest
VERSIONS = range(0, 4)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, AddPartitionsToTxnRequest)
    wanted = [(topic.name, index) for topic in body.v3_and_below_topics for index in topic.partitions]
    unknown = {tp for tp in wanted if not broker.metadata.contains_partition(*tp)}
    if unknown:
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for tp in wanted}
        return _response(errors)
    error = await broker.transaction_coordinator.add_partitions(
        body.v3_and_below_transactional_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
        frozenset(wanted))
    if error == ErrorCode.PRODUCER_FENCED and request.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return _response(dict.fromkeys(wanted, error))


def _response(errors: dict[TopicPartition, ErrorCode]) -> AddPartitionsToTxnResponse:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(AddPartitionsToTxnPartitionResult(index, error))
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=tuple(
        AddPartitionsToTxnTopicResult(topic, tuple(results)) for topic, results in by_topic.items()))
