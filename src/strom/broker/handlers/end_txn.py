"""EndTxn (26): commit or abort a producer's transaction.

Answered once PrepareCommit/PrepareAbort is durable in ``__transaction_state``; the
markers and Complete* follow in the background (the coordinator's marker channel).
Retries answer as Kafka's coordinator does (NONE after Complete* of the same outcome,
CONCURRENT_TRANSACTIONS while its Prepare* is being completed, INVALID_TXN_STATE for the
other outcome or an Empty transaction). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
before v2. v5 (TV2: an epoch bump per transaction) is not served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.end_txn_request import EndTxnRequest
from strom.protocol.messages.end_txn_response import EndTxnResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = EndTxnRequest
VERSIONS = range(0, 5)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, EndTxnRequest)
    if (authorizer := broker.authorizer) is not None and not allowed(
            authorizer, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    error = await broker.transaction_coordinator.end_transaction(
        body.transactional_id, body.producer_id, body.producer_epoch, committed=body.committed)
    if error == ErrorCode.PRODUCER_FENCED and request.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return EndTxnResponse(error_code=error)
