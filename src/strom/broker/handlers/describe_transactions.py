"""DescribeTransactions (65): the coordinator's view of transactional ids (KIP-664).

Per id, from the coordinator's cache (Kafka's ``handleDescribeTransactions``): the state
by Kafka's name ("Ongoing", "CompleteCommit" ...), the timeout, the start time (as
the metadata holds it: -1 before the first transaction, kept after it ends, as Kafka),
the producer id and epoch, and the transaction's partitions by topic. For Prepare*
these are all the transaction's partitions: the marker channel, not the metadata,
tracks which still lack a marker. An id led elsewhere is NOT_COORDINATOR, one loading
COORDINATOR_LOAD_IN_PROGRESS, an unknown (or expiring) one TRANSACTIONAL_ID_NOT_FOUND,
an empty one INVALID_REQUEST; an error's entry has the schema's defaults otherwise.
Topics and partitions are sorted (Kafka's come in its hash sets' order). The DESCRIBE
authorization on the id and its topics comes with the security work. v0 only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.broker.transaction.transaction_metadata import TransactionMetadata
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from strom.protocol.messages.describe_transactions_response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DescribeTransactionsRequest
VERSIONS = range(0, 1)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DescribeTransactionsRequest)
    return DescribeTransactionsResponse(transaction_states=tuple(
        _describe(broker, transactional_id) for transactional_id in body.transactional_ids))


def _describe(broker: Broker, transactional_id: str) -> TransactionState:
    if (authorizer := broker.authorizer) is not None and not allowed(
            authorizer, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return TransactionState(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                transactional_id=transactional_id)
    found = broker.transaction_coordinator.describe_transaction(transactional_id)
    if not isinstance(found, TransactionMetadata):
        return TransactionState(error_code=found, transactional_id=transactional_id)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(found.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return TransactionState(
        transactional_id=transactional_id,
        transaction_state=found.state.display_name,
        transaction_timeout_ms=found.txn_timeout_ms,
        transaction_start_time_ms=found.txn_start_timestamp,
        producer_id=found.producer_id,
        producer_epoch=found.producer_epoch,
        topics=tuple(TopicData(topic, tuple(partitions)) for topic, partitions in by_topic.items()),
    )
