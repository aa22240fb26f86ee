"""DeleteGroups (42): remove Empty groups and their committed offsets."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.delete_groups_request import DeleteGroupsRequest
from strom.protocol.messages.list_groups_request import ListGroupsRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.groups import commit, committed, stable_member


@pytest.mark.parametrize("version", [0, 1, 2])
def test_an_empty_group_and_its_offsets_are_deleted(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await commit(h, "g", {("t", 0): 5})
        response = await h.request(DeleteGroupsRequest(groups_names=("g",)), version=version)
        assert [(r.group_id, r.error_code) for r in response.results] == [("g", 0)]
        assert await committed(h, "g", "t", (0,)) == {0: -1}
        assert (await h.request(ListGroupsRequest(), version=5)).groups == ()

    broker.run(scenario)


def test_each_group_gets_its_own_answer(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await commit(h, "empty", {("t", 0): 5})
        await stable_member(h, "live")
        response = await h.request(DeleteGroupsRequest(groups_names=("empty", "live", "nobody")), version=2)
        assert {r.group_id: r.error_code for r in response.results} == {
            "empty": ErrorCode.NONE, "live": ErrorCode.NON_EMPTY_GROUP, "nobody": ErrorCode.GROUP_ID_NOT_FOUND,
        }
        listed = await h.request(ListGroupsRequest(), version=5)
        assert [g.group_id for g in listed.groups] == ["live"]

    broker.run(scenario)


def test_a_deleted_group_cannot_be_deleted_again(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await commit(h, "g", {("t", 0): 5})
        await h.request(DeleteGroupsRequest(groups_names=("g",)), version=2)
        again = await h.request(DeleteGroupsRequest(groups_names=("g",)), version=2)
        assert [r.error_code for r in again.results] == [ErrorCode.GROUP_ID_NOT_FOUND]

    broker.run(scenario)
