"""UpdateMetadata (6): the controller's view, the only source of a cluster broker's Metadata answers."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_cluster_request import DescribeClusterRequest
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.support.broker_harness import BrokerHarness, BrokerRunner, batch, produce_request
from tests.unit.broker.handlers.cluster import (
    CLUSTER,
    ME,
    RecordingAdmin,
    State,
    live_broker,
    update,
    update_metadata,
)

THREE = (live_broker(1, 9091, "r1"), live_broker(2, 9092, "r2"), live_broker(3, 9093, None))
ORDERS = uuid.uuid4()
# A 3-partition topic over three brokers; partition 2's leader (4) is not alive.
STATES = {
    ("orders", 0): State(leader=1, leader_epoch=3, replicas=(1, 2), isr=(1, 2), partition_epoch=7),
    ("orders", 1): State(leader=2, leader_epoch=0, replicas=(2, 3), isr=(2,), offline=(3,)),
    ("orders", 2): State(leader=4, leader_epoch=1, replicas=(4, 1), isr=(4,)),
}


async def _metadata(h: BrokerHarness, *names: str, version: int = 12, auto_create: bool = False) -> Any:
    topics = None if not names else tuple(MetadataRequestTopic(name=n) for n in names)
    allow = auto_create or version < 4  # the flag came in v4; before, it is always on
    return await h.request(MetadataRequest(topics=topics, allow_auto_topic_creation=allow), version=version)


def test_metadata_answers_what_update_metadata_said(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await update(h, STATES, THREE, topic_ids={"orders": ORDERS})
        response = await _metadata(h)
        assert [(b.node_id, b.host, b.port, b.rack) for b in response.brokers] == [
            (1, "127.0.0.1", 9091, "r1"), (2, "127.0.0.1", 9092, "r2"), (3, "127.0.0.1", 9093, None)]
        assert response.controller_id == 2
        (topic,) = response.topics
        assert (topic.error_code, topic.name, topic.topic_id, topic.is_internal) == (0, "orders", ORDERS, False)
        got = [(p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes,
                p.offline_replicas) for p in topic.partitions]
        assert got == [
            (0, 0, 1, 3, (1, 2), (1, 2), ()),
            (1, 0, 2, 0, (2, 3), (2,), (3,)),
            (2, ErrorCode.LEADER_NOT_AVAILABLE, -1, 1, (4, 1), (4,), ()),
        ]
        by_id = await h.request(MetadataRequest(topics=(MetadataRequestTopic(topic_id=ORDERS, name=None),)), version=12)
        assert by_id.topics[0].name == "orders"
        assert (await _metadata(h, "orders", version=1)).topics[0].partitions[0].leader_id == 1

    broker.run(scenario, CLUSTER)


def test_before_the_first_update_a_cluster_broker_knows_nothing(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await _metadata(h)
        assert (response.brokers, response.controller_id, response.topics) == ((), -1, ())
        (unknown,) = (await _metadata(h, "orders")).topics
        assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.run(scenario, CLUSTER)


def test_metadata_v0_lists_live_replicas_only(broker: BrokerRunner) -> None:
    """Kafka's errorUnavailableEndpoints: v0 leaves dead replicas out and says so."""

    async def scenario(h: BrokerHarness) -> None:
        await update(h, {("t", 0): State(leader=1, leader_epoch=0, replicas=(1, 5), isr=(1, 5))}, THREE)
        (p0,) = (await _metadata(h, "t", version=0)).topics[0].partitions
        assert (p0.error_code, p0.leader_id, p0.replica_nodes, p0.isr_nodes) == (
            ErrorCode.REPLICA_NOT_AVAILABLE, 1, (1,), (1,))
        (p1,) = (await _metadata(h, "t", version=1)).topics[0].partitions
        assert (p1.error_code, p1.replica_nodes) == (0, (1, 5))

    broker.run(scenario, CLUSTER)


