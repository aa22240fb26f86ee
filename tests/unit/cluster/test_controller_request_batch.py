"""ControllerRequestBatch builds Kafka's control requests field by field from the context.

Each request is checked as built and after an encode/decode round trip through the codec at
the version it is sent in, so what the test sees is what a broker would decode. The sender
is a recorder: the batch's job ends where the channel's begins (tests/cluster covers that).
"""

from __future__ import annotations

import uuid

import pytest

from strom.cluster.controller_channel import (
    LEADER_AND_ISR_VERSION,
    STOP_REPLICA_VERSION,
    UPDATE_METADATA_VERSION,
    ControllerRequestBatch,
    ResponseCallback,
)
from strom.cluster.controller_context import ControllerContext
from strom.cluster.zk_data import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
)
from strom.protocol.message import Message
from strom.protocol.messages.leader_and_isr_request import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from strom.protocol.messages.leader_and_isr_response import LeaderAndIsrResponse
from strom.protocol.messages.stop_replica_request import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from strom.protocol.messages.stop_replica_response import StopReplicaResponse
from strom.protocol.messages.update_metadata_request import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from strom.protocol.messages.update_metadata_response import UpdateMetadataResponse
from strom.protocol.topic_partition import TopicPartition

ORDERS = uuid.UUID("6c2b7b3e-08a5-4c39-9b8a-6a4b7a9e0c11")
DOOMED = uuid.UUID("1f0e4d2c-3b5a-4978-8e6d-5c4b3a291807")
CONTROLLER_ID = 2
CONTROLLER_EPOCH = 7
BROKERS = [
    BrokerInfo(1, (EndPoint("10.0.0.1", 9092), EndPoint("ext1.example", 9093, "EXTERNAL", "SSL")),
               rack="r1", epoch=101),
    BrokerInfo(2, (EndPoint("10.0.0.2", 9092),), epoch=202),
    BrokerInfo(3, (EndPoint("10.0.0.3", 9092),), rack="r3", epoch=303),
]


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[int, Message, int, ResponseCallback | None]] = []

    def send(self, broker_id: int, request: Message, version: int,
             callback: ResponseCallback | None = None) -> None:
        # What the broker gets is what survives the wire at this version.
        assert type(request).decode(version, request.encode(version)) == request
        self.sent.append((broker_id, request, version, callback))

    def kinds(self) -> list[tuple[str, int]]:
        return [(type(request).__name__, broker) for broker, request, _, _ in self.sent]


def led(leader: int, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, leader_epoch, isr, partition_epoch), controller_epoch=4)


@pytest.fixture
def context() -> ControllerContext:
    context = ControllerContext()
    context.set_live_brokers(BROKERS)
    context.add_topic("orders", TopicAssignment(ORDERS, {0: (1, 2), 1: (2, 3)}))
    context.add_topic("doomed", TopicAssignment(DOOMED, {0: (3, 1)}))
    context.put_partition_leadership_info(("orders", 0), led(1, 5, (1, 2), 9))
    context.put_partition_leadership_info(("orders", 1), led(2, 3, (2, 3), 4))
    context.put_partition_leadership_info(("doomed", 0), led(3, 6, (3, 1), 2))
    return context


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def batch(context: ControllerContext, recorder: Recorder) -> ControllerRequestBatch:
    return ControllerRequestBatch(CONTROLLER_ID, context, recorder)


LIVE_BROKERS = (
    UpdateMetadataBroker(id=1, rack="r1", endpoints=(
        UpdateMetadataEndpoint(port=9092, host="10.0.0.1", listener="PLAINTEXT", security_protocol=0),
        UpdateMetadataEndpoint(port=9093, host="ext1.example", listener="EXTERNAL", security_protocol=1))),
    UpdateMetadataBroker(id=2, rack=None, endpoints=(
        UpdateMetadataEndpoint(port=9092, host="10.0.0.2", listener="PLAINTEXT", security_protocol=0),)),
    UpdateMetadataBroker(id=3, rack="r3", endpoints=(
        UpdateMetadataEndpoint(port=9092, host="10.0.0.3", listener="PLAINTEXT", security_protocol=0),)),
)


