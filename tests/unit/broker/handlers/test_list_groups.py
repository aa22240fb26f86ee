"""ListGroups (16): every group this coordinator knows; v4 filters by state, v5 by type."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.list_groups_request import ListGroupsRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.groups import commit, stable_member


async def _two_groups(h: BrokerHarness) -> None:
    await h.create_topic("t")
    await stable_member(h, "live")
    await commit(h, "offsets-only", {("t", 0): 1})


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_every_group(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _two_groups(h)
        response = await h.request(ListGroupsRequest(), version=version)
        assert response.error_code == ErrorCode.NONE
        assert sorted((g.group_id, g.protocol_type) for g in response.groups) == [("live", "consumer"), ("offsets-only", "")]
        if version >= 4:
            assert {g.group_id: g.group_state for g in response.groups} == {"live": "Stable", "offsets-only": "Empty"}

    broker.run(scenario)


def test_no_groups(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(ListGroupsRequest(), version=5)
        assert (response.error_code, response.groups) == (ErrorCode.NONE, ())

    broker.run(scenario)


@pytest.mark.parametrize(("states", "listed"), [(("stable",), ["live"]), (("Empty",), ["offsets-only"]),
                                                (("Dead",), []), (("STABLE", "empty"), ["live", "offsets-only"])])
def test_v4_filters_by_state_ignoring_case(broker: BrokerRunner, states: tuple[str, ...], listed: list[str]) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _two_groups(h)
        response = await h.request(ListGroupsRequest(states_filter=states), version=4)
        assert sorted(g.group_id for g in response.groups) == listed

    broker.run(scenario)


@pytest.mark.parametrize(("types", "listed"), [(("classic",), ["live", "offsets-only"]), (("consumer",), []),
                                               ((), ["live", "offsets-only"])])
def test_v5_filters_by_type(broker: BrokerRunner, types: tuple[str, ...], listed: list[str]) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _two_groups(h)
        response = await h.request(ListGroupsRequest(types_filter=types), version=5)
        assert sorted(g.group_id for g in response.groups) == listed
        assert {g.group_type for g in response.groups} <= {"classic"}

    broker.run(scenario)
