"""FindCoordinator (10) on a cluster-mode broker (``zookeeper.connect`` set, never contacted):
the coordinator is the live leader of the group's ``__consumer_offsets`` partition as the
controller's UpdateMetadata described it, and a missing offsets topic is created through
the broker's AdminManager (ZooKeeper's, in a real cluster; a recorder here, as the
topic's creation is not what these tests are about) once enough brokers are alive."""

from __future__ import annotations

import itertools

from strom.broker.group.offsets_topic import OFFSETS_TOPIC, partition_for
from strom.broker.metadata_cache import (
    TopicError,
)
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.cluster_metadata import (
    BROKERS,
    CLUSTER,
    GONE,
    ME,
    OTHER,
    PARTITIONS,
    RecordingAdmin,
    update_metadata,
)

NOT_AVAILABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)


def group_on(partition: int) -> str:
    return next(g for g in (f"group-{i}" for i in itertools.count()) if partition_for(g, PARTITIONS) == partition)


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
