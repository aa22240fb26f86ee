"""FindCoordinator (10) on a cluster-mode broker (``zookeeper.connect`` set, never contacted):
the coordinator is the live leader of the group's ``__consumer_offsets`` partition as the
controller's UpdateMetadata described it, and a missing offsets topic is created through
the broker's AdminManager (ZooKeeper's, in a real cluster; a recorder here, as the
topic's creation is not what these tests are about) once enough brokers are alive."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping

from strom.broker.group.offsets_topic import OFFSETS_TOPIC, partition_for
from strom.broker.metadata_cache import (
    BrokerEndpoint,
    LiveBroker,
    MetadataCache,
    PartitionState,
    TopicError,
)
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.topic_partition import TopicPartition
from tests.support.broker_harness import BrokerHarness, BrokerRunner

ME, OTHER, GONE = 1, 2, 3
PARTITIONS = 3
CLUSTER = {
    "zookeeper.connect": "127.0.0.1:1/never-contacted",
    "broker.id": str(ME),
    "offsets.topic.num.partitions": str(PARTITIONS),
    "offsets.topic.replication.factor": "2",
    "offsets.topic.segment.bytes": "1048576",
}
BROKERS = [LiveBroker(ME, (BrokerEndpoint("127.0.0.1", 9001),)), LiveBroker(OTHER, (BrokerEndpoint("127.0.0.2", 9002),))]
NOT_AVAILABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
controller_epochs = itertools.count(1)


class RecordingAdmin:
    """Stands in for the cluster's AdminManager: records each creation, or refuses it."""

    def __init__(self, refuse: KafkaException | None = None) -> None:
        self.created: list[tuple[str, int, dict[str, str], int]] = []
        self.refuse = refuse

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None, *,
                     replication_factor: int = -1) -> None:
        self.created.append((name, partitions, dict(configs or {}), replication_factor))
        if self.refuse is not None:
            raise self.refuse


def group_on(partition: int) -> str:
    return next(g for g in (f"group-{i}" for i in itertools.count()) if partition_for(g, PARTITIONS) == partition)


def update_metadata(h: BrokerHarness, brokers: list[LiveBroker], leaders: Mapping[int, int]) -> None:
    states: list[tuple[TopicPartition, PartitionState]] = [
        ((OFFSETS_TOPIC, p), PartitionState(leader, 0, (leader,), (leader,))) for p, leader in leaders.items()]

    def apply(cache: MetadataCache) -> list[TopicPartition]:
        return cache.update_metadata(ME, brokers, states, {OFFSETS_TOPIC: uuid.uuid4()} if leaders else {})

    assert h.broker.replica_manager.maybe_update_metadata_cache(next(controller_epochs), apply)[0] == ErrorCode.NONE


async def find(h: BrokerHarness, *groups: str) -> list[tuple[int, int, str, int]]:
    response = await h.request(FindCoordinatorRequest(key_type=0, coordinator_keys=groups), version=4)
    return [(c.error_code, c.node_id, c.host, c.port) for c in response.coordinators]


def test_the_coordinator_is_the_live_leader_of_the_groups_offsets_partition(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        mine, others, leaderless = group_on(0), group_on(1), group_on(2)
        update_metadata(h, BROKERS, {0: ME, 1: OTHER, 2: -1})
        assert await find(h, mine, others, leaderless) == [
            (ErrorCode.NONE, ME, "127.0.0.1", 9001), (ErrorCode.NONE, OTHER, "127.0.0.2", 9002), NOT_AVAILABLE]
        v3 = await h.request(FindCoordinatorRequest(key=others), version=3)
        assert (v3.error_code, v3.node_id, v3.host, v3.port) == (ErrorCode.NONE, OTHER, "127.0.0.2", 9002)
        update_metadata(h, BROKERS, {1: GONE})  # a leader the controller does not list as alive
        assert await find(h, others) == [NOT_AVAILABLE]

    broker.run(scenario, CLUSTER)


def test_no_offsets_topic_is_created_while_fewer_brokers_live_than_its_replication_factor(
        broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        admin = RecordingAdmin()
        h.broker.admin_manager = admin  # type: ignore[assignment]
        assert await find(h, "g") == [NOT_AVAILABLE]  # no live broker known yet (no UpdateMetadata)
        update_metadata(h, BROKERS[:1], {})
        assert await find(h, "g") == [NOT_AVAILABLE]
        assert admin.created == []
        update_metadata(h, BROKERS, {})
        assert await find(h, "g") == [NOT_AVAILABLE]  # until the controller has elected its leaders
        assert admin.created == [
            (OFFSETS_TOPIC, PARTITIONS, {"cleanup.policy": "compact", "segment.bytes": "1048576"}, 2)]

    broker.run(scenario, CLUSTER)


def test_an_offsets_topic_another_broker_created_first_is_no_error(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        admin = RecordingAdmin(refuse=TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic exists."))
        h.broker.admin_manager = admin  # type: ignore[assignment]
        update_metadata(h, BROKERS, {})
        assert await find(h, "g", "h") == [NOT_AVAILABLE, NOT_AVAILABLE]
        assert len(admin.created) == 2
        update_metadata(h, BROKERS, dict.fromkeys(range(PARTITIONS), OTHER))
        assert await find(h, "g") == [(ErrorCode.NONE, OTHER, "127.0.0.2", 9002)]
        assert len(admin.created) == 2  # the topic is known now: nothing more to create

    broker.run(scenario, CLUSTER)


def test_zookeeper_out_of_reach_while_creating_is_coordinator_not_available(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        admin = RecordingAdmin(refuse=KafkaException("ZooKeeper at 127.0.0.1:1 unavailable for 18 s"))
        h.broker.admin_manager = admin  # type: ignore[assignment]
        update_metadata(h, BROKERS, {})
        assert await find(h, "g") == [NOT_AVAILABLE]
        assert len(admin.created) == 1

    broker.run(scenario, CLUSTER)
