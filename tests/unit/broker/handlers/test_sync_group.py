"""SyncGroup (14): the leader hands in the assignment and every member gets its share."""

from __future__ import annotations

import asyncio

import pytest

from strom.protocol.error_codes import ErrorCode
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.groups import join, join_new, stable_member, sync


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_the_leader_s_assignment_reaches_every_member(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        leader = await join_new(h, "g")
        await sync(h, "g", leader.generation_id, leader.member_id, {leader.member_id: b"solo"}, version=version)
        follower_id = (await join(h, "g")).member_id
        _, leader = await asyncio.gather(join(h, "g", follower_id), join(h, "g", leader.member_id))
        generation = leader.generation_id
        # The follower's sync waits for the leader's, which carries both shares.
        follower_sync, leader_sync = await asyncio.gather(
            sync(h, "g", generation, follower_id, version=version),
            sync(h, "g", generation, leader.member_id, {leader.member_id: b"L", follower_id: b"F"}, version=version),
        )
        assert (leader_sync.error_code, leader_sync.assignment) == (0, b"L")
        assert (follower_sync.error_code, follower_sync.assignment) == (0, b"F")
        if version >= 5:
            assert (follower_sync.protocol_type, follower_sync.protocol_name) == ("consumer", "range")
        # A Stable group answers a repeated sync with the member's assignment.
        again = await sync(h, "g", generation, follower_id, version=version)
        assert (again.error_code, again.assignment) == (0, b"F")

    broker.run(scenario)


def test_an_unknown_group_or_member_is_unknown_member(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert (await sync(h, "absent", 1, "m")).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        _, generation = await stable_member(h, "g")
        assert (await sync(h, "g", generation, "stranger")).error_code == ErrorCode.UNKNOWN_MEMBER_ID

    broker.run(scenario)


def test_a_wrong_generation_is_illegal(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        member, generation = await stable_member(h, "g")
        assert (await sync(h, "g", generation + 1, member)).error_code == ErrorCode.ILLEGAL_GENERATION

    broker.run(scenario)


def test_an_empty_group_id_is_invalid(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert (await sync(h, "", 1, "m")).error_code == ErrorCode.INVALID_GROUP_ID

    broker.run(scenario)


@pytest.mark.parametrize(("protocol_type", "protocol_name"), [("connect", "range"), ("consumer", "roundrobin")])
def test_v5_a_protocol_other_than_the_group_s_is_inconsistent(
    broker: BrokerRunner, protocol_type: str, protocol_name: str
) -> None:
    async def scenario(h: BrokerHarness) -> None:
        member, generation = await stable_member(h, "g")
        response = await sync(h, "g", generation, member, protocol_type=protocol_type, protocol_name=protocol_name)
        assert response.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    broker.run(scenario)


def test_during_a_rebalance_a_sync_is_told_to_rejoin(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        member, generation = await stable_member(h, "g")
        newcomer_id = (await join(h, "g")).member_id
        newcomer = asyncio.ensure_future(join(h, "g", newcomer_id))  # waits: the group prepares a rebalance
        await asyncio.sleep(0.05)
        assert not newcomer.done()
        assert (await sync(h, "g", generation, member)).error_code == ErrorCode.REBALANCE_IN_PROGRESS
        rejoined = await join(h, "g", member)
        assert ((await newcomer).error_code, rejoined.error_code) == (0, 0)

    broker.run(scenario)
