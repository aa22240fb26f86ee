"""TxnOffsetCommit (28): offsets pending per producer until their transaction's marker;
OffsetFetch RequireStable; KIP-447's member checks; the pending offsets across a restart."""

from __future__ import annotations

import pytest

from strom.broker.handlers.txn_offset_commit import answered_error
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from strom.protocol.messages.offset_fetch_request import OffsetFetchRequest
from strom.protocol.topic_partition import TopicPartition
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.groups import commit, stable_member
from tests.unit.broker.handlers.txn_requests import (
    GROUP_PARTITION,
    UNVERIFIED,
    end_txn,
    fetch_offsets,
    marker,
    producer_id,
    txn_commit,
    write_markers,
)

IN: TopicPartition = ("in", 0)
UNSTABLE = (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)


async def _group_with_offset(h: BrokerHarness, group: str, offset: int) -> None:
    await h.create_topic("in")
    assert await commit(h, group, {IN: offset}) == {IN: ErrorCode.NONE}


@pytest.mark.parametrize("fetch_version", [7, 8])
def test_pending_until_the_commit_marker(broker: BrokerRunner, fetch_version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _group_with_offset(h, "g", 5)
        producer = await producer_id(h)
        assert await txn_commit(h, "g", producer, {IN: 10}) == {IN: ErrorCode.NONE}
        assert await fetch_offsets(h, "g", IN, require_stable=True, version=fetch_version) == UNSTABLE
        assert await fetch_offsets(h, "g", IN, require_stable=False, version=fetch_version) == (5, 0)
        if fetch_version == 7:  # every partition (null topics): the committed ones, unstable where pending
            every = await h.request(OffsetFetchRequest(group_id="g", topics=None, require_stable=True), version=7)
            assert [(p.committed_offset, p.error_code) for t in every.topics for p in t.partitions] == [UNSTABLE]
        # a second commit in the same transaction (the same epoch, no sequence) replaces the first
        assert await txn_commit(h, "g", producer, {IN: 12}) == {IN: ErrorCode.NONE}
        await end_txn(h, producer, True, [GROUP_PARTITION])
        assert await fetch_offsets(h, "g", IN, require_stable=True, version=fetch_version) == (12, 0)

    broker.run(scenario, UNVERIFIED)


def test_an_abort_drops_them_and_a_later_commit_wins(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _group_with_offset(h, "g", 5)
        producer = await producer_id(h)
        assert await txn_commit(h, "g", producer, {IN: 10}) == {IN: ErrorCode.NONE}
        await end_txn(h, producer, False, [GROUP_PARTITION])
        assert await fetch_offsets(h, "g", IN, require_stable=True) == (5, 0)
        # pending at batch position p, then a plain commit after it: the commit marker must
        # not put the older transactional offset back over the newer plain one
        assert await txn_commit(h, "g", producer, {IN: 20}) == {IN: ErrorCode.NONE}
        assert await commit(h, "g", {IN: 30}) == {IN: ErrorCode.NONE}
        await end_txn(h, producer, True, [GROUP_PARTITION])
        assert await fetch_offsets(h, "g", IN, require_stable=True) == (30, 0)

    broker.run(scenario, UNVERIFIED)


def test_a_marker_for_another_producer_leaves_them_pending(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _group_with_offset(h, "g", 5)
        first, second = await producer_id(h), await producer_id(h)
        assert await txn_commit(h, "g", first, {IN: 10}) == {IN: ErrorCode.NONE}
        await end_txn(h, second, True, [GROUP_PARTITION])
        assert await fetch_offsets(h, "g", IN, require_stable=True) == UNSTABLE

    broker.run(scenario, UNVERIFIED)


def test_pending_offsets_survive_a_restart(broker: BrokerRunner) -> None:
    """The load rebuilds them from the transactional batches; markers read back resolve theirs."""
    producers: list[tuple[int, int]] = []

    async def before(h: BrokerHarness) -> None:
        await _group_with_offset(h, "g", 5)
        await h.create_topic("other")
        assert await commit(h, "h", {("other", 0): 1}) == {("other", 0): ErrorCode.NONE}
        open_txn, aborted, committed = await producer_id(h), await producer_id(h), await producer_id(h)
        producers.append(open_txn)
        assert await txn_commit(h, "g", aborted, {IN: 7}) == {IN: ErrorCode.NONE}
        assert await txn_commit(h, "h", committed, {("other", 0): 3}) == {("other", 0): ErrorCode.NONE}
        assert await txn_commit(h, "g", open_txn, {IN: 10}) == {IN: ErrorCode.NONE}
        await end_txn(h, aborted, False, [GROUP_PARTITION])
        await end_txn(h, committed, True, [GROUP_PARTITION])

    async def after_restart(h: BrokerHarness) -> None:
        assert await fetch_offsets(h, "g", IN, require_stable=True) == UNSTABLE
        assert await fetch_offsets(h, "g", IN, require_stable=False) == (5, 0)
        assert await fetch_offsets(h, "h", ("other", 0), require_stable=True) == (3, 0)
        await end_txn(h, producers[0], True, [GROUP_PARTITION])
        assert await fetch_offsets(h, "g", IN, require_stable=True) == (10, 0)

    async def after_second_restart(h: BrokerHarness) -> None:
        assert await fetch_offsets(h, "g", IN, require_stable=True) == (10, 0)

    broker.run(before, UNVERIFIED)
    broker.run(after_restart, UNVERIFIED)
    broker.run(after_second_restart, UNVERIFIED)


def test_kip_447_member_checks(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("in")
        member, generation = await stable_member(h, "g")
        producer = await producer_id(h)
        offsets = {IN: 10}
        assert await txn_commit(h, "g", producer, offsets, generation=generation + 1, member=member) == {
            IN: ErrorCode.ILLEGAL_GENERATION}
        assert await txn_commit(h, "g", producer, offsets, generation=generation, member="stranger") == {
            IN: ErrorCode.UNKNOWN_MEMBER_ID}
        # no member information (older clients, v0-v2): accepted even by a group with members
        assert await txn_commit(h, "g", producer, offsets, version=2) == {IN: ErrorCode.NONE}
        assert await txn_commit(h, "g", producer, offsets, generation=generation, member=member) == {
            IN: ErrorCode.NONE}

        static_member, static_generation = await stable_member(h, "s", instance="instance-1")
        assert await txn_commit(h, "s", producer, offsets, generation=static_generation, member="old-id",
                                instance="instance-1") == {IN: ErrorCode.FENCED_INSTANCE_ID}
        assert await txn_commit(h, "s", producer, offsets, generation=static_generation, member=static_member,
                                instance="instance-1") == {IN: ErrorCode.NONE}

    broker.run(scenario, UNVERIFIED)


def test_unknown_topics_and_a_fenced_producer(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _group_with_offset(h, "g", 5)
        producer = await producer_id(h)
        assert await txn_commit(h, "g", producer, {("nowhere", 0): 1, IN: 10}) == {
            ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, IN: ErrorCode.NONE}
        # the coordinator fences the producer: an abort with the next epoch
        pid, epoch = producer
        assert await write_markers(h, marker((pid, epoch + 1), False, [GROUP_PARTITION])) == [
            (pid, *GROUP_PARTITION, ErrorCode.NONE)]
        assert await txn_commit(h, "g", producer, {IN: 11}) == {IN: ErrorCode.INVALID_PRODUCER_EPOCH}
        assert await fetch_offsets(h, "g", IN, require_stable=True) == (5, 0)

    broker.run(scenario, UNVERIFIED)


def test_offset_delete_drops_a_pending_offset(broker: BrokerRunner) -> None:
    """Kafka's ``removeOffsets``: the transaction's commit does not bring it back."""

    async def scenario(h: BrokerHarness) -> None:
        await _group_with_offset(h, "g", 5)
        producer = await producer_id(h)
        assert await txn_commit(h, "g", producer, {IN: 10}) == {IN: ErrorCode.NONE}
        deleted = await h.request(OffsetDeleteRequest(group_id="g", topics=(
            OffsetDeleteRequestTopic("in", (OffsetDeleteRequestPartition(0),)),)), version=0)
        assert deleted.error_code == ErrorCode.NONE
        await end_txn(h, producer, True, [GROUP_PARTITION])
        assert await fetch_offsets(h, "g", IN, require_stable=True) == (-1, ErrorCode.NONE)

    broker.run(scenario, UNVERIFIED)


def test_old_versions_get_the_errors_they_know() -> None:
    assert answered_error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, 1) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert answered_error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, 2) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert answered_error(ErrorCode.TRANSACTION_ABORTABLE, 3) == ErrorCode.INVALID_TXN_STATE
    assert answered_error(ErrorCode.TRANSACTION_ABORTABLE, 4) == ErrorCode.TRANSACTION_ABORTABLE