def test_leader_and_isr_then_update_metadata_to_every_broker(
        batch: ControllerRequestBatch, recorder: Recorder, context: ControllerContext) -> None:
    batch.new_batch()
    batch.add_leader_and_isr([1, 2], ("orders", 0), led(1, 5, (1, 2), 9), (1, 2), is_new=True)
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert recorder.kinds() == [
        ("LeaderAndIsrRequest", 1), ("LeaderAndIsrRequest", 2),
        ("UpdateMetadataRequest", 1), ("UpdateMetadataRequest", 2), ("UpdateMetadataRequest", 3)]
    assert [version for _, _, version, _ in recorder.sent] == [LEADER_AND_ISR_VERSION] * 2 + [UPDATE_METADATA_VERSION] * 3
    partition_state = LeaderAndIsrPartitionState(
        partition_index=0, controller_epoch=4, leader=1, leader_epoch=5, isr=(1, 2),
        partition_epoch=9, replicas=(1, 2), adding_replicas=(), removing_replicas=(), is_new=True,
        leader_recovery_state=0)
    for (broker, request, _, _), epoch in zip(recorder.sent[:2], (101, 202), strict=True):
        assert request == LeaderAndIsrRequest(
            controller_id=CONTROLLER_ID, is_k_raft_controller=False, controller_epoch=CONTROLLER_EPOCH,
            broker_epoch=epoch, type=0,
            topic_states=(LeaderAndIsrTopicState("orders", ORDERS, (partition_state,)),),
            live_leaders=(LeaderAndIsrLiveLeader(broker_id=1, host_name="10.0.0.1", port=9092),)), broker
    expected_metadata = UpdateMetadataTopicState("orders", ORDERS, (UpdateMetadataPartitionState(
        partition_index=0, controller_epoch=4, leader=1, leader_epoch=5, isr=(1, 2), zk_version=9,
        replicas=(1, 2), offline_replicas=()),))
    for (broker, request, _, _), epoch in zip(recorder.sent[2:], (101, 202, 303), strict=True):
        assert request == UpdateMetadataRequest(
            controller_id=CONTROLLER_ID, controller_epoch=CONTROLLER_EPOCH, broker_epoch=epoch, type=0,
            topic_states=(expected_metadata,), live_brokers=LIVE_BROKERS), broker
    assert batch.is_empty


def test_live_leaders_use_the_controller_listener(context: ControllerContext, recorder: Recorder) -> None:
    batch = ControllerRequestBatch(CONTROLLER_ID, context, recorder, listener_name="EXTERNAL")
    batch.add_leader_and_isr([1], ("orders", 0), led(1, 5, (1, 2), 9), (1, 2))
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    request = recorder.sent[0][1]
    assert isinstance(request, LeaderAndIsrRequest)
    assert request.live_leaders == (LeaderAndIsrLiveLeader(1, "ext1.example", 9093),)


def test_is_new_sticks_and_leaders_are_listed_once(batch: ControllerRequestBatch, recorder: Recorder) -> None:
    batch.add_leader_and_isr([2], ("orders", 0), led(1, 5, (1, 2), 9), (1, 2), is_new=True)
    batch.add_leader_and_isr([2], ("orders", 0), led(1, 6, (1, 2), 10), (1, 2), is_new=False)
    batch.add_leader_and_isr([2, -1], ("orders", 1), led(2, 3, (2, 3), 4), (2, 3))
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    leader_and_isr = [r for b, r, _, _ in recorder.sent if isinstance(r, LeaderAndIsrRequest)]
    assert len(leader_and_isr) == 1
    [topic] = leader_and_isr[0].topic_states
    assert [(p.partition_index, p.leader_epoch, p.partition_epoch, p.is_new) for p in topic.partition_states] == [
        (0, 6, 10, True), (1, 3, 4, False)]
    assert [leader.broker_id for leader in leader_and_isr[0].live_leaders] == [1, 2]


def test_offline_replicas_and_unregistered_brokers(
        batch: ControllerRequestBatch, recorder: Recorder, context: ControllerContext) -> None:
    context.remove_live_brokers([3])
    batch.add_leader_and_isr([2, 3], ("orders", 1), led(2, 4, (2,), 5), (2, 3))
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert recorder.kinds() == [("LeaderAndIsrRequest", 2), ("UpdateMetadataRequest", 1),
                                ("UpdateMetadataRequest", 2)]
    request = recorder.sent[1][1]
    assert isinstance(request, UpdateMetadataRequest)
    [topic] = request.topic_states
    assert topic.partition_states[0].offline_replicas == (3,)
    assert [b.id for b in request.live_brokers] == [1, 2]


