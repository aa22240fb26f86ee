"""The controller's channel against real sockets: order, retries, removal.

The broker here is a real asyncio server on loopback that speaks Kafka's framing and
answers through Strom's codec (ApiVersions, then LeaderAndIsr/UpdateMetadata/StopReplica),
and can be told to drop a connection instead of answering, to close connections as they
open, or to hold an answer back. Each request carries a marker in its controller epoch, so
the server's log shows exactly what arrived, in which order and how many times. Waiting is
on conditions (an event set whenever the server or a callback sees something), never on
sleeps.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field

import pytest

from strom.cluster.controller_channel import (
    ChannelConfig,
    ControllerChannelManager,
    ControllerRequestBatch,
)
from strom.cluster.controller_context import ControllerContext
from strom.cluster.zk_data import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
)
from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import Request, decode_request, encode_response
from strom.protocol.message import Message
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from strom.protocol.messages.leader_and_isr_request import LeaderAndIsrRequest
from strom.protocol.messages.leader_and_isr_response import LeaderAndIsrResponse
from strom.protocol.messages.stop_replica_request import StopReplicaRequest
from strom.protocol.messages.stop_replica_response import StopReplicaResponse
from strom.protocol.messages.update_metadata_request import UpdateMetadataRequest
from strom.protocol.messages.update_metadata_response import UpdateMetadataResponse

TIMEOUT = 60  # seconds; generous for a loaded two-core machine, never reached when things work
ANSWERS: dict[int, Message] = {
    LeaderAndIsrRequest.API_KEY: LeaderAndIsrResponse(error_code=0),
    StopReplicaRequest.API_KEY: StopReplicaResponse(error_code=0),
    UpdateMetadataRequest.API_KEY: UpdateMetadataResponse(error_code=0),
}
API_VERSIONS = (ApiVersion(18, 0, 4), ApiVersion(4, 0, 7), ApiVersion(5, 0, 4), ApiVersion(6, 0, 8))


class Changes:
    """An event set whenever something observable happens; ``until`` waits for a condition."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def notify(self) -> None:
        self.event.set()

    async def until(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(TIMEOUT):
            while True:
                self.event.clear()
                if condition():
                    return
                await self.event.wait()


# What the server does with a control request, given the marker and how often it has seen it.
ANSWER, DROP, HOLD = "answer", "drop", "hold"
Policy = Callable[[int, int], str]


@dataclass
class FakeBroker:
    changes: Changes
    policy: Policy = lambda marker, seen: ANSWER
    close_on_accept: int = 0  # this many connections are closed as soon as they open
    received: list[tuple[int, int, int]] = field(default_factory=list)  # (api key, version, marker)
    accepted: int = 0
    open: int = 0
    server: asyncio.Server | None = None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _ServerConnection(self), "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    def markers(self) -> list[int]:
        return [marker for _, _, marker in self.received]


class _ServerConnection(asyncio.Protocol):
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.broker.accepted += 1
        self.broker.open += 1
        if self.broker.close_on_accept > 0:
            self.broker.close_on_accept -= 1
            transport.close()
        self.broker.changes.notify()

    def connection_lost(self, exc: Exception | None) -> None:
        self.broker.open -= 1
        self.broker.changes.notify()

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        for frame in self.decoder.feed(data):
            request = decode_request(frame)
            if isinstance(request.body, ApiVersionsRequest):
                self.answer(request, ApiVersionsResponse(error_code=0, api_keys=API_VERSIONS))
                continue
            body = request.body
            assert isinstance(body, (LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest))
            marker = body.controller_epoch
            seen = sum(1 for _, _, m in self.broker.received if m == marker)
            self.broker.received.append((request.api_key, request.api_version, marker))
            self.broker.changes.notify()
            action = self.broker.policy(marker, seen)
            if action == DROP:
                self.transport.close()
                return
            if action == ANSWER:
                self.answer(request, ANSWERS[request.api_key])

    def answer(self, request: Request, body: Message) -> None:
        assert self.transport is not None
        chunks = encode_response(body, request.api_version, request.correlation_id)
        assert all(isinstance(chunk, (bytes, bytearray, memoryview)) for chunk in chunks)
        self.transport.write(b"".join(chunks))  # type: ignore[arg-type]  # no file regions in control answers


def broker_info(port: int, broker_id: int = 1, epoch: int = 10) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint("127.0.0.1", port),), epoch=epoch)


