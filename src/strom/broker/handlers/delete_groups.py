"""DeleteGroups (42): remove Empty groups and their committed offsets (tombstones).

Per group: GROUP_ID_NOT_FOUND if unknown, NON_EMPTY_GROUP while it has members. Every
codec version is served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.delete_groups_request import DeleteGroupsRequest
from strom.protocol.messages.delete_groups_response import (
    DeletableGroupResult,
    DeleteGroupsResponse,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DeleteGroupsRequest
VERSIONS = range(0, 3)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DeleteGroupsRequest)
    groups, refused = list(body.groups_names), {}
    if (authorizer := broker.authorizer) is not None:  # Delete on each group, as Kafka
        refused = {group_id: ErrorCode.GROUP_AUTHORIZATION_FAILED for group_id in groups
                   if not allowed(authorizer, AclOperation.DELETE, ResourceType.GROUP, group_id)}
        groups = [group_id for group_id in groups if group_id not in refused]
    results = {**refused, **broker.group_coordinator.delete_groups(groups)}
    return DeleteGroupsResponse(
        results=tuple(DeletableGroupResult(group_id, error) for group_id, error in results.items())
    )
