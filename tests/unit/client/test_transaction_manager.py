"""TransactionManager without a broker: which calls each state allows, how a failed
batch's error is sorted (fatal, abortable), what the sender may send, and what the
accumulator fails when a transaction must abort. The requests themselves are tested
against real brokers in tests/client/test_transactional_producer.py."""

from __future__ import annotations

import asyncio

import pytest

from strom.client.accumulator import RecordAccumulator
from strom.client.cluster import Cluster
from strom.client.config import ProducerConfig
from strom.client.errors import (
    IllegalStateError,
    InvalidProducerEpochError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortedError,
)
from strom.client.transaction_manager import TransactionManager, TransactionState
from strom.protocol.error_codes import ErrorCode


def manager(state: TransactionState = TransactionState.UNINITIALIZED) -> TransactionManager:
    config = ProducerConfig.from_properties({"transactional.id": "t-id"})
    transactions = TransactionManager(config, Cluster(config), RecordAccumulator())
    transactions.state = state  # as if the requests that lead there had been answered
    return transactions


def test_calls_outside_their_states_are_refused() -> None:
    fresh = manager()
    with pytest.raises(IllegalStateError, match="init_transactions"):
        fresh.begin_transaction()
    with pytest.raises(IllegalStateError, match="before init_transactions"):
        fresh.maybe_add_partition(("t", 0))
    ready = manager(TransactionState.READY)
    ready.producer_id = 7
    with pytest.raises(IllegalStateError, match="begin_transaction"):
        ready.maybe_add_partition(("t", 0))
    with pytest.raises(IllegalStateError):
        asyncio.run(ready.commit_transaction())
    with pytest.raises(IllegalStateError):
        asyncio.run(ready.abort_transaction())
    with pytest.raises(IllegalStateError):
        asyncio.run(ready.init_transactions())  # once only
    ready.begin_transaction()
    assert ready.state is TransactionState.IN_TRANSACTION
    with pytest.raises(IllegalStateError):
        ready.begin_transaction()


@pytest.mark.parametrize(("code", "state", "raised"), [
    (ErrorCode.PRODUCER_FENCED, TransactionState.FATAL_ERROR, ProducerFencedError),
    (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TransactionState.FATAL_ERROR, KafkaError),
    (ErrorCode.INVALID_PRODUCER_EPOCH, TransactionState.ABORTABLE_ERROR, InvalidProducerEpochError),  # KIP-588
    (ErrorCode.INVALID_TXN_STATE, TransactionState.ABORTABLE_ERROR, KafkaError),
    (ErrorCode.MESSAGE_TOO_LARGE, TransactionState.ABORTABLE_ERROR, KafkaError),
])
def test_a_failed_batch_is_sorted_as_java_sorts_it(code: ErrorCode, state: TransactionState,
                                                   raised: type[KafkaError]) -> None:
    transactions = manager(TransactionState.IN_TRANSACTION)
    transactions.handle_failed_batch(KafkaError(code, "produce"))
    assert transactions.state is state
    with pytest.raises(raised) as error:
        transactions.begin_transaction()
    assert error.value.error_code is code
    with pytest.raises(raised):
        asyncio.run(transactions.commit_transaction())


def test_an_abortable_error_while_aborting_changes_nothing() -> None:
    transactions = manager(TransactionState.ABORTING_TRANSACTION)
    transactions.handle_failed_batch(KafkaError(ErrorCode.INVALID_TXN_STATE, "produce"))
    assert transactions.state is TransactionState.ABORTING_TRANSACTION
    failing = transactions.undrained_batch_error()
    assert failing is not None and isinstance(failing[0], TransactionAbortedError) and not failing[1]


def test_only_partitions_in_the_transaction_are_sendable() -> None:
    transactions = manager(TransactionState.IN_TRANSACTION)
    transactions._in_transaction = {("t", 0)}
    assert transactions.sendable({("t", 0)}) == {("t", 0)}
    assert transactions.sendable({("t", 0), ("t", 1)}) == {("t", 0)}
    assert transactions.undrained_batch_error() is None


def test_abortable_and_fatal_errors_fail_what_is_not_sent() -> None:
    async def main() -> None:
        accumulator = RecordAccumulator(linger_ms=60_000)
        config = ProducerConfig.from_properties({"transactional.id": "t-id"})
        transactions = TransactionManager(config, Cluster(config), accumulator)
        transactions.state = TransactionState.IN_TRANSACTION
        future = await accumulator.append("t", 0, None, b"v", (), 0)
        assert future is not None
        transactions.handle_failed_batch(KafkaError(ErrorCode.MESSAGE_TOO_LARGE, "another partition"))
        failing = transactions.undrained_batch_error()
        assert failing is not None
        error, fatal = failing
        assert error.error_code is ErrorCode.MESSAGE_TOO_LARGE and not fatal
        assert accumulator.abort_undrained_batches(error) == 1
        assert future.done() and future.exception() is error

    asyncio.run(main())


def test_a_call_that_timed_out_gets_the_outcome_of_its_work_when_called_again() -> None:
    """As Java's: commit_transaction waits max.block.ms, the commit goes on, and calling
    commit_transaction again waits for (or returns the outcome of) that same commit."""
    async def main() -> None:
        config = ProducerConfig.from_properties({"transactional.id": "t-id", "max.block.ms": 50})
        transactions = TransactionManager(config, Cluster(config), RecordAccumulator())
        transactions.state = TransactionState.COMMITTING_TRANSACTION
        release = asyncio.Event()

        async def commit() -> None:  # stands for flush + EndTxn
            await release.wait()
            transactions.state = TransactionState.READY

        transactions._start_pending("commit_transaction", commit())
        with pytest.raises(KafkaTimeoutError, match="call it again"):
            await transactions.commit_transaction()
        release.set()
        pending = transactions._pending
        assert pending is not None
        while not pending.done():  # the commit finishes while nobody waits for it
            await asyncio.sleep(0)
        await transactions.commit_transaction()
        assert transactions.state is TransactionState.READY
        with pytest.raises(IllegalStateError):
            await transactions.commit_transaction()  # nothing left to resume

    asyncio.run(main())