def test_shutting_down_brokers_still_get_requests_but_their_replicas_are_offline(
        batch: ControllerRequestBatch, recorder: Recorder, context: ControllerContext) -> None:
    context.shutting_down_broker_ids.add(1)
    batch.add_update_metadata([1], [("orders", 0)])
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    [(broker, request, _, _)] = recorder.sent
    assert broker == 1 and isinstance(request, UpdateMetadataRequest)
    assert request.topic_states[0].partition_states[0].offline_replicas == (1,)
    assert [b.id for b in request.live_brokers] == [1, 2, 3]


def test_update_metadata_without_partitions_lists_live_brokers_only(
        batch: ControllerRequestBatch, recorder: Recorder) -> None:
    batch.add_update_metadata([3, 1])
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert recorder.kinds() == [("UpdateMetadataRequest", 1), ("UpdateMetadataRequest", 3)]
    for _, request, _, _ in recorder.sent:
        assert isinstance(request, UpdateMetadataRequest)
        assert request.topic_states == () and request.live_brokers == LIVE_BROKERS


def test_a_partition_without_leadership_is_left_out_of_update_metadata(
        batch: ControllerRequestBatch, recorder: Recorder, context: ControllerContext) -> None:
    context.update_partition_replica_assignment(("orders", 2), (1,))
    batch.add_update_metadata([1], [("orders", 2), ("orders", 1)])
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    request = recorder.sent[0][1]
    assert isinstance(request, UpdateMetadataRequest)
    assert [p.partition_index for p in request.topic_states[0].partition_states] == [1]


def test_topic_deletion_sends_leader_minus_two_and_stop_replica_with_delete(
        batch: ControllerRequestBatch, recorder: Recorder, context: ControllerContext) -> None:
    context.queue_topic_deletion(["doomed"])
    batch.add_update_metadata([1, 2, 3], [("doomed", 0)])
    batch.add_stop_replica([3, 1], ("doomed", 0), delete=True)
    batch.add_stop_replica([3], ("doomed", 0), delete=False)  # delete sticks within the batch
    batch.add_stop_replica([-1, 9], ("doomed", 0), delete=True)  # no such brokers: skipped
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert recorder.kinds() == [("UpdateMetadataRequest", 1), ("UpdateMetadataRequest", 2),
                                ("UpdateMetadataRequest", 3), ("StopReplicaRequest", 3),
                                ("StopReplicaRequest", 1)]
    update = recorder.sent[0][1]
    assert isinstance(update, UpdateMetadataRequest)
    assert update.topic_states == (UpdateMetadataTopicState("doomed", DOOMED, (UpdateMetadataPartitionState(
        partition_index=0, controller_epoch=4, leader=-2, leader_epoch=0, isr=(3, 1), zk_version=0,
        replicas=(3, 1), offline_replicas=()),)),)
    for (broker, request, version, _), epoch in zip(recorder.sent[3:], (303, 101), strict=True):
        assert version == STOP_REPLICA_VERSION
        assert request == StopReplicaRequest(
            controller_id=CONTROLLER_ID, is_k_raft_controller=False, controller_epoch=CONTROLLER_EPOCH,
            broker_epoch=epoch, delete_partitions=False, topic_states=(StopReplicaTopicState(
                "doomed", (StopReplicaPartitionState(0, leader_epoch=-2, delete_partition=True),)),)), broker


def test_stop_replica_without_delete_carries_the_leader_epoch(
        batch: ControllerRequestBatch, recorder: Recorder) -> None:
    batch.add_stop_replica([2], ("orders", 1), delete=False)
    batch.add_stop_replica([2], ("orders", 0), delete=False)
    batch.add_stop_replica([2], ("unknown", 0), delete=False)
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    [(_, request, _, _)] = recorder.sent
    assert isinstance(request, StopReplicaRequest)
    assert [(t.topic_name, [(p.partition_index, p.leader_epoch, p.delete_partition) for p in t.partition_states])
            for t in request.topic_states] == [("orders", [(1, 3, False), (0, 5, False)]),
                                               ("unknown", [(0, -1, False)])]


