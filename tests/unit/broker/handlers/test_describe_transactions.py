"""DescribeTransactions (65) on one broker, beside the differential test against Kafka 3.9
(tests/differential/test_txn_admin.py): ``__transaction_state`` created by Metadata (on
one node and in a cluster), the answers before it exists, and a transaction in
PrepareCommit (its markers held back)."""

from __future__ import annotations

import asyncio

from strom.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC, TransactionState
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.txn_requests import PROPERTIES, HeldMarkers, add, end, init, state_of
from tests.unit.broker.handlers.cluster_metadata import (
    BROKERS,
    CLUSTER,
    RecordingAdmin,
    update_metadata,
)
from tests.unit.broker.handlers.txn_admin_requests import describe, listed


def test_metadata_creates_the_transaction_state_topic_with_its_own_settings(broker: BrokerRunner) -> None:
    """As Kafka's AutoTopicCreationManager: asked for by name, it is made as the coordinator makes it."""
    async def scenario(h: BrokerHarness) -> None:
        request = MetadataRequest(topics=(MetadataRequestTopic(name=TRANSACTION_STATE_TOPIC),),
                                  allow_auto_topic_creation=True)
        (topic,) = (await h.request(request, version=12)).topics
        assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (ErrorCode.NONE, True, 3)
        assert h.broker.log_manager.logs[(TRANSACTION_STATE_TOPIC, 0)].config.cleanup_policy == "compact"
        (state,) = await describe(h, "unknown")  # its partitions are coordinated here at once
        assert state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND

    broker.run(scenario, {"transaction.state.log.num.partitions": "3"})


def test_before_the_topic_exists(broker: BrokerRunner) -> None:
    """No ``__transaction_state``: NOT_COORDINATOR (as Kafka, which owns no partition yet), and
    describing creates nothing; an empty id is INVALID_REQUEST; an error's entry has the
    schema's defaults."""
    async def scenario(h: BrokerHarness) -> None:
        not_led, empty = await describe(h, "tx", "")
        assert (not_led.error_code, not_led.transactional_id, not_led.transaction_state, not_led.topics) == (
            ErrorCode.NOT_COORDINATOR, "tx", "", ())
        assert empty.error_code == ErrorCode.INVALID_REQUEST
        assert h.broker.metadata.get(TRANSACTION_STATE_TOPIC) is None

    broker.run(scenario, PROPERTIES)


def test_a_prepared_commit_shows_its_partitions_until_it_completes(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        channel = h.broker.transaction_coordinator.marker_channel
        held = channel.write_markers = HeldMarkers(channel.write_markers)
        await h.create_topic("t", partitions=2)
        await h.create_topic("a")
        producer = ((await init(h, "tx")).producer_id, 0)
        assert await add(h, "tx", producer, [("t", 1), ("t", 0), ("a", 0)]) == {("t", 0): 0, ("t", 1): 0, ("a", 0): 0}
        assert await end(h, "tx", producer, committed=True) == ErrorCode.NONE
        (prepared,) = await describe(h, "tx")
        assert (prepared.error_code, prepared.transaction_state, prepared.producer_id, prepared.producer_epoch,
                prepared.transaction_timeout_ms) == (ErrorCode.NONE, "PrepareCommit", producer[0], 0, 60000)
        assert [(t.topic, t.partitions) for t in prepared.topics] == [("a", (0,)), ("t", (0, 1))]
        assert prepared.transaction_start_time_ms > 0
        held.released = True
        for _ in range(1000):
            if state_of(h, "tx") == TransactionState.COMPLETE_COMMIT:
                break
            await asyncio.sleep(0.01)
        (complete,) = await describe(h, "tx")
        assert (complete.transaction_state, complete.topics) == ("CompleteCommit", ())
        assert complete.transaction_start_time_ms == prepared.transaction_start_time_ms  # kept, as Kafka

    broker.run(scenario, PROPERTIES)


def test_in_a_cluster_metadata_asks_for_the_topic_and_no_partition_is_coordinated_yet(broker: BrokerRunner) -> None:
    """Cluster mode: Metadata has the topic created (with its settings, once enough brokers
    live) and answers LEADER_NOT_AVAILABLE until the controller elects its leaders; with no
    partition of it led here, DescribeTransactions is NOT_COORDINATOR and ListTransactions
    lists nothing."""
    async def scenario(h: BrokerHarness) -> None:
        admin = RecordingAdmin()
        h.broker.admin_manager = admin  # type: ignore[assignment]
        request = MetadataRequest(topics=(MetadataRequestTopic(name=TRANSACTION_STATE_TOPIC),),
                                  allow_auto_topic_creation=True)
        update_metadata(h, BROKERS[:1], {})
        (topic,) = (await h.request(request, version=12)).topics
        assert (topic.error_code, topic.is_internal, admin.created) == (ErrorCode.LEADER_NOT_AVAILABLE, True, [])
        update_metadata(h, BROKERS, {})
        (topic,) = (await h.request(request, version=12)).topics
        assert (topic.error_code, topic.is_internal) == (ErrorCode.LEADER_NOT_AVAILABLE, True)
        ((name, partitions, configs, replication_factor),) = admin.created
        assert (name, partitions, configs["cleanup.policy"], replication_factor) == (
            TRANSACTION_STATE_TOPIC, 3, "compact", 2)
        (state,) = await describe(h, "tx")
        assert state.error_code == ErrorCode.NOT_COORDINATOR
        nothing = await listed(h)
        assert (nothing.error_code, nothing.transaction_states) == (ErrorCode.NONE, ())

    broker.run(scenario, {**CLUSTER, "transaction.state.log.num.partitions": "3",
                          "transaction.state.log.replication.factor": "2"})
