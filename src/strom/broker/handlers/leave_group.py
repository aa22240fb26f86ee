"""LeaveGroup (13): members leave at once instead of waiting for their sessions to end.

v0-v2 name one member; v3+ a batch of ``(member_id, group_instance_id)`` with an error
each (KIP-345). Every codec version is served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.leave_group_request import LeaveGroupRequest
from strom.protocol.messages.leave_group_response import LeaveGroupResponse, MemberResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = LeaveGroupRequest
VERSIONS = range(0, 6)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, LeaveGroupRequest)
    if (authorizer := broker.authorizer) is not None and not allowed(authorizer, AclOperation.READ,
                                                                     ResourceType.GROUP, body.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = broker.group_coordinator
    if request.api_version < 3:
        error, errors = coordinator.leave_group(body.group_id, [(body.member_id, None)])
        return LeaveGroupResponse(error_code=error or (errors[0] if errors else 0))
    leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    error, errors = coordinator.leave_group(body.group_id, leaving)
    members = tuple(
        MemberResponse(member_id, instance_id, member_error)
        for (member_id, instance_id), member_error in zip(leaving, errors, strict=False)
    )
    return LeaveGroupResponse(error_code=error, members=members)
