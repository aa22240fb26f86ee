"""AddPartitionsToTxn (24) v0-3: the coordinator's checks, all or nothing, errors per version."""

from __future__ import annotations

from strom.broker.transaction.transaction_log import TransactionState
from strom.protocol.error_codes import ErrorCode
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.txn_requests import (
    PROPERTIES,
    add,
    end,
    init,
    state_of,
)


def test_the_coordinators_refusals(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        pid = (await init(h, "tx")).producer_id
        assert await end(h, "tx", (pid, 0), committed=True) == ErrorCode.INVALID_TXN_STATE  # Empty
        assert await end(h, "tx", (pid + 100, 0), committed=True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert await end(h, "unknown", (pid, 0), committed=True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert await add(h, "tx", (pid + 100, 0), [("t", 0)]) == {("t", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        assert await add(h, "tx", (pid, 1), [("t", 0)], version=0) == {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
        assert await add(h, "tx", (pid, 1), [("t", 0)], version=2) == {("t", 0): ErrorCode.PRODUCER_FENCED}
        assert await end(h, "tx", (pid, 1), committed=True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert await end(h, "tx", (pid, 1), committed=True, version=2) == ErrorCode.PRODUCER_FENCED
        # All or nothing: an unknown partition fails the request, the others are not attempted.
        assert await add(h, "tx", (pid, 0), [("t", 0), ("t", 7), ("nope", 0)]) == {
            ("t", 0): ErrorCode.OPERATION_NOT_ATTEMPTED, ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert state_of(h, "tx") == TransactionState.EMPTY

    broker.run(scenario, PROPERTIES)
