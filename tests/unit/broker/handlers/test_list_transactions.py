"""ListTransactions (66) on one broker, beside the differential test against Kafka 3.9
(tests/differential/test_txn_admin.py): the filters' corners (a known state no id is
listed under, names matched case and all, every filter given must match, KIP-994's
duration) and COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""

from __future__ import annotations

from strom.protocol.error_codes import ErrorCode
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.txn_requests import PROPERTIES, add, init
from tests.unit.broker.handlers.txn_admin_requests import listed


def test_filters(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        nothing = await listed(h)  # no __transaction_state yet: nothing to list
        assert (nothing.error_code, nothing.transaction_states) == (ErrorCode.NONE, ())
        await h.create_topic("t")
        ongoing = ((await init(h, "ongoing")).producer_id, 0)
        assert await add(h, "ongoing", ongoing, [("t", 0)]) == {("t", 0): 0}
        empty = (await init(h, "empty")).producer_id

        every = await listed(h)
        assert sorted((s.transactional_id, s.producer_id, s.transaction_state) for s in every.transaction_states) == [
            ("empty", empty, "Empty"), ("ongoing", ongoing[0], "Ongoing")]
        answer = await listed(h, ("Ongoing", "Dead", "ongoing", "Bogus"))
        assert [s.transactional_id for s in answer.transaction_states] == ["ongoing"]
        assert answer.unknown_state_filters == ("Bogus", "ongoing")  # Kafka's names, case and all
        assert (await listed(h, ("Dead",))).transaction_states == ()  # known, never listed
        assert (await listed(h, ("Bogus",))).transaction_states == ()  # only unknown names: nothing matches
        assert [s.transactional_id for s in (await listed(h, (), (empty, 12345))).transaction_states] == ["empty"]
        assert (await listed(h, ("Ongoing",), (empty,))).transaction_states == ()  # both filters must match
        # KIP-994: running longer than the duration. Empty has no start time (-1), so as
        # in Kafka (now - -1 > duration) it is listed by any duration.
        long_running = await listed(h, duration_ms=3_600_000)
        assert [s.transactional_id for s in long_running.transaction_states] == ["empty"]

    broker.run(scenario, PROPERTIES)


def test_load_in_progress(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await init(h, "tx")
        manager = h.broker.transaction_coordinator.state_manager
        manager.loading.add(0)  # as while a new leader of partition 0 reads it
        try:
            loading = await listed(h)
            assert (loading.error_code, loading.transaction_states) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ())
        finally:
            manager.loading.discard(0)
        assert [s.transactional_id for s in (await listed(h)).transaction_states] == ["tx"]

    broker.run(scenario, PROPERTIES)
