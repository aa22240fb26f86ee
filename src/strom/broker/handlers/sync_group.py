"""SyncGroup (14): the leader hands in the assignment; every member gets its own share.

v5 adds protocol type and name, checked against the group's. Every codec version is served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.sync_group_request import SyncGroupRequest
from strom.protocol.messages.sync_group_response import SyncGroupResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = SyncGroupRequest
VERSIONS = range(0, 6)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, SyncGroupRequest)
    if (authorizer := broker.authorizer) is not None and not allowed(authorizer, AclOperation.READ,
                                                                     ResourceType.GROUP, body.group_id):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    result = await broker.group_coordinator.sync_group(
        body.group_id,
        body.generation_id,
        body.member_id,
        body.group_instance_id if request.api_version >= 3 else None,
        body.protocol_type if request.api_version >= 5 else None,
        body.protocol_name if request.api_version >= 5 else None,
        {a.member_id: bytes(a.assignment) for a in body.assignments},
    )
    return SyncGroupResponse(
        error_code=result.error_code,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
