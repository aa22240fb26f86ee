"""JoinGroup (11): joining a classic group, KIP-394's member id round trip, and the refusals."""

from __future__ import annotations

import asyncio

import pytest

from strom.protocol.error_codes import ErrorCode
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.groups import join, join_new, sync


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_before_v4_a_new_member_joins_at_once(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        joined = await join(h, "g", version=version)
        assert joined.error_code == ErrorCode.NONE
        assert joined.member_id.startswith("harness-")  # client id, then a unique suffix
        assert (joined.generation_id, joined.leader, joined.protocol_name) == (1, joined.member_id, "range")
        assert [(m.member_id, m.metadata) for m in joined.members] == [(joined.member_id, b"range-meta")]

    broker.run(scenario)


@pytest.mark.parametrize("version", [4, 7, 9])
def test_from_v4_a_new_member_first_gets_its_id(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        first = await join(h, "g", version=version)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        assert first.member_id
        joined = await join(h, "g", first.member_id, version=version)
        assert (joined.error_code, joined.member_id, joined.leader) == (0, first.member_id, first.member_id)
        assert joined.generation_id == 1
        if version >= 7:
            assert joined.protocol_type == "consumer"

    broker.run(scenario)


def test_a_second_member_joins_when_the_first_rejoins(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        first = await join_new(h, "g")
        await sync(h, "g", first.generation_id, first.member_id, {first.member_id: b"all"})
        second_id = (await join(h, "g")).member_id
        second, again = await asyncio.gather(join(h, "g", second_id), join(h, "g", first.member_id))
        assert second.error_code == again.error_code == ErrorCode.NONE
        assert second.generation_id == again.generation_id == 2
        assert second.leader == again.leader == first.member_id
        assert {m.member_id for m in again.members} == {first.member_id, second_id}
        assert second.members == ()  # only the leader gets the member list

    broker.run(scenario)


def test_a_session_timeout_outside_the_broker_s_bounds_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        short = await join(h, "g", session_ms=100)
        long = await join(h, "g", session_ms=2_000_000)
        assert short.error_code == long.error_code == ErrorCode.INVALID_SESSION_TIMEOUT

    broker.run(scenario)


def test_an_empty_group_id_is_invalid(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert (await join(h, "")).error_code == ErrorCode.INVALID_GROUP_ID

    broker.run(scenario)


def test_a_made_up_member_id_for_a_new_group_is_unknown(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert (await join(h, "g", "made-up")).error_code == ErrorCode.UNKNOWN_MEMBER_ID

    broker.run(scenario)


def test_protocols_the_group_cannot_use_are_inconsistent(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await join_new(h, "g")
        other_type = await join_new(h, "g", protocol_type="connect")
        no_common = await join_new(h, "g", protocols=[("sticky", b"")])
        assert other_type.error_code == no_common.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    broker.run(scenario)


def test_a_full_group_refuses_another_member(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert (await join_new(h, "g")).error_code == ErrorCode.NONE
        assert (await join(h, "g")).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED

    broker.run(scenario, {"group.max.size": "1"})


def test_the_member_list_carries_each_member_s_metadata_for_the_chosen_protocol(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        joined = await join_new(h, "g", protocols=[("roundrobin", b"mine"), ("range", b"other")])
        assert joined.protocol_name == "roundrobin"
        assert [m.metadata for m in joined.members] == [b"mine"]

    broker.run(scenario)
