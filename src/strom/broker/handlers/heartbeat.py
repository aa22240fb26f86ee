"""Heartbeat (12): keeps a member's session; REBALANCE_IN_PROGRESS tells it to rejoin.

Every codec version is served (v3+ carry ``group.instance.id``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.heartbeat_request import HeartbeatRequest
from strom.protocol.messages.heartbeat_response import HeartbeatResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = HeartbeatRequest
VERSIONS = range(0, 5)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, HeartbeatRequest)
    if (authorizer := broker.authorizer) is not None and not allowed(authorizer, AclOperation.READ,
                                                                     ResourceType.GROUP, body.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    instance_id = body.group_instance_id if request.api_version >= 3 else None
    error = broker.group_coordinator.heartbeat(body.group_id, body.member_id, instance_id, body.generation_id)
    return HeartbeatResponse(error_code=error)
