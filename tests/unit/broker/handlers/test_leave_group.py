"""LeaveGroup (13): one member (v0-v2) or a batch (v3+) leaves at once."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_groups_request import DescribeGroupsRequest
from strom.protocol.messages.heartbeat_request import HeartbeatRequest
from strom.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.groups import stable_member


async def _state(h: BrokerHarness, group: str) -> str:
    response = await h.request(DescribeGroupsRequest(groups=(group,)), version=5)
    state: str = response.groups[0].group_state
    return state


async def _is_member(h: BrokerHarness, group: str, member: str, generation: int) -> bool:
    """Whether a heartbeat still knows ``member`` (UNKNOWN_MEMBER_ID once it has left)."""
    response = await h.request(HeartbeatRequest(group_id=group, generation_id=generation, member_id=member), version=4)
    return bool(response.error_code != ErrorCode.UNKNOWN_MEMBER_ID)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_one_member_leaves(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        member, generation = await stable_member(h, "g")
        response = await h.request(LeaveGroupRequest(group_id="g", member_id=member), version=version)
        assert response.error_code == ErrorCode.NONE
        assert not await _is_member(h, "g", member, generation)

    broker.run(scenario)


@pytest.mark.parametrize("version", [3, 4, 5])
def test_a_batch_of_members_leaves_with_an_answer_each(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        member, generation = await stable_member(h, "g")
        request = LeaveGroupRequest(group_id="g", members=(MemberIdentity(member), MemberIdentity("stranger")))
        response = await h.request(request, version=version)
        assert response.error_code == ErrorCode.NONE
        assert [(m.member_id, m.error_code) for m in response.members] == [
            (member, ErrorCode.NONE), ("stranger", ErrorCode.UNKNOWN_MEMBER_ID),
        ]
        assert not await _is_member(h, "g", member, generation)

    broker.run(scenario)


def test_a_static_member_leaves_by_instance_id(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        member, generation = await stable_member(h, "g", instance="worker-1")
        request = LeaveGroupRequest(group_id="g", members=(MemberIdentity("", "worker-1"),))
        response = await h.request(request, version=4)
        assert [m.error_code for m in response.members] == [ErrorCode.NONE]
        assert not await _is_member(h, "g", member, generation)


def test_when_the_last_member_leaves_the_group_is_empty_at_once(broker: BrokerRunner) -> None:
    """Kafka completes the rebalance the leave starts at once (every remaining member, none, has
    joined): the group is Empty in the leave's own answer, not after the rebalance timeout."""

    async def scenario(h: BrokerHarness) -> None:
        member, _ = await stable_member(h, "g")
        await h.request(LeaveGroupRequest(group_id="g", members=(MemberIdentity(member),)), version=4)
        assert await _state(h, "g") == "Empty"

    broker.run(scenario)

    broker.run(scenario)


def test_a_static_member_named_under_another_member_id_is_fenced(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await stable_member(h, "g", instance="worker-1")
        request = LeaveGroupRequest(group_id="g", members=(MemberIdentity("an-old-id", "worker-1"),))
        response = await h.request(request, version=4)
        assert [m.error_code for m in response.members] == [ErrorCode.FENCED_INSTANCE_ID]
        assert await _state(h, "g") == "Stable"

    broker.run(scenario)


def test_before_v3_an_unknown_group_or_member_is_unknown_member(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        absent = await h.request(LeaveGroupRequest(group_id="absent", member_id="m"), version=2)
        assert absent.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        await stable_member(h, "g")
        stranger = await h.request(LeaveGroupRequest(group_id="g", member_id="stranger"), version=2)
        assert stranger.error_code == ErrorCode.UNKNOWN_MEMBER_ID

    broker.run(scenario)


def test_from_v3_an_unknown_group_answers_each_member_unknown(broker: BrokerRunner) -> None:
    """Kafka's GroupCoordinator.handleLeaveGroup: no such group is top-level NONE, every member UNKNOWN_MEMBER_ID."""

    async def scenario(h: BrokerHarness) -> None:
        request = LeaveGroupRequest(group_id="absent", members=(MemberIdentity("a"), MemberIdentity("b")))
        response = await h.request(request, version=3)
        assert response.error_code == ErrorCode.NONE
        assert [(m.member_id, m.error_code) for m in response.members] == [
            ("a", ErrorCode.UNKNOWN_MEMBER_ID), ("b", ErrorCode.UNKNOWN_MEMBER_ID),
        ]

    broker.run(scenario)


def test_an_empty_group_id_is_invalid(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(LeaveGroupRequest(group_id="", members=(MemberIdentity("m"),)), version=4)
        assert response.error_code == ErrorCode.INVALID_GROUP_ID

    broker.run(scenario)
