"""How the controller talks to brokers: Kafka's ``ControllerChannelManager`` and request batch.

``ControllerChannelManager`` keeps, per broker, one FIFO of control requests and one asyncio
task that sends them one at a time over a ``BrokerConnection`` (Kafka's RequestSendThread).
A request is sent again, on a new connection after a short backoff, until the broker answers
it or the broker is removed: a connection refused, dropped or timed out never loses or
reorders anything, since the next request does not leave before this one is answered.
Removing a broker (it left ``/brokers/ids``, or bounced and comes back with a new epoch)
cancels its task, closes its connection and drops what it had queued; what the controller
sends a re-registered broker is built afresh.

``ControllerRequestBatch`` is Kafka's ``AbstractControllerBrokerRequestBatch``: while the
controller handles one event it collects, per broker, the partitions whose LeaderAndIsr,
UpdateMetadata and StopReplica that broker must get, then ``send_requests_to_brokers`` builds
one request of each kind per broker from the ``ControllerContext`` (broker epochs,
endpoints, racks, topic ids, offline replicas) and queues them in Kafka's order:
LeaderAndIsr, UpdateMetadata, StopReplica. Kafka's rule that a new or bounced broker hears
UpdateMetadata *before* LeaderAndIsr is kept by the caller, as Kafka's controller does: it
sends an UpdateMetadata-only batch first.

Versions are the newest Kafka 3.9 sends (LeaderAndIsr v7, UpdateMetadata v8, StopReplica
v4), with ``Type`` 0 ("unknown"), as a ZooKeeper-mode controller that is not migrating writes.
Response callbacks run on the event loop, in the channel's task: they must not block (the
controller hands them to its event queue).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from strom.broker.periodic import cancel_and_wait
from strom.client.connection import BrokerConnection
from strom.client.errors import KafkaError
from strom.cluster.controller_context import ControllerContext
from strom.cluster.zk_data import BrokerInfo, EndPoint, LeaderIsrAndControllerEpoch
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
from strom.protocol.primitives import ZERO_UUID
from strom.protocol.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4
# Kafka's LeaderAndIsr.LeaderDuringDelete / InitialLeaderEpoch / InitialPartitionEpoch: what
# UpdateMetadata says of a partition whose topic is queued for deletion.
LEADER_DURING_DELETE = -2
# SecurityProtocol ids as UpdateMetadata carries them.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

ResponseCallback = Callable[[Message], None]
_State = TypeVar("_State")


class RequestSender(Protocol):
    """Where a request batch queues what it built (the channel manager, or a test's recorder)."""

    def send(self, broker_id: int, request: Message, version: int,
             callback: ResponseCallback | None = None) -> None: ...


def endpoint_for(broker: BrokerInfo, listener_name: str) -> EndPoint:
    """The broker's endpoint on the controller-to-broker listener (Kafka's ``Broker.node``)."""
    for endpoint in broker.endpoints:
        if endpoint.listener_name == listener_name:
            return endpoint
    raise ValueError(f"broker {broker.id} has no endpoint for listener {listener_name}: "
                     f"{[e.listener_name for e in broker.endpoints]}")


# -- the channel ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ChannelConfig:
    """Kafka's settings for the controller's connections, with its defaults."""

    controller_id: int
    listener_name: str = "PLAINTEXT"  # inter.broker.listener.name
    request_timeout_ms: int = 30_000  # request.timeout.ms
    socket_timeout_ms: int = 30_000  # controller.socket.timeout.ms: connection set-up
    retry_backoff_ms: int = 100  # RequestSendThread's fixed backoff


@dataclass(frozen=True, slots=True)
class _QueuedRequest:
    request: Message
    version: int
    callback: ResponseCallback | None


class _BrokerChannel:
    """One broker's queue, sending task and connection."""

    def __init__(self, broker: BrokerInfo, endpoint: EndPoint) -> None:
        self.broker = broker
        self.endpoint = endpoint
        self.queue: asyncio.Queue[_QueuedRequest] = asyncio.Queue()
        self.connection: BrokerConnection | None = None
        self.task: asyncio.Task[None] | None = None

    def close_connection(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


class ControllerChannelManager:
    """Per-broker ordered, retrying request queues; see the module docstring."""

    def __init__(self, config: ChannelConfig) -> None:
        self.config = config
        self._brokers: dict[int, _BrokerChannel] = {}

    @property
    def broker_ids(self) -> frozenset[int]:
        return frozenset(self._brokers)

    def queue_size(self, broker_id: int) -> int:
        """Requests queued for ``broker_id`` and not yet being sent."""
        channel = self._brokers.get(broker_id)
        return 0 if channel is None else channel.queue.qsize()

    def add_broker(self, broker: BrokerInfo) -> None:
        """Start a queue and a sending task for ``broker``; a known broker id is left as it is."""
        if broker.id in self._brokers:
            return
        channel = _BrokerChannel(broker, endpoint_for(broker, self.config.listener_name))
        channel.task = asyncio.get_running_loop().create_task(
            self._send_loop(channel), name=f"controller-{self.config.controller_id}-to-broker-{broker.id}")
        self._brokers[broker.id] = channel

    async def remove_broker(self, broker_id: int) -> None:
        """Stop sending to ``broker_id``: its task ends, its queue and connection are dropped.

        Returns once the task has finished, so no callback for this broker runs afterwards.
        """
        channel = self._brokers.pop(broker_id, None)
        if channel is not None:
            await self._stop(channel)

    def send(self, broker_id: int, request: Message, version: int,
             callback: ResponseCallback | None = None) -> None:
        """Queue ``request`` for ``broker_id``; ``callback`` gets the answer.

        A broker that is not (or no longer) known gets nothing, as in Kafka: the controller
        has removed it and will send it full state if it comes back.
        """
        channel = self._brokers.get(broker_id)
        if channel is None:
            logger.warning("controller %d: not sending %s to broker %d, since it is offline",
                           self.config.controller_id, type(request).__name__, broker_id)
            return
        channel.queue.put_nowait(_QueuedRequest(request, version, callback))

    async def shutdown(self) -> None:
        """Stop every broker's task and close every connection."""
        channels = list(self._brokers.values())
        self._brokers.clear()
        for channel in channels:
            await self._stop(channel)

    async def _stop(self, channel: _BrokerChannel) -> None:
        await cancel_and_wait(channel.task)
        channel.close_connection()

    async def _send_loop(self, channel: _BrokerChannel) -> None:
        try:
            while True:
                item = await channel.queue.get()
                response = await self._send_until_answered(channel, item)
                if response is not None and item.callback is not None:
                    try:
                        item.callback(response)
                    except Exception:
                        logger.exception("controller %d: callback for %s from broker %d failed",
                                         self.config.controller_id, type(item.request).__name__,
                                         channel.broker.id)
        finally:
            channel.close_connection()

    async def _send_until_answered(self, channel: _BrokerChannel, item: _QueuedRequest) -> Message | None:
        """The broker's answer; ``None`` only for a request that can never be sent (a bug)."""
        config = self.config
        while True:
            try:
                connection = await self._connection(channel)
                return await connection.send(item.request, version=item.version)
            except (KafkaError, OSError) as exc:  # refused, dropped, timed out: a new connection
                logger.warning("controller %d: failed to send %s to broker %d (%s); reconnecting",
                               config.controller_id, type(item.request).__name__, channel.broker.id, exc)
            except Exception:  # the codec refused the request: every attempt would fail alike
                logger.exception("controller %d: dropping %s v%d for broker %d", config.controller_id,
                                 type(item.request).__name__, item.version, channel.broker.id)
                return None
            channel.close_connection()
            await asyncio.sleep(config.retry_backoff_ms / 1000)

    async def _connection(self, channel: _BrokerChannel) -> BrokerConnection:
        if channel.connection is None or channel.connection.closed:
            channel.close_connection()
            endpoint = channel.endpoint
            channel.connection = await BrokerConnection.open(
                endpoint.host, endpoint.port, node_id=channel.broker.id,
                client_id=str(self.config.controller_id),
                request_timeout_ms=self.config.request_timeout_ms,
                connect_timeout_ms=self.config.socket_timeout_ms)
            logger.info("controller %d connected to broker %d at %s:%d for state change requests",
                        self.config.controller_id, channel.broker.id, endpoint.host, endpoint.port)
        return channel.connection


# -- the request batch ---------------------------------------------------------------------
LeaderAndIsrCallback = Callable[[int, LeaderAndIsrResponse], None]
UpdateMetadataCallback = Callable[[int, UpdateMetadataResponse], None]
# (broker id, response, the partitions that request asked the broker to delete)
StopReplicaCallback = Callable[[int, StopReplicaResponse, frozenset[TopicPartition]], None]


@dataclass(frozen=True, slots=True)
class _StopReplica:
    leader_epoch: int
    delete: bool


class ControllerRequestBatch:
    """Collects one event's control requests per broker, then sends them; see the module docstring."""

    def __init__(self, controller_id: int, context: ControllerContext, sender: RequestSender, *,
                 listener_name: str = "PLAINTEXT",
                 on_leader_and_isr_response: LeaderAndIsrCallback | None = None,
                 on_update_metadata_response: UpdateMetadataCallback | None = None,
                 on_stop_replica_response: StopReplicaCallback | None = None) -> None:
        self.controller_id = controller_id
        self.context = context
        self.sender = sender
        self.listener_name = listener_name
        self.on_leader_and_isr_response = on_leader_and_isr_response
        self.on_update_metadata_response = on_update_metadata_response
        self.on_stop_replica_response = on_stop_replica_response
        self._leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self._stop_replica: dict[int, dict[TopicPartition, _StopReplica]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_partitions: dict[TopicPartition, UpdateMetadataPartitionState] = {}

    @property
    def is_empty(self) -> bool:
        return not (self._leader_and_isr or self._stop_replica or self._update_metadata_brokers)

    def new_batch(self) -> None:
        """Start collecting; a batch left unsent by the previous event is a bug (Kafka throws)."""
        if not self.is_empty:
            raise RuntimeError(
                "the controller's request batch is not empty while a new one starts: "
                f"LeaderAndIsr for {sorted(self._leader_and_isr)}, StopReplica for "
                f"{sorted(self._stop_replica)}, UpdateMetadata for {sorted(self._update_metadata_brokers)} "
                "would be lost")

    def clear(self) -> None:
        self._leader_and_isr.clear()
        self._stop_replica.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata_partitions.clear()

    def add_leader_and_isr(self, broker_ids: Iterable[int], topic_partition: TopicPartition,
                           state: LeaderIsrAndControllerEpoch, replicas: Sequence[int],
                           is_new: bool = False) -> None:
        """Tell ``broker_ids`` the partition's leadership; every broker then gets its metadata.

        ``is_new`` (the replica should not exist yet) sticks once set within the batch.
        """
        leader_and_isr = state.leader_and_isr
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            partitions = self._leader_and_isr.setdefault(broker_id, {})
            previous = partitions.get(topic_partition)
            partitions[topic_partition] = LeaderAndIsrPartitionState(
                partition_index=topic_partition[1], controller_epoch=state.controller_epoch,
                leader=leader_and_isr.leader, leader_epoch=leader_and_isr.leader_epoch,
                isr=tuple(leader_and_isr.isr), partition_epoch=leader_and_isr.partition_epoch,
                replicas=tuple(replicas), is_new=is_new or (previous is not None and previous.is_new))
        self.add_update_metadata(self.context.live_or_shutting_down_broker_ids, [topic_partition])

    def add_stop_replica(self, broker_ids: Iterable[int], topic_partition: TopicPartition,
                         delete: bool) -> None:
        """Tell ``broker_ids`` to stop (and with ``delete``, remove) their replica."""
        leader_epoch = self.context.leader_epoch(topic_partition)
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            partitions = self._stop_replica.setdefault(broker_id, {})
            previous = partitions.get(topic_partition)
            partitions[topic_partition] = _StopReplica(
                leader_epoch, delete or (previous is not None and previous.delete))

    def add_update_metadata(self, broker_ids: Iterable[int],
                            partitions: Iterable[TopicPartition] = ()) -> None:
        """Send ``broker_ids`` UpdateMetadata with these partitions (none: live brokers only).

        Every broker of the batch gets every partition added to it. A partition with no
        known leadership is left out; one whose topic is being deleted goes with leader -2.
        """
        self._update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        context = self.context
        for tp in partitions:
            state = context.partition_leadership_info(tp)
            if state is None:
                logger.info("leader not yet assigned for partition %s; not in UpdateMetadata", tp)
                continue
            replicas = context.partition_replica_assignment(tp)
            leader_and_isr = state.leader_and_isr
            if context.is_topic_queued_up_for_deletion(tp[0]):
                leader, leader_epoch, partition_epoch = LEADER_DURING_DELETE, 0, 0
            else:
                leader = leader_and_isr.leader
                leader_epoch, partition_epoch = leader_and_isr.leader_epoch, leader_and_isr.partition_epoch
            self._update_metadata_partitions[tp] = UpdateMetadataPartitionState(
                partition_index=tp[1], controller_epoch=state.controller_epoch, leader=leader,
                leader_epoch=leader_epoch, isr=tuple(leader_and_isr.isr), zk_version=partition_epoch,
                replicas=replicas,
                offline_replicas=tuple(r for r in replicas if not context.is_replica_online(r, tp)))

    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        """Queue what was collected, per broker, in Kafka's order; the batch is empty afterwards.

        Brokers no longer registered are skipped: they get full state when they return.
        """
        try:
            self._send_leader_and_isr(controller_epoch)
            self._send_update_metadata(controller_epoch)
            self._send_stop_replica(controller_epoch)
        finally:
            self.clear()

    # -- building ------------------------------------------------------------------------
    def _send_leader_and_isr(self, controller_epoch: int) -> None:
        context = self.context
        for broker_id, partitions in self._leader_and_isr.items():
            if broker_id not in context.live_or_shutting_down_broker_ids:
                continue
            leader_ids = {state.leader for state in partitions.values()}
            live_leaders = []
            for leader in context.live_or_shutting_down_brokers:
                if leader.id in leader_ids:
                    endpoint = endpoint_for(leader, self.listener_name)
                    live_leaders.append(LeaderAndIsrLiveLeader(leader.id, endpoint.host, endpoint.port))
            topic_states = [
                LeaderAndIsrTopicState(topic_name=topic, topic_id=context.topic_ids.get(topic, ZERO_UUID),
                                       partition_states=tuple(states))
                for topic, states in _by_topic(partitions).items()]
            request = LeaderAndIsrRequest(
                controller_id=self.controller_id, controller_epoch=controller_epoch,
                broker_epoch=context.broker_epoch(broker_id), type=0,
                topic_states=tuple(topic_states), live_leaders=tuple(live_leaders))
            self.sender.send(broker_id, request, LEADER_AND_ISR_VERSION,
                             self._leader_and_isr_callback(broker_id))

    def _send_update_metadata(self, controller_epoch: int) -> None:
        context = self.context
        live_brokers = tuple(
            UpdateMetadataBroker(
                id=broker.id, rack=broker.rack,
                endpoints=tuple(UpdateMetadataEndpoint(
                    port=e.port, host=e.host, listener=e.listener_name,
                    security_protocol=SECURITY_PROTOCOL_IDS[e.security_protocol]) for e in broker.endpoints))
            for broker in context.live_or_shutting_down_brokers)
        topic_states = tuple(
            UpdateMetadataTopicState(topic_name=topic, topic_id=context.topic_ids.get(topic, ZERO_UUID),
                                     partition_states=tuple(states))
            for topic, states in _by_topic(self._update_metadata_partitions).items())
        for broker_id in sorted(self._update_metadata_brokers & context.live_or_shutting_down_broker_ids):
            request = UpdateMetadataRequest(
                controller_id=self.controller_id, controller_epoch=controller_epoch,
                broker_epoch=context.broker_epoch(broker_id), type=0,
                topic_states=topic_states, live_brokers=live_brokers)
            self.sender.send(broker_id, request, UPDATE_METADATA_VERSION,
                             self._update_metadata_callback(broker_id))

    def _send_stop_replica(self, controller_epoch: int) -> None:
        context = self.context
        for broker_id, partitions in self._stop_replica.items():
            if broker_id not in context.live_or_shutting_down_broker_ids:
                continue
            by_topic: dict[str, list[StopReplicaPartitionState]] = {}
            for (topic, partition), stop in partitions.items():
                by_topic.setdefault(topic, []).append(StopReplicaPartitionState(
                    partition_index=partition, leader_epoch=stop.leader_epoch,
                    delete_partition=stop.delete))
            request = StopReplicaRequest(
                controller_id=self.controller_id, controller_epoch=controller_epoch,
                broker_epoch=context.broker_epoch(broker_id),
                topic_states=tuple(StopReplicaTopicState(topic, tuple(states))
                                   for topic, states in by_topic.items()))
            deleted = frozenset(tp for tp, stop in partitions.items() if stop.delete)
            self.sender.send(broker_id, request, STOP_REPLICA_VERSION,
                             self._stop_replica_callback(broker_id, deleted))

    # -- callbacks -----------------------------------------------------------------------
    def _leader_and_isr_callback(self, broker_id: int) -> ResponseCallback | None:
        handler = self.on_leader_and_isr_response
        if handler is None:
            return None

        def callback(response: Message) -> None:
            assert isinstance(response, LeaderAndIsrResponse)
            handler(broker_id, response)
        return callback

    def _update_metadata_callback(self, broker_id: int) -> ResponseCallback | None:
        handler = self.on_update_metadata_response
        if handler is None:
            return None

        def callback(response: Message) -> None:
            assert isinstance(response, UpdateMetadataResponse)
            handler(broker_id, response)
        return callback

    def _stop_replica_callback(self, broker_id: int,
                               deleted: frozenset[TopicPartition]) -> ResponseCallback | None:
        handler = self.on_stop_replica_response
        if handler is None:
            return None

        def callback(response: Message) -> None:
            assert isinstance(response, StopReplicaResponse)
            handler(broker_id, response, deleted)
        return callback


def _by_topic(partitions: dict[TopicPartition, _State]) -> dict[str, list[_State]]:
    """Partition states grouped by topic, topics in the order they were first added."""
    grouped: dict[str, list[_State]] = {}
    for (topic, _), state in partitions.items():
        grouped.setdefault(topic, []).append(state)
    return grouped