def test_callbacks_get_the_broker_and_its_answer(context: ControllerContext, recorder: Recorder) -> None:
    seen: list[tuple[object, ...]] = []
    batch = ControllerRequestBatch(
        CONTROLLER_ID, context, recorder,
        on_leader_and_isr_response=lambda broker, response: seen.append(("lai", broker, response)),
        on_update_metadata_response=lambda broker, response: seen.append(("um", broker, response)),
        on_stop_replica_response=lambda broker, response, deleted: seen.append(("sr", broker, response, deleted)))
    context.queue_topic_deletion(["doomed"])
    batch.add_leader_and_isr([1], ("orders", 0), led(1, 5, (1, 2), 9), (1, 2))
    batch.add_stop_replica([3], ("doomed", 0), delete=True)
    batch.add_stop_replica([3], ("orders", 1), delete=False)
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    answers: dict[str, Message] = {
        "LeaderAndIsrRequest": LeaderAndIsrResponse(error_code=0),
        "UpdateMetadataRequest": UpdateMetadataResponse(error_code=0),
        "StopReplicaRequest": StopReplicaResponse(error_code=0),
    }
    for _, request, _, callback in recorder.sent:
        assert callback is not None
        callback(answers[type(request).__name__])
    deleted: frozenset[TopicPartition] = frozenset({("doomed", 0)})
    assert seen == [("lai", 1, answers["LeaderAndIsrRequest"])] + [
        ("um", broker, answers["UpdateMetadataRequest"]) for broker in (1, 2, 3)] + [
        ("sr", 3, answers["StopReplicaRequest"], deleted)]


def test_a_new_batch_refuses_to_drop_unsent_requests(batch: ControllerRequestBatch, recorder: Recorder) -> None:
    batch.new_batch()
    batch.add_update_metadata([1])
    with pytest.raises(RuntimeError, match="would be lost"):
        batch.new_batch()
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    batch.new_batch()
    assert len(recorder.sent) == 1


# -- against Kafka -------------------------------------------------------------------------
# What Apache Kafka 3.9.2's controller (ZooKeeper mode, broker 1, controller epoch 1) sent to a
# broker 2 that registered with czxid 30, for a topic t {0: [2, 1], 1: [1, 2]} created and
# then deleted through its znodes; decoded by Strom's codec from the bytes on the wire.
# Kafka lists partitions and brokers in hash order, which carries no meaning: both sides are
# put in index order before comparing.
KAFKA_TOPIC_ID = uuid.UUID("ee1afafc-f49c-4dfc-8713-c72900a40bdd")
KAFKA_BROKERS = [BrokerInfo(1, (EndPoint("127.0.0.1", 58643),), rack="r1", epoch=26),
                 BrokerInfo(2, (EndPoint("127.0.0.1", 34763),), rack="r2", epoch=30)]
KAFKA_LIVE_BROKERS = (
    UpdateMetadataBroker(id=1, v0_host='', v0_port=0, endpoints=(UpdateMetadataEndpoint(
        port=58643, host='127.0.0.1', listener='PLAINTEXT', security_protocol=0),), rack='r1'),
    UpdateMetadataBroker(id=2, v0_host='', v0_port=0, endpoints=(UpdateMetadataEndpoint(
        port=34763, host='127.0.0.1', listener='PLAINTEXT', security_protocol=0),), rack='r2'))
KAFKA_LEADER_AND_ISR = LeaderAndIsrRequest(
    controller_id=1, is_k_raft_controller=False, controller_epoch=1, broker_epoch=30, type=0,
    ungrouped_partition_states=(), topic_states=(LeaderAndIsrTopicState(
        topic_name='t', topic_id=KAFKA_TOPIC_ID, partition_states=(
            LeaderAndIsrPartitionState(
                topic_name='', partition_index=1, controller_epoch=1, leader=1, leader_epoch=0, isr=(1, 2),
                partition_epoch=0, replicas=(1, 2), adding_replicas=(), removing_replicas=(), is_new=True,
                leader_recovery_state=0),
            LeaderAndIsrPartitionState(
                topic_name='', partition_index=0, controller_epoch=1, leader=2, leader_epoch=0, isr=(2, 1),
                partition_epoch=0, replicas=(2, 1), adding_replicas=(), removing_replicas=(), is_new=True,
                leader_recovery_state=0))),),
    live_leaders=(LeaderAndIsrLiveLeader(broker_id=2, host_name='127.0.0.1', port=34763),
                  LeaderAndIsrLiveLeader(broker_id=1, host_name='127.0.0.1', port=58643)))


def kafka_update_metadata(leaders: tuple[int, int]) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=1, is_k_raft_controller=False, type=0, controller_epoch=1, broker_epoch=30,
        ungrouped_partition_states=(), topic_states=(UpdateMetadataTopicState(
            topic_name='t', topic_id=KAFKA_TOPIC_ID, partition_states=(
                UpdateMetadataPartitionState(
                    topic_name='', partition_index=1, controller_epoch=1, leader=leaders[1], leader_epoch=0,
                    isr=(1, 2), zk_version=0, replicas=(1, 2), offline_replicas=()),
                UpdateMetadataPartitionState(
                    topic_name='', partition_index=0, controller_epoch=1, leader=leaders[0], leader_epoch=0,
                    isr=(2, 1), zk_version=0, replicas=(2, 1), offline_replicas=()))),),
        live_brokers=KAFKA_LIVE_BROKERS)