def channel_config(request_timeout_ms: int = 30_000) -> ChannelConfig:
    return ChannelConfig(controller_id=0, retry_backoff_ms=10, request_timeout_ms=request_timeout_ms)


def marked(marker: int) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(controller_id=0, controller_epoch=marker, broker_epoch=10)


class Answers:
    """Callbacks that record which marker was answered, in order."""

    def __init__(self, changes: Changes) -> None:
        self.changes = changes
        self.markers: list[int] = []

    def callback(self, marker: int) -> Callable[[Message], None]:
        def record(response: Message) -> None:
            assert isinstance(response, UpdateMetadataResponse) and response.error_code == 0
            self.markers.append(marker)
            self.changes.notify()
        return record


def run(scenario: Callable[[Changes], Coroutine[None, None, None]]) -> None:
    async def main() -> None:
        await scenario(Changes())
    asyncio.run(main())


def test_order_is_kept_across_a_dropped_connection() -> None:
    async def scenario(changes: Changes) -> None:
        broker = FakeBroker(changes, policy=lambda marker, seen: DROP if marker == 2 and seen == 0 else ANSWER)
        port = await broker.start()
        channel, answers = ControllerChannelManager(channel_config()), Answers(changes)
        channel.add_broker(broker_info(port))
        for marker in (1, 2, 3):
            channel.send(1, marked(marker), 8, answers.callback(marker))
        await changes.until(lambda: len(answers.markers) == 3)
        assert answers.markers == [1, 2, 3]
        # 2 was dropped once and sent again on a new connection; 3 never went ahead of it.
        assert broker.markers() == [1, 2, 2, 3]
        assert broker.accepted == 2
        assert {version for _, version, _ in broker.received} == {8}
        await channel.shutdown()
        await broker.stop()
    run(scenario)


def test_a_request_is_retried_until_answered() -> None:
    async def scenario(changes: Changes) -> None:
        # Two connections closed as they open (before ApiVersions is answered), then the
        # request itself dropped twice: the fifth connection gets it through.
        broker = FakeBroker(changes, policy=lambda marker, seen: DROP if seen < 2 else ANSWER,
                            close_on_accept=2)
        port = await broker.start()
        channel, answers = ControllerChannelManager(channel_config()), Answers(changes)
        channel.add_broker(broker_info(port))
        channel.send(1, marked(7), 8, answers.callback(7))
        await changes.until(lambda: answers.markers == [7])
        assert broker.markers() == [7, 7, 7]
        assert broker.accepted == 5
        await channel.shutdown()
        await broker.stop()
    run(scenario)


def test_an_unanswered_request_times_out_and_is_sent_again() -> None:
    async def scenario(changes: Changes) -> None:
        broker = FakeBroker(changes, policy=lambda marker, seen: HOLD if seen == 0 else ANSWER)
        port = await broker.start()
        channel, answers = ControllerChannelManager(channel_config(request_timeout_ms=300)), Answers(changes)
        channel.add_broker(broker_info(port))
        channel.send(1, marked(4), 8, answers.callback(4))
        await changes.until(lambda: answers.markers == [4])
        # At least the held attempt and the answered one (a loaded machine may add more).
        assert len(broker.markers()) >= 2 and set(broker.markers()) == {4}
        await channel.shutdown()
        await broker.stop()
    run(scenario)


def test_removing_a_broker_stops_retrying_and_drops_its_queue() -> None:
    async def scenario(changes: Changes) -> None:
        broker = FakeBroker(changes, policy=lambda marker, seen: DROP if marker == 1 else ANSWER)
        port = await broker.start()
        channel, answers = ControllerChannelManager(channel_config()), Answers(changes)
        channel.add_broker(broker_info(port))
        channel.send(1, marked(1), 8, answers.callback(1))  # never answered
        channel.send(1, marked(9), 8, answers.callback(9))  # queued behind it
        await changes.until(lambda: broker.markers().count(1) >= 2)
        await channel.remove_broker(1)
        assert channel.broker_ids == frozenset()
        await changes.until(lambda: broker.open == 0)
        seen_before = len(broker.received)
        # The broker comes back (same id, a new epoch): only what is sent now reaches it.
        channel.add_broker(broker_info(port, epoch=11))
        channel.send(1, marked(2), 8, answers.callback(2))
        await changes.until(lambda: answers.markers == [2])
        assert broker.markers()[seen_before:] == [2]
        assert answers.markers == [2]
        await channel.shutdown()
        await broker.stop()
    run(scenario)


