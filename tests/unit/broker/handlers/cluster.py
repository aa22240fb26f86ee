"""A broker in cluster mode and the controller's requests to it, for the control handlers' tests.

The broker is the real ``Broker`` with ``zookeeper.connect`` set: it answers LeaderAndIsr,
StopReplica and UpdateMetadata, and hosts nothing until told. None of these code paths
touches ZooKeeper (nothing listens at the address given). The requests are built the
way Kafka's controller builds them, in the newest versions Kafka 3.9 sends unless a
test asks for another.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strom.broker.metadata_cache import TopicError, TopicMetadata
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.leader_and_isr_request import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from strom.protocol.messages.stop_replica_request import (
    StopReplicaPartitionState,
    StopReplicaPartitionV0,
    StopReplicaRequest,
    StopReplicaTopicState,
    StopReplicaTopicV1,
)
from strom.protocol.messages.update_metadata_request import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from strom.protocol.topic_partition import TopicPartition
from tests.support.broker_harness import BrokerHarness

ME = 1  # the broker under test (node.id's default)
CONTROLLER = 2
CLUSTER: Mapping[str, str] = {"zookeeper.connect": "127.0.0.1:1/strom-unit-tests", "node.id": str(ME)}
LEADER_AND_ISR_V, STOP_REPLICA_V, UPDATE_METADATA_V = 7, 4, 8  # what Kafka 3.9's controller sends
ZERO_ID = uuid.UUID(int=0)


def topic_id_of(topic: str) -> uuid.UUID:
    """The id a test topic gets when the test names none (the controller always sends one)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"strom-test/{topic}")


@dataclass(frozen=True)
class State:
    """One partition's leadership, as the controller decides it."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...] = (ME,)
    isr: tuple[int, ...] | None = None  # None: the replicas
    partition_epoch: int = 0
    offline: tuple[int, ...] = ()

    @property
    def in_sync(self) -> tuple[int, ...]:
        return self.replicas if self.isr is None else self.isr


@dataclass
class Listener:
    """A leadership listener that records what it hears."""

    calls: list[tuple[list[TopicPartition], list[TopicPartition]]] = field(default_factory=list)

    def __call__(self, now_leading: Sequence[TopicPartition], stopped_leading: Sequence[TopicPartition]) -> None:
        self.calls.append((list(now_leading), list(stopped_leading)))


def leader_and_isr(states: Mapping[TopicPartition, State], *, controller_epoch: int = 1, broker_epoch: int = -1,
                   topic_ids: Mapping[str, uuid.UUID] | None = None, version: int = LEADER_AND_ISR_V
                   ) -> LeaderAndIsrRequest:
    def state(topic: str, index: int, s: State) -> LeaderAndIsrPartitionState:
        return LeaderAndIsrPartitionState(
            topic_name=topic if version < 2 else "", partition_index=index, controller_epoch=controller_epoch,
            leader=s.leader, leader_epoch=s.leader_epoch, isr=s.in_sync, partition_epoch=s.partition_epoch,
            replicas=s.replicas, is_new=True)

    if version < 2:
        return LeaderAndIsrRequest(controller_id=CONTROLLER, controller_epoch=controller_epoch, ungrouped_partition_states=tuple(
            state(t, i, s) for (t, i), s in states.items()))
    by_topic: dict[str, list[LeaderAndIsrPartitionState]] = {}
    for (topic, index), s in states.items():
        by_topic.setdefault(topic, []).append(state(topic, index, s))
    ids = topic_ids or {}
    return LeaderAndIsrRequest(
        controller_id=CONTROLLER, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=tuple(LeaderAndIsrTopicState(topic, ids.get(topic, topic_id_of(topic)), tuple(parts))
                           for topic, parts in by_topic.items()))


def live_broker(broker_id: int, port: int, rack: str | None = None) -> UpdateMetadataBroker:
    return UpdateMetadataBroker(id=broker_id, v0_host="127.0.0.1", v0_port=port, rack=rack, endpoints=(
        UpdateMetadataEndpoint(port=port, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0),))


def update_metadata(states: Mapping[TopicPartition, State], live: Sequence[UpdateMetadataBroker], *,
                    controller_id: int = CONTROLLER, controller_epoch: int = 1, broker_epoch: int = -1,
                    topic_ids: Mapping[str, uuid.UUID] | None = None, version: int = UPDATE_METADATA_V
                    ) -> UpdateMetadataRequest:
    def state(topic: str, index: int, s: State) -> UpdateMetadataPartitionState:
        return UpdateMetadataPartitionState(
            topic_name=topic if version < 5 else "", partition_index=index, controller_epoch=controller_epoch,
            leader=s.leader, leader_epoch=s.leader_epoch, isr=s.in_sync, zk_version=s.partition_epoch,
            replicas=s.replicas, offline_replicas=s.offline)

    common: dict[str, Any] = {"controller_id": controller_id, "controller_epoch": controller_epoch,
                              "broker_epoch": broker_epoch, "live_brokers": tuple(live)}
    if version < 5:
        return UpdateMetadataRequest(**common, ungrouped_partition_states=tuple(
            state(t, i, s) for (t, i), s in states.items()))
    by_topic: dict[str, list[UpdateMetadataPartitionState]] = {}
    for (topic, index), s in states.items():
        by_topic.setdefault(topic, []).append(state(topic, index, s))
    ids = topic_ids or {}
    return UpdateMetadataRequest(**common, topic_states=tuple(
        UpdateMetadataTopicState(topic, ids.get(topic, ZERO_ID), tuple(parts)) for topic, parts in by_topic.items()))


def stop_replica(partitions: Mapping[TopicPartition, int], *, delete: bool = False, controller_epoch: int = 1,
                 broker_epoch: int = -1, version: int = STOP_REPLICA_V) -> StopReplicaRequest:
    """StopReplica of ``{(topic, partition): leader epoch}`` (the epoch travels from v3)."""
    common: dict[str, Any] = {"controller_id": CONTROLLER, "controller_epoch": controller_epoch,
                              "broker_epoch": broker_epoch}
    if version == 0:
        return StopReplicaRequest(**common, delete_partitions=delete, ungrouped_partitions=tuple(
            StopReplicaPartitionV0(t, i) for t, i in partitions))
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, index), epoch in partitions.items():
        by_topic.setdefault(topic, []).append((index, epoch))
    if version < 3:
        return StopReplicaRequest(**common, delete_partitions=delete, topics=tuple(
            StopReplicaTopicV1(topic, tuple(i for i, _ in parts)) for topic, parts in by_topic.items()))
    return StopReplicaRequest(**common, topic_states=tuple(
        StopReplicaTopicState(topic, tuple(StopReplicaPartitionState(i, epoch, delete) for i, epoch in parts))
        for topic, parts in by_topic.items()))


async def become(h: BrokerHarness, states: Mapping[TopicPartition, State], **kwargs: Any) -> dict[TopicPartition, int]:
    """Send a LeaderAndIsr (v7) that must be accepted as a whole; each partition's error code."""
    response = await h.request(leader_and_isr(states, **kwargs), version=kwargs.get("version", LEADER_AND_ISR_V))
    assert response.error_code == ErrorCode.NONE
    ids = kwargs.get("topic_ids") or {topic: topic_id_of(topic) for topic, _ in states}
    return leader_and_isr_errors(response, ids)