def kafka_stop_replica(delete: bool) -> StopReplicaRequest:
    return StopReplicaRequest(
        controller_id=1, is_k_raft_controller=False, controller_epoch=1, broker_epoch=30,
        delete_partitions=False, ungrouped_partitions=(), topics=(), topic_states=(StopReplicaTopicState(
            topic_name='t', partition_states=(
                StopReplicaPartitionState(partition_index=1, leader_epoch=-2, delete_partition=delete),
                StopReplicaPartitionState(partition_index=0, leader_epoch=-2, delete_partition=delete))),))


def in_index_order(request: Message) -> Message:
    if isinstance(request, LeaderAndIsrRequest):
        return LeaderAndIsrRequest(
            request.controller_id, request.is_k_raft_controller, request.controller_epoch, request.broker_epoch,
            request.type, request.ungrouped_partition_states,
            tuple(LeaderAndIsrTopicState(t.topic_name, t.topic_id, tuple(
                sorted(t.partition_states, key=lambda p: p.partition_index))) for t in request.topic_states),
            tuple(sorted(request.live_leaders, key=lambda leader: leader.broker_id)))
    if isinstance(request, UpdateMetadataRequest):
        return UpdateMetadataRequest(
            request.controller_id, request.is_k_raft_controller, request.type, request.controller_epoch,
            request.broker_epoch, request.ungrouped_partition_states,
            tuple(UpdateMetadataTopicState(t.topic_name, t.topic_id, tuple(
                sorted(t.partition_states, key=lambda p: p.partition_index))) for t in request.topic_states),
            tuple(sorted(request.live_brokers, key=lambda broker: broker.id)))
    assert isinstance(request, StopReplicaRequest)
    return StopReplicaRequest(
        request.controller_id, request.is_k_raft_controller, request.controller_epoch, request.broker_epoch,
        request.delete_partitions, request.ungrouped_partitions, request.topics,
        tuple(StopReplicaTopicState(t.topic_name, tuple(sorted(t.partition_states, key=lambda p: p.partition_index)))
              for t in request.topic_states))


def test_the_requests_match_what_kafka_3_9_sent_for_a_topic_created_then_deleted(recorder: Recorder) -> None:
    context = ControllerContext()
    context.epoch = 1
    context.set_live_brokers(KAFKA_BROKERS)
    context.add_topic("t", TopicAssignment(KAFKA_TOPIC_ID, {0: (2, 1), 1: (1, 2)}))
    new_states = {0: led(2, 0, (2, 1), 0), 1: led(1, 0, (1, 2), 0)}
    batch = ControllerRequestBatch(1, context, recorder)

    def to_broker_2() -> list[Message]:
        sent = [in_index_order(request) for broker, request, _, _ in recorder.sent if broker == 2]
        recorder.sent.clear()
        return sent

    # New partitions: LeaderAndIsr to the ISR (is_new), then UpdateMetadata to every broker.
    batch.new_batch()
    for partition, state in new_states.items():
        state = LeaderIsrAndControllerEpoch(state.leader_and_isr, controller_epoch=1)
        context.put_partition_leadership_info(("t", partition), state)
        batch.add_leader_and_isr(state.leader_and_isr.isr, ("t", partition), state,
                                 context.partition_replica_assignment(("t", partition)), is_new=True)
    batch.send_requests_to_brokers(context.epoch)
    assert to_broker_2() == [in_index_order(KAFKA_LEADER_AND_ISR), in_index_order(kafka_update_metadata((2, 1)))]
    # Deletion: UpdateMetadata with leader -2, then StopReplica without and with delete.
    context.queue_topic_deletion(["t"])
    partitions = [("t", 0), ("t", 1)]
    batch.new_batch()
    batch.add_update_metadata(context.live_or_shutting_down_broker_ids, partitions)
    batch.send_requests_to_brokers(context.epoch)
    for delete in (False, True):
        batch.new_batch()
        for tp in partitions:
            batch.add_stop_replica([2], tp, delete=delete)
        batch.send_requests_to_brokers(context.epoch)
    assert to_broker_2() == [in_index_order(kafka_update_metadata((-2, -2))),
                             in_index_order(kafka_stop_replica(False)), in_index_order(kafka_stop_replica(True))]
