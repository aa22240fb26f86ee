"""JoinGroup (11): join or rejoin a classic group; the answer waits for the rebalance.

v4+ members joining without an id get MEMBER_ID_REQUIRED and a fresh id to rejoin with
(KIP-394); v5+ carry ``group.instance.id`` (static membership, KIP-345); v9 lets a
rejoining static leader skip the assignment (KIP-814). Every codec version is served.
The member's client host comes from the connection (``request_context``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker import request_context
from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.join_group_request import JoinGroupRequest
from strom.protocol.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = JoinGroupRequest
VERSIONS = range(0, 10)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, JoinGroupRequest)
    version = request.api_version
    if (authorizer := broker.authorizer) is not None and not allowed(authorizer, AclOperation.READ,
                                                                     ResourceType.GROUP, body.group_id):
        return JoinGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, member_id=body.member_id,
                                 protocol_name=None if version >= 7 else "")
    result = await broker.group_coordinator.join_group(
        body.group_id,
        body.member_id,
        body.group_instance_id if version >= 5 else None,
        request.header.client_id or "",
        request_context.client_host.get(),
        body.rebalance_timeout_ms if version >= 1 else -1,
        body.session_timeout_ms,
        body.protocol_type,
        [(p.name, bytes(p.metadata)) for p in body.protocols],
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
    )
    return JoinGroupResponse(
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if version >= 7 or result.protocol_name is not None else "",
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(JoinGroupResponseMember(m, i, meta) for m, i, meta in result.members),
    )
