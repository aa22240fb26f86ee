"""DescribeGroups (15): state, protocol and members of each group.

As Kafka: a group this coordinator does not know is described as ``Dead`` with no
error (the codec's versions end at v5; GROUP_ID_NOT_FOUND is v6's), and one it cannot
answer for (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) with the error and an empty
state; member metadata and assignments are only shown while the group is Stable. With
``include_authorized_operations`` (v3+), each group's operations come from
``authorizer``. Every codec version is served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed, authorized_operations
from strom.broker.group.group_metadata import GroupMetadata, GroupState
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.describe_groups_request import DescribeGroupsRequest
from strom.protocol.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DescribeGroupsRequest
VERSIONS = range(0, 6)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DescribeGroupsRequest)
    described = []
    authorizer = broker.authorizer
    for group_id in body.groups:
        if authorizer is not None and not allowed(authorizer, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(DescribedGroup(ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id))  # Kafka's groupError
            continue
        operations = authorized_operations(ResourceType.GROUP, group_id, authorizer=authorizer,
                                           requested=body.include_authorized_operations)
        error, group = broker.group_coordinator.describe_group(group_id)
        if error:  # not coordinated here (yet): Kafka's EmptyGroup, no state at all
            described.append(DescribedGroup(error, group_id, "", "", "", (), operations))
        elif group is None:
            described.append(DescribedGroup(error, group_id, GroupState.DEAD.value, "", "", (), operations))
        else:
            described.append(_describe(group, operations))
    return DescribeGroupsResponse(groups=tuple(described))


def _describe(group: GroupMetadata, operations: int) -> DescribedGroup:
    stable = group.is_in(GroupState.STABLE) and group.protocol_name is not None
    protocol = group.protocol_name if stable and group.protocol_name is not None else ""
    members = tuple(
        DescribedGroupMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=m.metadata(protocol) if stable else b"",
            member_assignment=m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return DescribedGroup(
        error_code=0,
        group_id=group.group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=protocol,
        members=members,
        authorized_operations=operations,
    )
