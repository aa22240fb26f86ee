"""ListTransactions (66): the transactional ids this broker coordinates (KIP-664).

From every ``__transaction_state`` partition loaded here (Kafka's
``listTransactionStates``): each id's producer id and state name, filtered by state
names, producer ids and (v1, KIP-994) ``DurationFilter``, only transactions started
more than that many ms ago; every filter given must match. State names Kafka does
not know come back in ``UnknownStateFilters`` (sorted; Kafka's are in its set's
order); Dead ids are never listed; while any partition loads the answer is
COORDINATOR_LOAD_IN_PROGRESS with nothing listed. The DESCRIBE authorization per id
comes with the security work. v0-v1, as Kafka 3.9.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.protocol.message import Message
from strom.protocol.messages.list_transactions_request import ListTransactionsRequest
from strom.protocol.messages.list_transactions_response import (
    ListTransactionsResponse,
    TransactionState,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = ListTransactionsRequest
VERSIONS = range(0, 2)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, ListTransactionsRequest)
    listing = broker.transaction_coordinator.list_transactions(
        frozenset(body.producer_id_filters), frozenset(body.state_filters), body.duration_filter)
    return ListTransactionsResponse(
        error_code=listing.error,
        unknown_state_filters=listing.unknown_state_filters,
        transaction_states=tuple(
            TransactionState(metadata.transactional_id, metadata.producer_id, metadata.state.display_name)
            for metadata in listing.transactions  # ACLs: those the principal may Describe, never an error
            if broker.authorizer is None or allowed(broker.authorizer, AclOperation.DESCRIBE,
                                                    ResourceType.TRANSACTIONAL_ID, metadata.transactional_id)),
    )