def test_a_request_for_an_unknown_broker_is_not_sent() -> None:
    async def scenario(changes: Changes) -> None:
        broker = FakeBroker(changes)
        port = await broker.start()
        channel, answers = ControllerChannelManager(channel_config()), Answers(changes)
        channel.add_broker(broker_info(port))
        channel.add_broker(broker_info(port + 1))  # a known id is left as it is
        channel.send(5, marked(5), 8, answers.callback(5))
        channel.send(1, marked(6), 8, answers.callback(6))
        await changes.until(lambda: answers.markers == [6])
        assert broker.markers() == [6]
        await channel.shutdown()
        await changes.until(lambda: broker.open == 0)
        await broker.stop()
    run(scenario)


@dataclass
class Responses:
    changes: Changes
    seen: list[tuple[str, int]] = field(default_factory=list)

    def record(self, kind: str, broker_id: int) -> None:
        self.seen.append((kind, broker_id))
        self.changes.notify()


def test_a_batch_reaches_brokers_through_the_channel_in_kafkas_order() -> None:
    async def scenario(changes: Changes) -> None:
        brokers = [FakeBroker(changes), FakeBroker(changes)]
        ports = [await b.start() for b in brokers]
        context = ControllerContext()
        context.set_live_brokers([broker_info(ports[0], 1, 101), broker_info(ports[1], 2, 202)])
        context.add_topic("orders", TopicAssignment(uuid.uuid4(), {0: (1, 2)}))
        state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1, 2), 5), controller_epoch=12)
        context.put_partition_leadership_info(("orders", 0), state)
        channel = ControllerChannelManager(channel_config())
        for info in context.live_or_shutting_down_brokers:
            channel.add_broker(info)
        responses = Responses(changes)
        batch = ControllerRequestBatch(
            0, context, channel,
            on_leader_and_isr_response=lambda b, r: responses.record("LeaderAndIsr", b),
            on_update_metadata_response=lambda b, r: responses.record("UpdateMetadata", b),
            on_stop_replica_response=lambda b, r, deleted: responses.record("StopReplica", b))
        batch.new_batch()
        batch.add_leader_and_isr([1, 2], ("orders", 0), state, (1, 2), is_new=True)
        batch.add_stop_replica([2], ("orders", 0), delete=False)
        batch.send_requests_to_brokers(12)
        await changes.until(lambda: len(responses.seen) == 5)
        assert [kind for kind, b in responses.seen if b == 2] == ["LeaderAndIsr", "UpdateMetadata", "StopReplica"]
        assert [kind for kind, b in responses.seen if b == 1] == ["LeaderAndIsr", "UpdateMetadata"]
        assert brokers[0].received == [(4, 7, 12), (6, 8, 12)]
        assert brokers[1].received == [(4, 7, 12), (6, 8, 12), (5, 4, 12)]
        await channel.shutdown()
        for broker in brokers:
            await broker.stop()
    run(scenario)


def test_a_failing_callback_does_not_stop_the_queue() -> None:
    async def scenario(changes: Changes) -> None:
        broker = FakeBroker(changes)
        port = await broker.start()
        channel, answers = ControllerChannelManager(channel_config()), Answers(changes)
        channel.add_broker(broker_info(port))

        def broken(response: Message) -> None:
            raise RuntimeError("a bug in the controller's handler")
        channel.send(1, marked(1), 8, broken)
        channel.send(1, marked(2), 8, answers.callback(2))
        await changes.until(lambda: answers.markers == [2])
        assert broker.markers() == [1, 2]
        await channel.shutdown()
        await broker.stop()
    run(scenario)


def test_a_broker_without_the_controller_listener_is_refused() -> None:
    async def scenario(changes: Changes) -> None:
        channel = ControllerChannelManager(ChannelConfig(controller_id=0, listener_name="INTERNAL"))
        with pytest.raises(ValueError, match=r"^broker 1 has no endpoint for listener INTERNAL: \['PLAINTEXT'\]$"):
            channel.add_broker(broker_info(9092))
        assert channel.broker_ids == frozenset()
    run(scenario)
