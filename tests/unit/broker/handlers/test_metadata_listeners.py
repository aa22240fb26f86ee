"""Metadata, FindCoordinator and DescribeCluster in cluster mode answer with the endpoints of
the listener the client connected through (Kafka's ``request.context.listenerName``): a broker
without it is left out, a leader without it is LISTENER_NOT_FOUND (v6+, LEADER_NOT_AVAILABLE
before), and v0 leaves out replicas not reachable on it (REPLICA_NOT_AVAILABLE)."""

from __future__ import annotations

from strom.broker import request_context
from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_cluster_request import DescribeClusterRequest
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from strom.protocol.messages.update_metadata_request import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.cluster import CLUSTER, State, update

PROPERTIES = {**CLUSTER, "listeners": "PLAINTEXT://127.0.0.1:0,CLIENT://127.0.0.1:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT",
              "offsets.topic.num.partitions": "1"}


def _broker(broker_id: int, *listeners: str) -> UpdateMetadataBroker:
    """Broker ``broker_id`` reachable at 10.0.0.<id>:<9000 + index> on each of ``listeners``."""
    return UpdateMetadataBroker(id=broker_id, endpoints=tuple(
        UpdateMetadataEndpoint(port=9000 + index, host=f"10.0.0.{broker_id}", listener=name, security_protocol=0)
        for index, name in enumerate(listeners)))


LIVE = (_broker(1, "PLAINTEXT", "CLIENT"), _broker(2, "PLAINTEXT", "CLIENT"), _broker(3, "PLAINTEXT"))
STATES = {("t", 0): State(leader=1, leader_epoch=1, replicas=(1, 3), isr=(1, 3)),
          ("t", 1): State(leader=3, leader_epoch=2, replicas=(3, 2), isr=(3, 2)),
          (OFFSETS_TOPIC, 0): State(leader=3, leader_epoch=0, replicas=(3,))}
TOPIC = (MetadataRequestTopic(name="t"),)


async def _partitions(h: BrokerHarness, version: int) -> list[tuple[int, int, int, tuple[int, ...]]]:
    body = MetadataRequest(topics=TOPIC, allow_auto_topic_creation=version < 4)  # the flag came in v4
    response = await h.request(body, version=version)
    (topic,) = response.topics
    return [(p.partition_index, p.error_code, p.leader_id, tuple(p.replica_nodes)) for p in topic.partitions]


def test_answers_follow_the_connections_listener(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await update(h, STATES, LIVE)
        request_context.listener_name.set("CLIENT")
        response = await h.request(MetadataRequest(topics=TOPIC, allow_auto_topic_creation=False), version=12)
        assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "10.0.0.1", 9001), (2, "10.0.0.2", 9001)]
        assert await _partitions(h, 12) == [(0, ErrorCode.NONE, 1, (1, 3)), (1, ErrorCode.LISTENER_NOT_FOUND, -1, (3, 2))]
        assert await _partitions(h, 5) == [(0, ErrorCode.NONE, 1, (1, 3)), (1, ErrorCode.LEADER_NOT_AVAILABLE, -1, (3, 2))]
        assert await _partitions(h, 0) == [(0, ErrorCode.REPLICA_NOT_AVAILABLE, 1, (1,)),
                                           (1, ErrorCode.LEADER_NOT_AVAILABLE, -1, (2,))]
        cluster = await h.request(DescribeClusterRequest(), version=0)
        assert [(b.broker_id, b.port) for b in cluster.brokers] == [(1, 9001), (2, 9001)]
        found = await h.request(FindCoordinatorRequest(key="g"), version=3)  # __consumer_offsets-0 is led by 3
        assert (found.error_code, found.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)

        request_context.listener_name.set("PLAINTEXT")  # the remembered CLIENT answers must not leak through
        response = await h.request(MetadataRequest(topics=TOPIC, allow_auto_topic_creation=False), version=12)
        assert [(b.node_id, b.port) for b in response.brokers] == [(1, 9000), (2, 9000), (3, 9000)]
        assert await _partitions(h, 12) == [(0, ErrorCode.NONE, 1, (1, 3)), (1, ErrorCode.NONE, 3, (3, 2))]
        cluster = await h.request(DescribeClusterRequest(), version=0)
        assert [b.broker_id for b in cluster.brokers] == [1, 2, 3]
        found = await h.request(FindCoordinatorRequest(key="g"), version=3)
        assert (found.error_code, found.node_id, found.host, found.port) == (ErrorCode.NONE, 3, "10.0.0.3", 9000)

    broker.run(scenario, PROPERTIES)
