"""The controller's replication duties, in process against a real ZooKeeper.

One ``Controller`` (broker 1's) runs on the test's loop with a recording channel in place
of the sockets (what it would send is what it queued); brokers 1-3 are registered in
ZooKeeper by sessions of their own, so "killing" one is closing its session, and its
registration vanishes as a crashed broker's does. Assertions read the state znodes back
from ZooKeeper: AlterPartition's checks and writes, controlled shutdown moving leadership
and taking the broker out of ISRs, and offline elections, clean or (per topic, else per
broker) unclean, that never empty an ISR.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from strom.cluster.controller import Controller
from strom.cluster.controller_channel import (
    ChannelConfig,
    ControllerChannelManager,
    ResponseCallback,
)
from strom.cluster.zk_client import KafkaZkClient
from strom.cluster.zk_data import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    TopicAssignment,
    new_kafka_uuid,
)
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from strom.protocol.messages.alter_partition_response import AlterPartitionResponse
from strom.protocol.messages.leader_and_isr_request import LeaderAndIsrRequest
from strom.protocol.messages.stop_replica_request import StopReplicaRequest
from strom.protocol.messages.update_metadata_request import UpdateMetadataRequest
from strom.protocol.topic_partition import TopicPartition
from tests.support.zookeeper import zk_connect as zk_connect
from tests.support.zookeeper import zookeeper as zookeeper

pytestmark = pytest.mark.zookeeper

SESSION_TIMEOUT_MS = 6000


class RecordingChannel(ControllerChannelManager):
    """The controller's channel without sockets: every request it was asked to send, in order."""

    def __init__(self, config: ChannelConfig) -> None:
        super().__init__(config)
        self.sent: list[tuple[int, Message]] = []

    def add_broker(self, broker: BrokerInfo) -> None:
        pass

    async def remove_broker(self, broker_id: int) -> None:
        pass

    def send(self, broker_id: int, request: Message, version: int, callback: ResponseCallback | None = None) -> None:
        self.sent.append((broker_id, request))

    async def shutdown(self) -> None:
        pass

    def of(self, kind: type[Message]) -> list[tuple[int, Any]]:
        return [(broker_id, request) for broker_id, request in self.sent if isinstance(request, kind)]


@dataclass
class Harness:
    controller: Controller
    sessions: dict[int, KafkaZkClient]
    epochs: dict[int, int]

    @property
    def zk(self) -> KafkaZkClient:
        return self.sessions[1]

    @property
    def channel(self) -> RecordingChannel:
        channel = self.controller._channel
        assert isinstance(channel, RecordingChannel)
        return channel

    def state(self, tp: TopicPartition) -> LeaderAndIsr:
        self.zk.sync()
        return self.zk.get_partition_states([tp])[tp].leader_and_isr

    async def until(self, condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(condition):
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.02)

    async def create_topic(self, name: str, partitions: dict[int, tuple[int, ...]],
                           configs: dict[str, str] | None = None) -> uuid.UUID:
        topic_id = new_kafka_uuid()
        await asyncio.to_thread(self.zk.create_topic, name, TopicAssignment(topic_id, partitions), configs or {})
        await self.until(lambda: len(self.zk.get_partition_states([(name, p) for p in partitions])) == len(partitions)
                         and all(self.controller.context.partition_leader_and_isr((name, p)) for p in partitions),
                         f"the states of {name}")
        return topic_id

    async def kill(self, broker_id: int) -> None:
        await asyncio.to_thread(self.sessions.pop(broker_id).close)
        await self.until(lambda: broker_id not in self.controller.context.live_or_shutting_down_broker_ids,
                         f"the controller to see broker {broker_id} gone")

    async def alter(self, sender: int, topic_id: uuid.UUID, partition: int, leader_epoch: int, isr: tuple[int, ...],
                    partition_epoch: int, *, broker_epoch: int | None = None) -> AlterPartitionResponse:
        request = AlterPartitionRequest(
            broker_id=sender, broker_epoch=self.epochs[sender] if broker_epoch is None else broker_epoch,
            topics=(TopicData(topic_id=topic_id, partitions=(PartitionData(
                partition_index=partition, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                new_isr_with_epochs=tuple(BrokerState(b, self.epochs.get(b, -1)) for b in isr)),)),))
        return await self.controller.alter_partition(request, 3)


def run(zk_connect: str, scenario: Callable[[Harness], Coroutine[None, None, None]], *,
        unclean_default: bool = False) -> None:
    async def main() -> None:
        async with started(zk_connect, unclean_default) as harness:
            await scenario(harness)
    asyncio.run(main())


