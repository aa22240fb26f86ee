"""Fetch (1) sessions (KIP-227): created by a full request, answered incrementally, closed.

Epochs: session 0 / epoch -1 is no session; epoch 0 creates one; n > 0 is the n-th
incremental request; epoch -1 with an id closes it.
"""

from __future__ import annotations

from strom.protocol.error_codes import ErrorCode
from tests.support.broker_harness import BrokerHarness, BrokerRunner, records_of
from tests.support.fetch_requests import fetch, partitions_of

VERSION = 12


async def _session(h: BrokerHarness, offsets: list[tuple[str, int, int]]) -> int:
    """A new session over ``offsets``; its id. The full answer names every partition."""
    response = await h.request(fetch(offsets, session_id=0, session_epoch=0), version=VERSION)
    assert response.error_code == ErrorCode.NONE
    assert response.session_id > 0
    assert set(partitions_of(response)) == {(topic, partition) for topic, partition, _ in offsets}
    session_id: int = response.session_id
    return session_id


def test_an_incremental_answer_carries_only_partitions_with_news(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("s", partitions=2)
        session_id = await _session(h, [("s", 0, 0), ("s", 1, 0)])

        await h.produce("s", 1, [b"a", b"b"])
        first = await h.request(fetch([], session_id=session_id, session_epoch=1), version=VERSION)
        assert (first.error_code, first.session_id) == (ErrorCode.NONE, session_id)
        answered = partitions_of(first)
        assert list(answered) == [("s", 1)]
        assert answered[("s", 1)].high_watermark == 2
        assert [r.value for r in records_of(answered[("s", 1)].records)] == [b"a", b"b"]

        # The client moves on to offset 2; nothing new anywhere: an empty answer.
        quiet = await h.request(fetch([("s", 1, 2)], session_id=session_id, session_epoch=2), version=VERSION)
        assert (quiet.error_code, partitions_of(quiet)) == (ErrorCode.NONE, {})

        await h.produce("s", 0, [b"c"])
        second = await h.request(fetch([], session_id=session_id, session_epoch=3), version=VERSION)
        assert list(partitions_of(second)) == [("s", 0)]

    broker.run(scenario)


def test_a_forgotten_partition_leaves_the_session(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("s", partitions=2)
        session_id = await _session(h, [("s", 0, 0), ("s", 1, 0)])
        forget = fetch([], session_id=session_id, session_epoch=1, forgotten=[("s", 0)])
        assert partitions_of(await h.request(forget, version=VERSION)) == {}
        await h.produce("s", 0, [b"unwatched"])
        await h.produce("s", 1, [b"watched"])
        answer = await h.request(fetch([], session_id=session_id, session_epoch=2), version=VERSION)
        assert list(partitions_of(answer)) == [("s", 1)]

    broker.run(scenario)


def test_a_wrong_epoch_is_invalid_fetch_session_epoch(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("s")
        session_id = await _session(h, [("s", 0, 0)])
        skipped = await h.request(fetch([], session_id=session_id, session_epoch=2), version=VERSION)
        assert skipped.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        assert (skipped.session_id, skipped.responses) == (0, ())
        # The session survives a wrong epoch: the expected one still works.
        right = await h.request(fetch([], session_id=session_id, session_epoch=1), version=VERSION)
        assert right.error_code == ErrorCode.NONE

    broker.run(scenario)


def test_an_unknown_session_id_is_not_found(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("s")
        response = await h.request(fetch([("s", 0, 0)], session_id=424242, session_epoch=1), version=VERSION)
        assert response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        assert response.responses == ()

    broker.run(scenario)


def test_a_closed_session_is_gone_and_the_closing_request_is_answered_in_full(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("s")
        await h.produce("s", 0, [b"a"])
        session_id = await _session(h, [("s", 0, 0)])
        closing = await h.request(fetch([("s", 0, 0)], session_id=session_id, session_epoch=-1), version=VERSION)
        assert (closing.error_code, closing.session_id) == (ErrorCode.NONE, 0)
        assert [r.value for r in records_of(partitions_of(closing)[("s", 0)].records)] == [b"a"]
        after = await h.request(fetch([], session_id=session_id, session_epoch=1), version=VERSION)
        assert after.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    broker.run(scenario)


def test_without_a_session_every_partition_is_answered(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("s", partitions=2)
        for _ in range(2):
            response = await h.request(fetch([("s", 0, 0), ("s", 1, 0)]), version=VERSION)
            assert response.session_id == 0
            assert set(partitions_of(response)) == {("s", 0), ("s", 1)}

    broker.run(scenario)


def test_with_no_session_slots_a_full_request_gets_no_session(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("s")
        response = await h.request(fetch([("s", 0, 0)], session_id=0, session_epoch=0), version=VERSION)
        assert (response.error_code, response.session_id) == (ErrorCode.NONE, 0)
        assert set(partitions_of(response)) == {("s", 0)}

    broker.run(scenario, {"max.incremental.fetch.session.cache.slots": "0"})
