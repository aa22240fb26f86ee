"""OffsetCommit (8): committed positions, from standalone consumers and group members."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.offset_commit_request import OffsetCommitRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.groups import (
    commit,
    commit_request,
    committed,
    join_new,
    stable_member,
)


@pytest.mark.parametrize("version", [0, 2, 5, 7, 8, 9])
def test_a_standalone_consumer_commits(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=2)
        errors = await commit(h, "g", {("t", 0): 5, ("t", 1): 7}, version=version)
        assert errors == {("t", 0): 0, ("t", 1): 0}
        assert await committed(h, "g", "t", (0, 1)) == {0: 5, 1: 7}

    broker.run(scenario)


def test_a_group_member_commits_in_its_generation(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        member, generation = await stable_member(h, "g")
        assert await commit(h, "g", {("t", 0): 3}, generation=generation, member=member) == {("t", 0): 0}
        assert await committed(h, "g", "t", (0,)) == {0: 3}

    broker.run(scenario)


def test_an_unknown_topic_or_partition_is_refused_and_the_rest_committed(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        errors = await commit(h, "g", {("t", 0): 1, ("t", 3): 1, ("absent", 0): 1})
        assert errors == {
            ("t", 0): 0, ("t", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("absent", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert await committed(h, "g", "t", (0,)) == {0: 1}

    broker.run(scenario)


def test_metadata_over_the_limit_is_too_large(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        errors = await commit(h, "g", {("t", 0): 1}, metadata="m" * 4097)  # offset.metadata.max.bytes = 4096
        assert errors == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
        assert await committed(h, "g", "t", (0,)) == {0: -1}

    broker.run(scenario)


def test_a_generation_for_a_group_that_does_not_exist_is_illegal(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        assert await commit(h, "new", {("t", 0): 1}, generation=3, member="m") == {("t", 0): ErrorCode.ILLEGAL_GENERATION}

    broker.run(scenario)


def test_a_wrong_generation_is_illegal(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        member, generation = await stable_member(h, "g")
        errors = await commit(h, "g", {("t", 0): 1}, generation=generation + 1, member=member)
        assert errors == {("t", 0): ErrorCode.ILLEGAL_GENERATION}

    broker.run(scenario)


def test_an_unknown_member_of_a_live_group_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        _, generation = await stable_member(h, "g")
        errors = await commit(h, "g", {("t", 0): 1}, generation=generation, member="stranger")
        assert errors == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
        standalone = await commit(h, "g", {("t", 0): 1})  # the group has members: not a standalone commit
        assert standalone == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}

    broker.run(scenario)


def test_while_the_assignment_is_awaited_a_commit_is_told_a_rebalance_is_in_progress(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        joined = await join_new(h, "g")  # joined, not yet synced: CompletingRebalance
        errors = await commit(h, "g", {("t", 0): 1}, generation=joined.generation_id, member=joined.member_id)
        assert errors == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}

    broker.run(scenario)


def test_a_static_member_under_another_member_id_is_fenced(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        _, generation = await stable_member(h, "g", instance="worker-1")
        request = commit_request("g", {("t", 0): 1}, generation=generation, member="an-old-id")
        request = OffsetCommitRequest(
            group_id=request.group_id, generation_id_or_member_epoch=generation, member_id="an-old-id",
            group_instance_id="worker-1", topics=request.topics,
        )
        response = await h.request(request, version=9)
        assert [p.error_code for t in response.topics for p in t.partitions] == [ErrorCode.FENCED_INSTANCE_ID]

    broker.run(scenario)
