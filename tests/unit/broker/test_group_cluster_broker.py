"""Groups on a cluster-mode broker: the real ``Broker`` in-process with ``zookeeper.connect``
set (nothing here talks to ZooKeeper), its metadata cache and leadership set through the
ReplicaManager's controller-facing methods exactly as the UpdateMetadata, LeaderAndIsr
and StopReplica handlers apply them, and the group APIs exercised as a client sends them.

The coordinator loads an offsets partition this broker is made leader of, answers
NOT_COORDINATOR once another broker leads it, and finds the offsets committed before
that in the log when it leads again."""

from __future__ import annotations

import itertools
import uuid

from strom.broker.group.offsets_topic import OFFSETS_TOPIC, partition_for
from strom.broker.metadata_cache import BrokerEndpoint, LiveBroker, MetadataCache, PartitionState
from strom.broker.replica_manager import LeaderAndIsrPartition, StopReplicaPartition
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_groups_request import DescribeGroupsRequest
from strom.protocol.messages.list_groups_request import ListGroupsRequest
from strom.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from strom.protocol.topic_partition import TopicPartition
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.broker_harness import broker as broker
from tests.unit.broker.handlers.groups import commit, committed, stable_member

ME, OTHER = 1, 2
PARTITIONS = 3
CLUSTER = {
    "zookeeper.connect": "127.0.0.1:1/never-contacted",
    "broker.id": str(ME),
    "offsets.topic.num.partitions": str(PARTITIONS),
    "offsets.topic.replication.factor": "1",
}
OFFSETS_ID, TOPIC_ID = uuid.uuid4(), uuid.uuid4()
BROKERS = [LiveBroker(ME, (BrokerEndpoint("127.0.0.1", 9001),)), LiveBroker(OTHER, (BrokerEndpoint("127.0.0.2", 9002),))]
controller_epochs = itertools.count(1)


def group_on(partition: int) -> str:
    return next(g for g in (f"group-{i}" for i in itertools.count()) if partition_for(g, PARTITIONS) == partition)


def update_metadata(h: BrokerHarness, leaders: dict[int, int]) -> None:
    """UpdateMetadata: topic ``t`` (one partition, led here) and the offsets topic's ``leaders``."""
    states: list[tuple[TopicPartition, PartitionState]] = [(("t", 0), PartitionState(ME, 0, (ME,), (ME,)))]
    states += [((OFFSETS_TOPIC, p), PartitionState(leader, 0, (leader,), (leader,))) for p, leader in leaders.items()]

    def apply(cache: MetadataCache) -> list[TopicPartition]:
        return cache.update_metadata(ME, BROKERS, states, {"t": TOPIC_ID, OFFSETS_TOPIC: OFFSETS_ID})

    assert h.broker.replica_manager.maybe_update_metadata_cache(next(controller_epochs), apply)[0] == ErrorCode.NONE


def leader_and_isr(h: BrokerHarness, leader: int, leader_epoch: int, *partitions: int) -> None:
    states = [
        LeaderAndIsrPartition(OFFSETS_TOPIC, p, leader, leader_epoch, (leader,), (ME, OTHER), topic_id=OFFSETS_ID)
        for p in partitions
    ]
    error, errors = h.broker.replica_manager.become_leader_or_follower(next(controller_epochs), states)
    assert error == ErrorCode.NONE and set(errors.values()) == {ErrorCode.NONE}


async def fetch_error(h: BrokerHarness, group: str) -> int:
    request = OffsetFetchRequest(group_id=group, topics=(OffsetFetchRequestTopic("t", (0,)),))
    error: int = (await h.request(request, version=7)).error_code
    return error


def test_offsets_follow_the_leadership_of_their_partition(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        coordinator = h.broker.group_coordinator
        group, elsewhere = group_on(0), group_on(1)
        update_metadata(h, {0: ME, 1: ME, 2: ME})
        assert await fetch_error(h, group) == ErrorCode.NOT_COORDINATOR  # not led here yet

        leader_and_isr(h, ME, 0, 0, 1)
        # Right after the LeaderAndIsr, before the load ran: the partitions are loading.
        assert coordinator.fetch_offsets(group, None) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, {})
        await coordinator.manager.wait_for_loads()
        member, generation = await stable_member(h, group)
        assert await commit(h, group, {("t", 0): 42}, generation=generation, member=member) == {
            ("t", 0): ErrorCode.NONE}
        assert await commit(h, elsewhere, {("t", 0): 7}) == {("t", 0): ErrorCode.NONE}

        leader_and_isr(h, OTHER, 1, 0)  # the controller moves partition 0 to broker 2
        assert await fetch_error(h, group) == ErrorCode.NOT_COORDINATOR
        v1 = await h.request(OffsetFetchRequest(group_id=group, topics=(OffsetFetchRequestTopic("t", (0,)),)), version=1)
        assert [(p.partition_index, p.committed_offset, p.error_code) for t in v1.topics for p in t.partitions] == [
            (0, -1, ErrorCode.NOT_COORDINATOR)]  # v0-v1 carry the error per partition, as Kafka
        (described,) = (await h.request(DescribeGroupsRequest(groups=(group,)), version=5)).groups
        assert (described.error_code, described.group_state, described.members) == (ErrorCode.NOT_COORDINATOR, "", ())
        assert await commit(h, group, {("t", 0): 43}, generation=generation, member=member) == {
            ("t", 0): ErrorCode.NOT_COORDINATOR}
        listed = await h.request(ListGroupsRequest(), version=4)
        assert [g.group_id for g in listed.groups] == [elsewhere]  # only partition 1's groups are ours
        assert await committed(h, elsewhere, "t", (0,)) == {0: 7}

        leader_and_isr(h, ME, 2, 0)  # and back
        assert coordinator.fetch_offsets(group, None)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await coordinator.manager.wait_for_loads()
        assert await committed(h, group, "t", (0,)) == {0: 42}
        listed = await h.request(ListGroupsRequest(), version=4)
        assert sorted(g.group_id for g in listed.groups) == sorted([group, elsewhere])

        # StopReplica (no deletion, as a controlled shutdown or a reassignment sends it).
        error, _ = h.broker.replica_manager.stop_replicas(
            next(controller_epochs), [StopReplicaPartition(OFFSETS_TOPIC, 1, leader_epoch=1)])
        assert error == ErrorCode.NONE
        assert await fetch_error(h, elsewhere) == ErrorCode.NOT_COORDINATOR
        assert await fetch_error(h, group) == ErrorCode.NONE

    broker.run(scenario, CLUSTER)
