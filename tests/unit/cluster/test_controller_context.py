"""ControllerContext: Kafka's meanings of live, shutting down, offline and deleting."""

from __future__ import annotations

import uuid

import pytest

from strom.cluster.controller_context import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    ControllerContext,
    PartitionAndReplica,
)
from strom.cluster.zk_data import (
    NO_LEADER,
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
)

ORDERS = uuid.UUID("6c2b7b3e-08a5-4c39-9b8a-6a4b7a9e0c11")
CLICKS = uuid.UUID("1f0e4d2c-3b5a-4978-8e6d-5c4b3a291807")


def broker(broker_id: int, epoch: int) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint("127.0.0.1", 9090 + broker_id),), epoch=epoch)


def led(leader: int, epoch: int = 0, isr: tuple[int, ...] = ()) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, isr or (leader,)), controller_epoch=3)


@pytest.fixture
def context() -> ControllerContext:
    context = ControllerContext()
    context.set_live_brokers([broker(1, 100), broker(2, 200), broker(3, 300)])
    context.add_topic("orders", TopicAssignment(ORDERS, {0: (1, 2), 1: (2, 3), 2: (3,)}))
    context.add_topic("clicks", TopicAssignment(CLICKS, {0: (1,)}))
    context.put_partition_leadership_info(("orders", 0), led(1, 4, (1, 2)))
    context.put_partition_leadership_info(("orders", 1), led(2, 1, (2, 3)))
    context.put_partition_leadership_info(("orders", 2), led(3))
    context.put_partition_leadership_info(("clicks", 0), led(1))
    return context


def test_live_excludes_shutting_down_brokers(context: ControllerContext) -> None:
    context.shutting_down_broker_ids.add(2)
    assert context.live_broker_ids == {1, 3}
    assert context.live_or_shutting_down_broker_ids == {1, 2, 3}
    assert [b.id for b in context.live_or_shutting_down_brokers] == [1, 2, 3]
    assert not context.is_replica_online(2, ("orders", 1))
    assert context.is_replica_online(2, ("orders", 1), include_shutting_down=True)
    assert context.live_broker_epochs == {1: 100, 2: 200, 3: 300}


def test_a_bounced_broker_replaces_its_registration(context: ControllerContext) -> None:
    context.remove_live_brokers([2])
    assert context.live_or_shutting_down_broker(2) is None
    with pytest.raises(KeyError):
        context.broker_epoch(2)
    context.add_live_brokers([broker(2, 250)])
    assert context.broker_epoch(2) == 250


def test_assignments_and_replica_queries(context: ControllerContext) -> None:
    assert context.partition_replica_assignment(("orders", 1)) == (2, 3)
    assert context.partition_replica_assignment(("orders", 9)) == ()
    assert context.all_partitions == {("orders", 0), ("orders", 1), ("orders", 2), ("clicks", 0)}
    assert context.partitions_for_topic("orders") == {("orders", 0), ("orders", 1), ("orders", 2)}
    assert context.partitions_on_broker(3) == {("orders", 1), ("orders", 2)}
    assert context.replicas_on_brokers([1]) == {
        PartitionAndReplica(("orders", 0), 1), PartitionAndReplica(("clicks", 0), 1)}
    assert list(context.partition_replica_assignment_for_topic("orders")) == [
        ("orders", 0), ("orders", 1), ("orders", 2)]
    assert context.topic_ids["orders"] == ORDERS and context.topic_name(CLICKS) == "clicks"


def test_online_and_offline_replicas_follow_the_live_brokers(context: ControllerContext) -> None:
    context.remove_live_brokers([3])
    online, offline = context.online_and_offline_replicas()
    assert offline == {PartitionAndReplica(("orders", 1), 3), PartitionAndReplica(("orders", 2), 3)}
    assert len(online) == 4


def test_partitions_led_by_a_broker_leave_out_single_replica_partitions(context: ControllerContext) -> None:
    # Kafka's partitionLeadersOnBroker: what controlled shutdown can move.
    assert context.partition_leaders_on_broker(1) == {("orders", 0)}
    assert context.partition_leaders_on_broker(3) == set()


def test_offline_partitions_are_those_whose_leader_is_not_live(context: ControllerContext) -> None:
    context.remove_live_brokers([3])
    context.put_partition_leadership_info(("clicks", 0), led(NO_LEADER, 1, (1,)))
    assert context.partitions_with_offline_leader == {("orders", 2), ("clicks", 0)}
    assert context.online_partitions == {("orders", 0), ("orders", 1)}


def test_topics_queued_for_deletion_leave_the_leadership_views(context: ControllerContext) -> None:
    context.remove_live_brokers([3])
    context.queue_topic_deletion(["orders"])
    assert context.is_topic_queued_up_for_deletion("orders")
    assert context.is_topic_eligible_for_deletion("orders")
    context.topics_ineligible_for_deletion.add("orders")
    assert not context.is_topic_eligible_for_deletion("orders")
    assert context.partitions_with_leaders == {("clicks", 0)}
    assert context.partitions_with_offline_leader == set()
    assert context.partition_leaders_on_broker(1) == set()
    assert context.leader_epoch(("orders", 0)) == EPOCH_DURING_DELETE
    assert context.leader_epoch(("clicks", 0)) == 0
    assert context.leader_epoch(("other", 0)) == NO_EPOCH
    context.begin_topic_deletion(["orders"])
    assert context.is_topic_deletion_in_progress("orders")


def test_remove_topic_forgets_everything_about_it(context: ControllerContext) -> None:
    context.queue_topic_deletion(["orders"])
    context.remove_topic("orders")
    assert context.all_topics == {"clicks"}
    assert "orders" not in context.topic_ids and context.topic_name(ORDERS) is None
    assert context.partition_leadership_info(("orders", 0)) is None
    assert context.partitions_for_topic("orders") == set()
    assert not context.is_topic_queued_up_for_deletion("orders")


def test_a_topic_id_cannot_change(context: ControllerContext) -> None:
    with pytest.raises(ValueError, match="did not match existing ID"):
        context.add_topic_id("orders", CLICKS)
    with pytest.raises(ValueError, match="not contained in all topics"):
        context.add_topic_id("unknown", uuid.uuid4())


def test_reset_forgets_the_term(context: ControllerContext) -> None:
    context.epoch, context.epoch_zk_version = 7, 6
    context.shutting_down_broker_ids.add(1)
    context.reset()
    assert (context.epoch, context.epoch_zk_version) == (0, 0)
    assert context.live_or_shutting_down_broker_ids == frozenset()
    assert context.all_partitions == set() and context.partitions_leadership_info == {}
    assert context.shutting_down_broker_ids == set()
