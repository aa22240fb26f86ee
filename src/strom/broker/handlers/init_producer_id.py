"""InitProducerId (22): a new producer id for an idempotent producer, or a bumped epoch.

The id comes from the broker's ``ProducerIdSource`` (a file on one node, ZooKeeper's
blocks in a cluster); while none can be had the answer is COORDINATOR_LOAD_IN_PROGRESS,
which producers retry.

Transactional producers are not served yet (no transaction coordinator): they get
UNSUPPORTED_VERSION with a log line, a clear and non-retriable refusal.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

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
    if body.transactional_id is not None:
        logger.warning("refusing transactional producer %r: transactions are not supported yet", body.transactional_id)
        return InitProducerIdResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    if body.producer_id >= 0 and 0 <= body.producer_epoch < MAX_EPOCH - 1:
        # KIP-360: an idempotent producer bumps its epoch after an error, keeping its id.
        return InitProducerIdResponse(error_code=0, producer_id=body.producer_id, producer_epoch=body.producer_epoch + 1)
    try:
        producer_id = await broker.producer_ids.generate()
    except ProducerIdsUnavailableError as exc:
        logger.warning("InitProducerId: no producer id to give: %s", exc)
        return InitProducerIdResponse(error_code=exc.error_code)
    return InitProducerIdResponse(error_code=0, producer_id=producer_id, producer_epoch=0)