def leader_and_isr_errors(response: Any, topic_ids: Mapping[str, uuid.UUID] | None = None) -> dict[TopicPartition, int]:
    """A LeaderAndIsr answer's partition errors by (topic, partition), whatever its version."""
    if response.partition_errors:  # v0-4
        return {(p.topic_name, p.partition_index): p.error_code for p in response.partition_errors}
    names = {topic_id: name for name, topic_id in (topic_ids or {}).items()}
    return {(names.get(t.topic_id, f"topic id {t.topic_id}"), p.partition_index): p.error_code
            for t in response.topics for p in t.partition_errors}


async def update(h: BrokerHarness, states: Mapping[TopicPartition, State], live: Sequence[UpdateMetadataBroker],
                 **kwargs: Any) -> None:
    """Send an UpdateMetadata (v8) that must be accepted."""
    response = await h.request(update_metadata(states, live, **kwargs), version=kwargs.get("version", UPDATE_METADATA_V))
    assert response.error_code == ErrorCode.NONE


@dataclass
class RecordingAdmin:
    """Stands in for the cluster's AdminManager (which writes ZooKeeper): records what it is asked."""

    created: list[tuple[str, int]] = field(default_factory=list)
    refuse: ErrorCode | None = None

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None, *,
                     validate_only: bool = False, replication_factor: int = -1,
                     assignment: object = None) -> TopicMetadata:
        self.created.append((name, partitions))
        if self.refuse is not None:
            raise TopicError(self.refuse, "refused")
        return TopicMetadata(name, uuid.uuid4(), partitions)

    async def wait_for_leaders(self, wanted: object, timeout_ms: int) -> set[str]:
        return set()  # nothing is placed anywhere: nothing to wait for
