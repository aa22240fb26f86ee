"""ListGroups (16): every group this coordinator knows (in a cluster: of the offsets
partitions this broker leads).

v4 filters by state (case-insensitive, as Kafka), v5 by type: every group here is a
``classic`` one, so a types filter without ``classic`` lists none. Every codec
version is served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import CLUSTER_NAME, AclOperation, ResourceType, allowed
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.list_groups_request import ListGroupsRequest
from strom.protocol.messages.list_groups_response import ListedGroup, ListGroupsResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = ListGroupsRequest
VERSIONS = range(0, 6)
GROUP_TYPE = "classic"


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, ListGroupsRequest)
    coordinator = broker.group_coordinator
    # As Kafka: while a partition loads, the groups known so far, with the error.
    error = ErrorCode.NONE if coordinator.manager.loaded else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    states = {state.lower() for state in body.states_filter} if request.api_version >= 4 else set()
    types = {kind.lower() for kind in body.types_filter} if request.api_version >= 5 else set()
    if types and GROUP_TYPE not in types:
        return ListGroupsResponse(error_code=error)
    listed = coordinator.list_groups(states)
    # Describe on the cluster lists every group, else the groups the principal may Describe; never an error.
    if (authorizer := broker.authorizer) is not None and not allowed(authorizer, AclOperation.DESCRIBE,
                                                                     ResourceType.CLUSTER, CLUSTER_NAME):
        listed = [group for group in listed
                  if allowed(authorizer, AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id)]
    groups = tuple(
        ListedGroup(group.group_id, group.protocol_type or "", group.state.value, GROUP_TYPE)
        for group in listed
    )
    return ListGroupsResponse(error_code=error, groups=groups)