@asynccontextmanager
async def started(zk_connect: str, unclean_default: bool) -> AsyncIterator[Harness]:
    sessions = {b: KafkaZkClient(zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS) for b in (1, 2, 3)}
    epochs: dict[int, int] = {}
    controller = Controller(1, sessions[1], channel_factory=RecordingChannel,
                            unclean_leader_election_enable=lambda: unclean_default)
    try:
        for broker_id, session in sessions.items():
            await asyncio.to_thread(session.connect)
            await asyncio.to_thread(session.create_top_level_paths)
            epochs[broker_id] = await asyncio.to_thread(
                session.register_broker, BrokerInfo(broker_id, (EndPoint("127.0.0.1", 9000 + broker_id),)))
        await controller.startup()
        harness = Harness(controller, sessions, epochs)
        await harness.until(lambda: controller.is_active and len(controller.context.live_broker_ids) == 3,
                            "broker 1 to be the controller of three brokers")
        yield harness
    finally:
        await controller.shutdown()
        for session in sessions.values():
            await asyncio.to_thread(session.close)


def partition_answer(response: AlterPartitionResponse) -> tuple[int, int, int, tuple[int, ...], int]:
    """(error, leader, leader epoch, isr, partition epoch) of a one-partition answer."""
    assert response.error_code == 0
    (topic,) = response.topics
    (p,) = topic.partitions
    return p.error_code, p.leader_id, p.leader_epoch, tuple(p.isr), p.partition_epoch


