"""EndTxn (26): answered once Prepare* is durable; markers, then Complete*; retries as Kafka answers them."""

from __future__ import annotations

import asyncio

from strom.broker.transaction.transaction_log import TransactionState
from strom.protocol.error_codes import ErrorCode
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.txn_requests import (
    PROPERTIES,
    HeldMarkers,
    add,
    end,
    init,
    produce_transactional,
    state_of,
    until_complete,
)


def test_commit_writes_markers_then_complete_and_retries_answer_as_kafka(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        producer = ((await init(h, "tx")).producer_id, 0)
        assert await add(h, "tx", producer, [("t", 0)]) == {("t", 0): ErrorCode.NONE}
        assert state_of(h, "tx") == TransactionState.ONGOING
        assert await produce_transactional(h, "tx", producer, "t", [b"a", b"b"]) == ErrorCode.NONE
        assert await end(h, "tx", producer, committed=True) == ErrorCode.NONE
        await until_complete(h, "tx", producer, committed=True)
        assert state_of(h, "tx") == TransactionState.COMPLETE_COMMIT
        assert await h.list_offset("t", 0) == 3  # two records and the COMMIT marker
        assert await end(h, "tx", producer, committed=True) == ErrorCode.NONE  # a retry after Complete
        assert await end(h, "tx", producer, committed=False) == ErrorCode.INVALID_TXN_STATE
        # The next transaction: an abort.
        assert await add(h, "tx", producer, [("t", 0)]) == {("t", 0): ErrorCode.NONE}
        assert await produce_transactional(h, "tx", producer, "t", [b"c"], sequence=2) == ErrorCode.NONE
        assert await end(h, "tx", producer, committed=False) == ErrorCode.NONE
        await until_complete(h, "tx", producer, committed=False)
        assert state_of(h, "tx") == TransactionState.COMPLETE_ABORT
        assert await h.list_offset("t", 0) == 5

    broker.run(scenario, PROPERTIES)


def test_a_prepared_commit_is_completed_after_a_restart(broker: BrokerRunner) -> None:
    producer: tuple[int, int] = (-1, -1)

    async def before(h: BrokerHarness) -> None:
        nonlocal producer
        channel = h.broker.transaction_coordinator.marker_channel
        channel.write_markers = HeldMarkers(channel.write_markers)
        await h.create_topic("t")
        producer = ((await init(h, "tx")).producer_id, 0)
        assert await add(h, "tx", producer, [("t", 0)]) == {("t", 0): ErrorCode.NONE}
        assert await produce_transactional(h, "tx", producer, "t", [b"a"]) == ErrorCode.NONE
        assert await end(h, "tx", producer, committed=True) == ErrorCode.NONE  # PrepareCommit is durable
        assert state_of(h, "tx") == TransactionState.PREPARE_COMMIT

    async def after(h: BrokerHarness) -> None:
        channel = h.broker.transaction_coordinator.marker_channel
        held = channel.write_markers = HeldMarkers(channel.write_markers)  # before the loaded commit's first round
        assert state_of(h, "tx") == TransactionState.PREPARE_COMMIT
        assert (await init(h, "tx")).error_code == ErrorCode.CONCURRENT_TRANSACTIONS
        held.released = True
        for _ in range(500):
            answer = await init(h, "tx")
            if answer.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
                break
            await asyncio.sleep(0.01)
        assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (0, producer[0], 1)
        assert await h.list_offset("t", 0) == 2  # the record and the COMMIT marker

    broker.run(before, PROPERTIES)
    broker.run(after, PROPERTIES)


def test_a_clients_end_txn_waits_while_the_coordinator_fences_its_transaction(broker: BrokerRunner) -> None:
    """The timed-out-transaction scan has fenced the epoch and not yet prepared the abort: the
    client's commit is CONCURRENT_TRANSACTIONS (Kafka would fail preparing it)."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        producer = ((await init(h, "tx")).producer_id, 0)
        assert await add(h, "tx", producer, [("t", 0)]) == {("t", 0): ErrorCode.NONE}
        found = h.broker.transaction_coordinator.state_manager.get_transaction_state("tx")
        assert not isinstance(found, ErrorCode) and found[1] is not None
        found[1].prepare_fence_producer_epoch()  # as the scan does, before its abort runs
        assert await end(h, "tx", producer, committed=True) == ErrorCode.CONCURRENT_TRANSACTIONS
        assert state_of(h, "tx") == TransactionState.ONGOING

    broker.run(scenario, PROPERTIES)
