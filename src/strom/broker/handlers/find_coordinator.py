"""FindCoordinator (10): this node coordinates every group; transactions are not built.

v0-v3 ask for one key, v4+ for a batch (``coordinator_keys``). The first group lookup
creates ``__consumer_offsets`` if it does not exist yet. Key type 1 (transaction) is
answered COORDINATOR_NOT_AVAILABLE, and any other type (2 = share group, v6)
INVALID_REQUEST, each with a log line.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from strom.broker.metadata_cache import TopicError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

logger = logging.getLogger(__name__)

REQUEST = FindCoordinatorRequest
VERSIONS = range(0, 7)
GROUP, TRANSACTION = 0, 1


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, FindCoordinatorRequest)
    if request.api_version >= 4:
        return FindCoordinatorResponse(coordinators=tuple(_find(broker, key, body.key_type) for key in body.coordinator_keys))
    found = _find(broker, body.key, body.key_type)
    return FindCoordinatorResponse(
        error_code=found.error_code,
        # Kafka 3.9 says "NONE" (Errors.NONE.message()) here, and "" in a v4+ coordinator.
        error_message="NONE" if found.error_code == 0 else found.error_message,
        node_id=found.node_id,
        host=found.host,
        port=found.port,
    )


def _find(broker: Broker, key: str, key_type: int) -> Coordinator:
    if key_type == TRANSACTION:
        logger.info("FindCoordinator for transactional id %r: transactions are not supported", key)
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, "transactions are not supported")
    if key_type != GROUP:
        logger.info("FindCoordinator with key type %d for %r: not supported", key_type, key)
        return _error(key, ErrorCode.INVALID_REQUEST, f"unsupported key type {key_type}")
    try:
        broker.group_coordinator.ensure_offsets_topic()
    except TopicError as exc:
        logger.error("cannot create the offsets topic: %s", exc)
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc))
    endpoint = broker.advertised
    return Coordinator(key=key, node_id=broker.node_id, host=endpoint.host, port=endpoint.port, error_code=0, error_message="")


def _error(key: str, error: ErrorCode, message: str) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error, error_message=message)
