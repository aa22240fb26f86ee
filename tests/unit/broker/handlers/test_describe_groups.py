"""DescribeGroups (15): state, protocol and members of each group."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_groups_request import DescribeGroupsRequest
from tests.support.broker_harness import CLIENT_HOST, CLIENT_ID, BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.groups import commit, join_new, stable_member

READ, DELETE, DESCRIBE = 3, 6, 8  # AclOperation codes a group supports


@pytest.mark.parametrize("version", [0, 1, 3, 4, 5])
def test_a_stable_group_with_its_members(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        member, _ = await stable_member(h, "g", instance="worker-1" if version >= 4 else None)
        response = await h.request(DescribeGroupsRequest(groups=("g",)), version=version)
        (group,) = response.groups
        assert (group.error_code, group.group_id, group.group_state) == (0, "g", "Stable")
        assert (group.protocol_type, group.protocol_data) == ("consumer", "range")
        (described,) = group.members
        assert (described.member_id, described.client_id, described.client_host) == (member, CLIENT_ID, CLIENT_HOST)
        assert (described.member_metadata, described.member_assignment) == (b"range-meta", b"assigned")
        if version >= 4:
            assert described.group_instance_id == "worker-1"

    broker.run(scenario)


def test_a_rebalancing_group_shows_no_metadata_or_assignment(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await join_new(h, "g")  # joined, awaiting the leader's assignment
        response = await h.request(DescribeGroupsRequest(groups=("g",)), version=5)
        (group,) = response.groups
        assert group.group_state == "CompletingRebalance"
        assert [(m.member_metadata, m.member_assignment) for m in group.members] == [(b"", b"")]

    broker.run(scenario)


def test_an_offsets_only_group_is_empty(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await commit(h, "g", {("t", 0): 1})
        (group,) = (await h.request(DescribeGroupsRequest(groups=("g",)), version=5)).groups
        assert (group.error_code, group.group_state, group.members) == (0, "Empty", ())

    broker.run(scenario)


def test_an_unknown_group_is_described_as_dead(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(DescribeGroupsRequest(groups=("nobody",)), version=5)
        (group,) = response.groups
        assert (group.error_code, group.group_id, group.group_state, group.members) == (0, "nobody", "Dead", ())

    broker.run(scenario)


def test_authorized_operations_when_asked(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await stable_member(h, "g")
        asked = await h.request(DescribeGroupsRequest(groups=("g",), include_authorized_operations=True), version=5)
        assert asked.groups[0].authorized_operations == (1 << READ) | (1 << DELETE) | (1 << DESCRIBE)
        unasked = await h.request(DescribeGroupsRequest(groups=("g",)), version=5)
        assert unasked.groups[0].authorized_operations == -(2**31)
        assert asked.groups[0].error_code == ErrorCode.NONE

    broker.run(scenario)