def test_alter_partition_writes_an_isr_change_checked_as_kafka_does(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        topic_id = await h.create_topic("t", {0: (1, 2, 3)})
        assert h.state(("t", 0)) == LeaderAndIsr(1, 0, (1, 2, 3), 0)
        h.channel.sent.clear()

        shrunk = await h.alter(1, topic_id, 0, leader_epoch=0, isr=(1, 2), partition_epoch=0)
        assert partition_answer(shrunk) == (0, 1, 0, (1, 2), 1)
        assert h.state(("t", 0)) == LeaderAndIsr(1, 0, (1, 2), 1)  # leader epoch kept, partition epoch + 1
        told = h.channel.of(UpdateMetadataRequest)  # every broker hears of it; nobody gets LeaderAndIsr
        assert sorted(b for b, _ in told) == [1, 2, 3] and not h.channel.of(LeaderAndIsrRequest)
        assert all(r.topic_states[0].partition_states[0].isr == (1, 2) for _, r in told)

        # A retry whose answer was lost gets the state it asked for, nothing written again.
        assert partition_answer(await h.alter(1, topic_id, 0, 0, (1, 2), 0)) == (0, 1, 0, (1, 2), 1)
        assert h.state(("t", 0)).partition_epoch == 1
        # An ISR decided on an older state; a deposed leader epoch; a follower; a stranger.
        assert partition_answer(await h.alter(1, topic_id, 0, 0, (1,), 0))[0] == ErrorCode.INVALID_UPDATE_VERSION
        assert partition_answer(await h.alter(1, topic_id, 0, -1, (1,), 1))[0] == ErrorCode.FENCED_LEADER_EPOCH
        assert partition_answer(await h.alter(2, topic_id, 0, 0, (1,), 1))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert partition_answer(await h.alter(1, topic_id, 0, 0, (1, 2, 7), 1))[0] == ErrorCode.INELIGIBLE_REPLICA
        assert partition_answer(await h.alter(1, topic_id, 9, 0, (1,), 1))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert partition_answer(await h.alter(1, new_kafka_uuid(), 0, 0, (1,), 1))[0] == ErrorCode.UNKNOWN_TOPIC_ID
        stale = await h.alter(1, topic_id, 0, 0, (1,), 1, broker_epoch=h.epochs[1] - 1)
        assert (stale.error_code, stale.topics) == (ErrorCode.STALE_BROKER_EPOCH, ())
        assert h.state(("t", 0)) == LeaderAndIsr(1, 0, (1, 2), 1)  # none of them wrote

        # A broker back in the ISR (version 1: by topic name).
        grown = await h.controller.alter_partition(AlterPartitionRequest(
            broker_id=1, broker_epoch=h.epochs[1], topics=(TopicData(topic_name="t", partitions=(
                PartitionData(partition_index=0, leader_epoch=0, partition_epoch=1, new_isr=(1, 2, 3)),)),)), 1)
        assert partition_answer(grown) == (0, 1, 0, (1, 2, 3), 2)
        assert grown.topics[0].topic_name == "t"
        assert h.state(("t", 0)) == LeaderAndIsr(1, 0, (1, 2, 3), 2)
    run(zk_connect, scenario)


def test_only_the_active_controller_answers_alter_partition(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        other = Controller(2, h.sessions[2], channel_factory=RecordingChannel)
        await other.startup()
        try:
            await h.until(lambda: other.active_controller_id == 1, "broker 2 to know its controller")
            answer = await other.alter_partition(AlterPartitionRequest(broker_id=1, broker_epoch=h.epochs[1]), 3)
            assert answer.error_code == ErrorCode.NOT_CONTROLLER
        finally:
            await other.shutdown()
    run(zk_connect, scenario)


def test_controlled_shutdown_moves_leadership_and_leaves_the_isrs(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.create_topic("cs", {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
        solo_id = await h.create_topic("solo", {0: (2, 1)})
        await h.alter(2, solo_id, 0, 0, (2,), 0)  # its only in-sync replica is the one leaving
        h.channel.sent.clear()

        assert await h.controller.controlled_shutdown(2, h.epochs[2] - 1) == (ErrorCode.STALE_BROKER_EPOCH, ())
        error, remaining = await h.controller.controlled_shutdown(2, h.epochs[2])
        assert (error, remaining) == (ErrorCode.NONE, (("solo", 0),))
        assert h.state(("cs", 1)) == LeaderAndIsr(3, 1, (3, 1), 1)  # next in-sync replica, epoch + 1
        assert h.state(("cs", 0)) == LeaderAndIsr(1, 1, (1, 3), 1)  # a follower leaves the ISR, epoch + 1
        assert h.state(("cs", 2)) == LeaderAndIsr(3, 1, (3, 1), 1)
        assert h.state(("solo", 0)) == LeaderAndIsr(2, 0, (2,), 1)  # nobody to take it: untouched
        moved = {b for b, r in h.channel.of(LeaderAndIsrRequest)
                 if any(t.topic_name == "cs" and p.partition_index == 1 for t in r.topic_states for p in t.partition_states)}
        assert moved == {1, 2, 3}  # the leaving broker hears it follows now
        stops = [(b, t.topic_name, p.partition_index, p.delete_partition)
                 for b, r in h.channel.of(StopReplicaRequest) for t in r.topic_states for p in t.partition_states]
        assert sorted(stops) == [(2, "cs", 0, False), (2, "cs", 2, False)]
        # Asked again (the broker retries while it leads something): nothing moves twice.
        assert await h.controller.controlled_shutdown(2, h.epochs[2]) == (ErrorCode.NONE, (("solo", 0),))
        assert h.state(("cs", 1)).leader_epoch == 1
    run(zk_connect, scenario)


def test_a_dead_leader_is_replaced_from_the_isr_or_uncleanly_only_where_allowed(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.create_topic("clean", {0: (2, 3), 1: (3, 2)})
        ids = {}
        for name, configs in (("strict", {"unclean.leader.election.enable": "false"}), ("lenient", {})):
            ids[name] = await h.create_topic(name, {0: (2, 3)}, configs)
            await h.alter(2, ids[name], 0, 0, (2,), 0)  # 3 fell behind: 2 alone is in sync
        await h.kill(2)

        await h.until(lambda: h.state(("clean", 0)).leader == 3, "3 to lead clean-0")
        assert h.state(("clean", 0)) == LeaderAndIsr(3, 1, (3,), 1)
        assert h.state(("clean", 1)) == LeaderAndIsr(3, 1, (3,), 1)  # 2 leaves the ISR where it followed
        # No in-sync replica alive. The broker's default (on here) lets "lenient" take 3, which
        # alone is known to have what it has; "strict" says no: offline, and 2 stays in its
        # ISR as the one with every committed record.
        await h.until(lambda: h.state(("strict", 0)).leader == -1, "strict-0 offline")
        assert h.state(("strict", 0)) == LeaderAndIsr(-1, 1, (2,), 2)
        await h.until(lambda: h.state(("lenient", 0)).leader == 3, "lenient-0 led uncleanly")
        assert h.state(("lenient", 0)) == LeaderAndIsr(3, 1, (3,), 2)

        # The topic's setting turned on (ZkBroker passes the config change on): elected now.
        await asyncio.to_thread(h.zk.set_topic_config, "strict", {"unclean.leader.election.enable": "true"})
        h.controller.enable_topic_unclean_leader_election("strict")
        await h.until(lambda: h.state(("strict", 0)).leader == 3, "strict-0 led uncleanly")
        assert h.state(("strict", 0)) == LeaderAndIsr(3, 2, (3,), 3)
    run(zk_connect, scenario, unclean_default=True)


def test_the_last_in_sync_replica_keeps_a_partition_offline_until_it_returns(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        topic_id = await h.create_topic("last", {0: (2, 3)})
        await h.alter(2, topic_id, 0, 0, (2,), 0)
        await h.kill(2)
        await h.until(lambda: h.state(("last", 0)).leader == -1, "last-0 offline")
        assert h.state(("last", 0)) == LeaderAndIsr(-1, 1, (2,), 2)  # the ISR is never emptied
        h.controller.enable_topic_unclean_leader_election("last")  # no-op: the topic and broker say no
        back = KafkaZkClient(h.zk.connect_string, session_timeout_ms=SESSION_TIMEOUT_MS)
        await asyncio.to_thread(back.connect)
        h.sessions[2] = back
        await asyncio.to_thread(back.register_broker, BrokerInfo(2, (EndPoint("127.0.0.1", 9002),)))
        await h.until(lambda: h.state(("last", 0)).leader == 2, "2 to lead again")
        assert h.state(("last", 0)) == LeaderAndIsr(2, 2, (2,), 3)
    run(zk_connect, scenario)

