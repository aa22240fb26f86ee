"""DescribeProducers (61) on one broker, beside the differential test against Kafka 3.9
(tests/differential/test_txn_admin.py): ``Admin.abortTransaction``'s flow (KIP-664:
DescribeProducers, then WriteTxnMarkers(abort) straight to the leader) clearing a
hanging transaction its coordinator has forgotten, and the per-topic and per-partition
errors."""

from __future__ import annotations

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.txn_requests import PROPERTIES, add, init, produce_transactional
from tests.unit.broker.handlers.txn_admin_requests import describe, listed, producers
from tests.unit.broker.handlers.txn_requests import latest_offset, marker, write_markers


def test_abort_transaction_clears_a_transaction_its_coordinator_forgot(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        producer = ((await init(h, "tx")).producer_id, 0)
        assert await add(h, "tx", producer, [("t", 0)]) == {("t", 0): 0}
        assert await produce_transactional(h, "tx", producer, "t", [b"a", b"b"]) == ErrorCode.NONE
        # The coordinator loses the transaction, as a hanging transaction's has:
        h.broker.transaction_coordinator.state_manager.remove_partition(0)
        (forgotten,) = await describe(h, "tx")
        assert forgotten.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert (await listed(h)).transaction_states == ()
        high_watermark = await latest_offset(h, ("t", 0), read_committed=False)
        stuck = await latest_offset(h, ("t", 0), read_committed=True)
        assert (stuck, high_watermark) == (0, 2)

        (hanging,) = await producers(h, "t")
        assert (hanging.producer_id, hanging.producer_epoch, hanging.last_sequence, hanging.coordinator_epoch,
                hanging.current_txn_start_offset) == (producer[0], 0, 1, -1, 0)
        assert hanging.last_timestamp > 0
        answers = await write_markers(h, marker((hanging.producer_id, hanging.producer_epoch), False, [("t", 0)],
                                                hanging.coordinator_epoch))
        assert answers == [(producer[0], "t", 0, ErrorCode.NONE)]
        assert await latest_offset(h, ("t", 0), read_committed=True) == 3  # LSO == HW, past the marker
        assert await latest_offset(h, ("t", 0), read_committed=False) == 3
        (cleared,) = await producers(h, "t")
        assert (cleared.current_txn_start_offset, cleared.last_sequence) == (-1, 1)

    broker.run(scenario, PROPERTIES)


def test_errors(broker: BrokerRunner) -> None:
    """An illegal name and an unknown topic per topic (with the message), a partition the
    topic lacks per partition, beside a good one; a partition with no producers has none."""
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        response = await h.request(DescribeProducersRequest(topics=(
            TopicRequest("t", (0, 3)), TopicRequest("no-such", (0, 1)), TopicRequest("bad/name", (0,)))), version=0)
        answers = [[(p.partition_index, p.error_code, p.error_message is not None, p.active_producers)
                    for p in topic.partitions] for topic in response.topics]
        assert answers == [
            [(0, ErrorCode.NONE, False, ()), (3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False, ())],
            [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True, ()), (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True, ())],
            [(0, ErrorCode.INVALID_TOPIC_EXCEPTION, True, ())],
        ]

    broker.run(scenario, PROPERTIES)
