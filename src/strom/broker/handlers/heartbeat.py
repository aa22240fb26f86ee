"""Heartbeat (12): keeps a member's session; REBALANCE_IN_PROGRESS tells it to rejoin.

Every codec version is served (v3+ carry ``group.instance.id``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    instance_id = body.group_instance_id if request.api_version >= 3 else None
    error = broker.group_coordinator.heartbeat(body.group_id, body.member_id, instance_id, body.generation_id)
    return HeartbeatResponse(error_code=error)
