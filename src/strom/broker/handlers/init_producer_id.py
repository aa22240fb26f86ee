"""InitProducerId (22): a producer id and epoch, for an idempotent or a transactional producer.

Without a transactional id (an idempotent producer) the id comes from the broker's
``ProducerIdSource`` (a file on one node, ZooKeeper's blocks in a cluster); while none
can be had the answer is COORDINATOR_LOAD_IN_PROGRESS, which producers retry. With one,
the transaction coordinator answers (strom.broker.transaction): an epoch bump, a fence
of an open transaction (CONCURRENT_TRANSACTIONS, retried), a KIP-360 bump with the
producer's current id and epoch (v3+). As Kafka's ``handleInitProducerIdRequest``,
giving only one of producer id and epoch is INVALID_REQUEST, and PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v4.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from strom.broker.authorizer import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    allowed,
    allowed_on_some,
)
from strom.broker.producer_ids import ProducerIdsUnavailableError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.messages.init_producer_id_response import InitProducerIdResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

logger = logging.getLogger(__name__)

REQUEST = InitProducerIdRequest
VERSIONS = range(0, 6)
MAX_EPOCH = 32767


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, InitProducerIdRequest)
    if (authorizer := broker.authorizer) is not None:  # Write on the id; idempotent: IdempotentWrite or Write on a topic
        if body.transactional_id is not None:
            if not allowed(authorizer, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
                return InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                              producer_id=-1, producer_epoch=-1)
        elif not (allowed(authorizer, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
                  or allowed_on_some(authorizer, AclOperation.WRITE, ResourceType.TOPIC)):
            return InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                          producer_id=-1, producer_epoch=-1)
    if body.transactional_id is not None:
        return await _transactional(broker, body, request.api_version)
    if body.producer_id >= 0 and 0 <= body.producer_epoch < MAX_EPOCH - 1:
        # KIP-360: an idempotent producer bumps its epoch after an error, keeping its id.
        return InitProducerIdResponse(error_code=0, producer_id=body.producer_id, producer_epoch=body.producer_epoch + 1)
    try:
        producer_id = await broker.producer_ids.generate()
    except ProducerIdsUnavailableError as exc:
        logger.warning("InitProducerId: no producer id to give: %s", exc)
        return InitProducerIdResponse(error_code=exc.error_code)
    return InitProducerIdResponse(error_code=0, producer_id=producer_id, producer_epoch=0)


async def _transactional(broker: Broker, body: InitProducerIdRequest, version: int) -> InitProducerIdResponse:
    has_id, has_epoch = body.producer_id != -1, body.producer_epoch != -1
    if has_id != has_epoch:
        return InitProducerIdResponse(error_code=ErrorCode.INVALID_REQUEST)
    expected = (body.producer_id, body.producer_epoch) if has_id else None
    assert body.transactional_id is not None
    result = await broker.transaction_coordinator.init_producer_id(
        body.transactional_id, body.transaction_timeout_ms, expected)
    error = result.error
    if error == ErrorCode.PRODUCER_FENCED and version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return InitProducerIdResponse(error_code=error, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)
