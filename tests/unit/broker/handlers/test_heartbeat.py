"""Heartbeat (12): keeps a member's session; tells it when to rejoin; the refusals."""

from __future__ import annotations

import asyncio

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.heartbeat_request import HeartbeatRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.groups import join, stable_member


async def _beat(h: BrokerHarness, group: str, generation: int, member: str, *, version: int = 4,
                instance: str | None = None) -> int:
    request = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member, group_instance_id=instance)
    error: int = (await h.request(request, version=version)).error_code
    return error


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_a_stable_member_s_heartbeat_is_accepted(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        member, generation = await stable_member(h, "g")
        assert await _beat(h, "g", generation, member, version=version) == ErrorCode.NONE

    broker.run(scenario)


def test_an_unknown_group_or_member_is_unknown_member(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert await _beat(h, "absent", 1, "m") == ErrorCode.UNKNOWN_MEMBER_ID
        _, generation = await stable_member(h, "g")
        assert await _beat(h, "g", generation, "stranger") == ErrorCode.UNKNOWN_MEMBER_ID

    broker.run(scenario)


def test_a_wrong_generation_is_illegal(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        member, generation = await stable_member(h, "g")
        assert await _beat(h, "g", generation - 1, member) == ErrorCode.ILLEGAL_GENERATION

    broker.run(scenario)


def test_an_empty_group_id_is_invalid(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert await _beat(h, "", 1, "m") == ErrorCode.INVALID_GROUP_ID

    broker.run(scenario)


def test_a_static_member_under_another_member_id_is_fenced(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        _, generation = await stable_member(h, "g", instance="worker-1")
        assert await _beat(h, "g", generation, "an-old-id", instance="worker-1") == ErrorCode.FENCED_INSTANCE_ID

    broker.run(scenario)


def test_during_a_rebalance_the_member_is_told_to_rejoin(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        member, generation = await stable_member(h, "g")
        newcomer_id = (await join(h, "g")).member_id
        newcomer = asyncio.ensure_future(join(h, "g", newcomer_id))
        await asyncio.sleep(0.05)
        assert await _beat(h, "g", generation, member) == ErrorCode.REBALANCE_IN_PROGRESS
        await join(h, "g", member)
        assert (await newcomer).error_code == ErrorCode.NONE

    broker.run(scenario)
