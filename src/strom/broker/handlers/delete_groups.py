"""DeleteGroups (42): remove Empty groups and their committed offsets (tombstones).

Per group: GROUP_ID_NOT_FOUND if unknown, NON_EMPTY_GROUP while it has members. Every
codec version is served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    results = broker.group_coordinator.delete_groups(list(body.groups_names))
    return DeleteGroupsResponse(
        results=tuple(DeletableGroupResult(group_id, error) for group_id, error in results.items())
    )