def test_updates_merge_and_a_deleted_partition_goes(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await update(h, STATES, THREE, topic_ids={"orders": ORDERS})
        # Only partition 2 changes: the others stay as they were; brokers are replaced.
        await update(h, {("orders", 2): State(leader=1, leader_epoch=2, replicas=(4, 1), isr=(1,))},
                     (THREE[0], THREE[2]), controller_id=1, topic_ids={"orders": ORDERS})
        response = await _metadata(h, "orders")
        assert [b.node_id for b in response.brokers] == [1, 3] and response.controller_id == 1
        assert [p.leader_id for p in response.topics[0].partitions] == [1, -1, 1]  # 2's leader is gone
        deleting = {key: State(leader=-2, leader_epoch=0) for key in STATES}
        await update(h, dict(list(deleting.items())[:2]), THREE)
        assert [p.partition_index for p in (await _metadata(h, "orders")).topics[0].partitions] == [2]
        await update(h, dict(list(deleting.items())[2:]), THREE)
        assert (await _metadata(h, "orders")).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert h.broker.metadata.by_id(ORDERS) is None

    broker.run(scenario, CLUSTER)


@pytest.mark.parametrize("version", range(9))
def test_every_version_is_read(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await update(h, STATES, THREE, topic_ids={"orders": ORDERS}, version=version)
        response = await _metadata(h, "orders")
        assert [(b.node_id, b.port) for b in response.brokers] == [(1, 9091), (2, 9092), (3, 9093)]
        assert [b.rack for b in response.brokers] == (["r1", "r2", None] if version >= 2 else [None] * 3)
        (topic,) = response.topics
        assert topic.topic_id == (ORDERS if version >= 7 else uuid.UUID(int=0))  # topic ids came in v7
        assert [p.leader_id for p in topic.partitions] == [1, 2, -1]
        assert topic.partitions[1].offline_replicas == ((3,) if version >= 4 else ())  # offline replicas: v4

    broker.run(scenario, CLUSTER)


def test_a_stale_controller_or_broker_epoch_changes_nothing(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        h.broker.broker_epoch = 50
        await update(h, STATES, THREE, controller_epoch=3, broker_epoch=50)
        gone = {key: State(leader=-2, leader_epoch=0) for key in STATES}
        stale_controller = await h.request(update_metadata(gone, (), controller_epoch=2), version=8)
        assert stale_controller.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        stale_broker = await h.request(update_metadata(gone, (), controller_epoch=3, broker_epoch=49), version=8)
        assert stale_broker.error_code == ErrorCode.STALE_BROKER_EPOCH
        response = await _metadata(h, "orders")
        assert len(response.brokers) == 3 and len(response.topics[0].partitions) == 3
        await update(h, gone, (), controller_epoch=4, broker_epoch=51)  # newer epochs: accepted
        assert (await _metadata(h)).topics == ()
        assert h.broker.replica_manager.controller_epoch == 4

    broker.run(scenario, CLUSTER)


def test_a_partition_known_to_the_cluster_but_not_hosted_here_is_not_led_here(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await update(h, STATES, THREE)

        async def produce(topic: str, partition: int) -> int:
            response = await h.request(produce_request(topic, partition, batch([b"v"]), acks=1), version=9)
            code: int = response.responses[0].partition_responses[0].error_code
            return code

        assert await produce("orders", 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await produce("orders", 3) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert await produce("nope", 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.run(scenario, CLUSTER)


@pytest.mark.parametrize(("refuse", "expected"), [
    (None, ErrorCode.LEADER_NOT_AVAILABLE),
    (ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.LEADER_NOT_AVAILABLE),  # someone else created it: same answer
    (ErrorCode.INVALID_REPLICATION_FACTOR, ErrorCode.INVALID_REPLICATION_FACTOR),
])
def test_auto_creation_asks_the_admin_manager_and_answers_leader_not_available(
        broker: BrokerRunner, refuse: ErrorCode | None, expected: ErrorCode) -> None:
    async def scenario(h: BrokerHarness) -> None:
        admin = RecordingAdmin(refuse=refuse)
        h.broker.admin_manager = admin  # type: ignore[assignment]
        (topic,) = (await _metadata(h, "fresh", auto_create=True)).topics
        assert (topic.name, topic.error_code, topic.partitions) == ("fresh", expected, ())
        assert admin.created == [("fresh", h.broker.config.num_partitions)]
        assert h.broker.metadata.get("fresh") is None  # only UpdateMetadata fills the cache
        (bad,) = (await _metadata(h, "bad/name", auto_create=True)).topics
        assert bad.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert len(admin.created) == 1

    broker.run(scenario, {**CLUSTER, "auto.create.topics.enable": "true"})


def test_describe_cluster_answers_the_live_brokers_and_controller(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await update(h, {}, THREE, controller_id=3)
        response = await h.request(DescribeClusterRequest(), version=1)
        assert response.controller_id == 3
        assert [(b.broker_id, b.port, b.rack) for b in response.brokers] == [
            (1, 9091, "r1"), (2, 9092, "r2"), (3, 9093, None)]

    broker.run(scenario, CLUSTER)


def test_a_single_node_answers_metadata_as_before(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", 2)
        response = await _metadata(h, "t")
        assert [(b.node_id, b.host) for b in response.brokers] == [(ME, "127.0.0.1")]
        assert response.controller_id == ME
        assert [(p.leader_id, p.isr_nodes) for p in response.topics[0].partitions] == [(ME, (ME,))] * 2

    broker.run(scenario)


def test_auto_creating_the_offsets_topic_uses_its_own_settings_once_enough_brokers_live(broker: BrokerRunner) -> None:
    """As Kafka's AutoTopicCreationManager: ``__consumer_offsets`` asked for in Metadata gets
    offsets.topic.num.partitions and offsets.topic.replication.factor, and is not created
    while fewer brokers live than that factor."""
    async def scenario(h: BrokerHarness) -> None:
        admin = RecordingAdmin()
        h.broker.admin_manager = admin  # type: ignore[assignment]
        await update(h, {}, THREE[:1])
        (topic,) = (await _metadata(h, "__consumer_offsets", auto_create=True)).topics
        assert (topic.error_code, topic.is_internal) == (ErrorCode.LEADER_NOT_AVAILABLE, True)
        assert admin.created == []  # one broker alive, the factor is 3
        await update(h, {}, THREE)
        await _metadata(h, "__consumer_offsets", auto_create=True)
        assert admin.created == [("__consumer_offsets", 7)]

    broker.run(scenario, {**CLUSTER, "auto.create.topics.enable": "true", "offsets.topic.num.partitions": "7",
                          "offsets.topic.replication.factor": "3"})
