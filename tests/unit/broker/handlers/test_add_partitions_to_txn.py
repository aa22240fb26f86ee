"""AddPartitionsToTxn (24): v0-3 (clients) the coordinator's checks, all or nothing, errors per
version; v4-5 (brokers, KIP-890) VerifyOnly questions and additions, several transactions at once."""

from __future__ import annotations

from strom.broker.transaction.transaction_log import TransactionState
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from strom.protocol.topic_partition import TopicPartition
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


async def _broker_request(h: BrokerHarness, version: int,
                          transactions: list[tuple[str, tuple[int, int], bool, list[TopicPartition]]]
                          ) -> tuple[int, dict[str, dict[TopicPartition, int]]]:
    """An AddPartitionsToTxn v4+ as a partition leader sends it: (top-level error, answers by id)."""
    request = AddPartitionsToTxnRequest(transactions=tuple(
        AddPartitionsToTxnTransaction(
            transactional_id=txn_id, producer_id=producer[0], producer_epoch=producer[1], verify_only=verify_only,
            topics=tuple(AddPartitionsToTxnTopic(topic, tuple(i for t, i in partitions if t == topic))
                         for topic in dict.fromkeys(t for t, _ in partitions)))
        for txn_id, producer, verify_only, partitions in transactions))
    response = await h.request(request, version=version)
    return response.error_code, {
        result.transactional_id: {(t.name, p.partition_index): p.partition_error_code
                                  for t in result.topic_results for p in t.results_by_partition}
        for result in response.results_by_transaction}


def test_the_brokers_versions_verify_without_adding_and_batch_transactions(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=2)
        pid = (await init(h, "tx")).producer_id
        other = (await init(h, "other")).producer_id
        assert await add(h, "tx", (pid, 0), [("t", 0)]) == {("t", 0): ErrorCode.NONE}
        for version in (4, 5):
            error, answers = await _broker_request(h, version, [
                ("tx", (pid, 0), True, [("t", 0), ("t", 1)]),
                ("other", (other, 0), True, [("t", 0)]),  # Empty: nothing is in its transaction
                ("unknown", (pid, 0), True, [("t", 0)]),
            ])
            assert error == ErrorCode.NONE
            assert answers == {
                "tx": {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.TRANSACTION_ABORTABLE},
                "other": {("t", 0): ErrorCode.TRANSACTION_ABORTABLE},
                "unknown": {("t", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}}
        _, fenced = await _broker_request(h, 4, [("tx", (pid, 1), True, [("t", 0)])])
        assert fenced == {"tx": {("t", 0): ErrorCode.PRODUCER_FENCED}}
        assert state_of(h, "other") == TransactionState.EMPTY  # verifying added nothing
        # VerifyOnly unset: the partitions are added, all or nothing as for a client.
        _, unknown = await _broker_request(h, 4, [("other", (other, 0), False, [("t", 1), ("nope", 0)])])
        assert unknown == {"other": {("t", 1): ErrorCode.OPERATION_NOT_ATTEMPTED,
                                     ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}}
        _, added = await _broker_request(h, 4, [("other", (other, 0), False, [("t", 1)])])
        assert added == {"other": {("t", 1): ErrorCode.NONE}}
        assert state_of(h, "other") == TransactionState.ONGOING
        _, verified = await _broker_request(h, 4, [("other", (other, 0), True, [("t", 1)])])
        assert verified == {"other": {("t", 1): ErrorCode.NONE}}

    broker.run(scenario, PROPERTIES)
