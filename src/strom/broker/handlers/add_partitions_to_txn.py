"""AddPartitionsToTxn (24): a transactional producer names the partitions it will write to.

Versions 0-3 are the clients': all or nothing, as Kafka's
``handleAddPartitionsToTxnRequest``: if any partition is unknown, those answer
UNKNOWN_TOPIC_OR_PARTITION and every other OPERATION_NOT_ATTEMPTED, and nothing is added;
otherwise every partition answers the coordinator's one error (PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH before v2).

Versions 4-5 are the brokers' (KIP-890 part 1): a partition leader batches several
transactions, each with ``VerifyOnly`` set to ask whether its partitions are in the
producer's ongoing transaction (``TransactionCoordinator.verify_partitions_in_transaction``;
nothing is written) or unset to add them as above. The answer is per transaction in
``ResultsByTransaction`` with a top-level ``ErrorCode`` (NONE; Kafka answers
CLUSTER_AUTHORIZATION_FAILED there without ClusterAction, which comes with ACLs).
v5 only lets the coordinator answer TRANSACTION_ABORTABLE to clients (KIP-890 part 2),
which no client may send: it is served as v4.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import (
    AclOperation,
    ResourceType,
    allowed,
    cluster_action_allowed,
    refused,
)
from strom.broker.metadata_cache import INTERNAL_TOPICS
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTransaction,
)
from strom.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = AddPartitionsToTxnRequest
VERSIONS = range(0, 6)
BROKER_VERSIONS_FROM = 4


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, AddPartitionsToTxnRequest)
    if request.api_version >= BROKER_VERSIONS_FROM:
        if not cluster_action_allowed(broker):  # ACLs: v4+ come from brokers (ClusterAction), and only that
            return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        results = [AddPartitionsToTxnResult(transaction.transactional_id, _topic_results(
            await _answer_transaction(broker, transaction))) for transaction in body.transactions]
        return AddPartitionsToTxnResponse(error_code=ErrorCode.NONE, results_by_transaction=tuple(results))
    wanted = [(topic.name, index) for topic in body.v3_and_below_topics for index in topic.partitions]
    transactional_id = body.v3_and_below_transactional_id
    refusal = None if broker.authorizer is None else _refusal(broker, transactional_id, wanted)
    errors = refusal if refusal is not None else await _add(
        broker, transactional_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch, wanted)
    if request.api_version < 2:
        errors = {tp: ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED else error
                  for tp, error in errors.items()}
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_topic_results(errors))


def _refusal(broker: Broker, transactional_id: str, wanted: list[TopicPartition]
             ) -> dict[TopicPartition, ErrorCode] | None:
    """A client's request (v0-3) needs Write on the transactional id, then Write on each topic
    (internal topics aside); any refused partition fails the whole request, as Kafka: the rest
    OPERATION_NOT_ATTEMPTED (unknown ones UNKNOWN_TOPIC_OR_PARTITION)."""
    authorizer = broker.authorizer
    assert authorizer is not None
    if not allowed(authorizer, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    hidden = refused(authorizer, AclOperation.WRITE, ResourceType.TOPIC,
                     {topic for topic, _ in wanted if topic not in INTERNAL_TOPICS})
    if not hidden:
        return None
    return {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] in hidden else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if not broker.metadata.contains_partition(*tp) else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}


async def _answer_transaction(broker: Broker, transaction: AddPartitionsToTxnTransaction
                              ) -> dict[TopicPartition, ErrorCode]:
    wanted = [(topic.name, index) for topic in transaction.topics for index in topic.partitions]
    if transaction.verify_only:
        return broker.transaction_coordinator.verify_partitions_in_transaction(
            transaction.transactional_id, transaction.producer_id, transaction.producer_epoch, wanted)
    return await _add(broker, transaction.transactional_id, transaction.producer_id, transaction.producer_epoch,
                      wanted)


async def _add(broker: Broker, transactional_id: str, producer_id: int, producer_epoch: int,
               wanted: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    unknown = {tp for tp in wanted if not broker.metadata.contains_partition(*tp)}
    if unknown:
        return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in wanted}
    error = await broker.transaction_coordinator.add_partitions(
        transactional_id, producer_id, producer_epoch, frozenset(wanted))
    return dict.fromkeys(wanted, error)


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> tuple[AddPartitionsToTxnTopicResult, ...]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(AddPartitionsToTxnPartitionResult(index, error))
    return tuple(AddPartitionsToTxnTopicResult(topic, tuple(results)) for topic, results in by_topic.items())
