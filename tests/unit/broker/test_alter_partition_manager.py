"""AlterPartitionManager against a small controller endpoint in this process: a real TCP
server speaking the Kafka framing (ApiVersions, then AlterPartition answered by a script
the test writes), found through the MetadataCache as UpdateMetadata would describe it.

The manager under test is the real one (real connection, real encoding); only the
controller is a stand-in, since the controller's side is another module's.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

from strom.broker.alter_partition_manager import AlterPartitionManager
from strom.broker.metadata_cache import BrokerEndpoint, LiveBroker, MetadataCache, PartitionState
from strom.cluster.zk_data import LeaderAndIsr
from strom.protocol.error_codes import ErrorCode
from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import decode_request, encode_response
from strom.protocol.message import Message
from strom.protocol.messages.alter_partition_request import AlterPartitionRequest
from strom.protocol.messages.alter_partition_response import (
    AlterPartitionResponse,
    PartitionData,
    TopicData,
)
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse

BROKER_ID = 1
BROKER_EPOCH = 77
CONTROLLER = 3
TOPIC_ID = uuid.UUID(int=0x1234)

Answer = Callable[[AlterPartitionRequest, int], Message | None]  # None: drop the connection


class FakeController:
    """Serves ApiVersions and AlterPartition (v0-3) on 127.0.0.1; ``answer`` decides."""

    def __init__(self, answer: Answer, max_version: int = 3) -> None:
        self.answer = answer
        self.max_version = max_version
        self.requests: list[tuple[AlterPartitionRequest, int]] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for frame in decoder.feed(data):
                    request = decode_request(frame)
                    if isinstance(request.body, ApiVersionsRequest):
                        response: Message | None = ApiVersionsResponse(api_keys=(
                            ApiVersion(ApiVersionsRequest.API_KEY or 18, 0, 3),
                            ApiVersion(AlterPartitionRequest.API_KEY or 56, 0, self.max_version)))
                    else:
                        assert isinstance(request.body, AlterPartitionRequest)
                        self.requests.append((request.body, request.api_version))
                        response = self.answer(request.body, request.api_version)
                    if response is None:
                        writer.close()
                        return
                    for chunk in encode_response(response, request.api_version, request.correlation_id):
                        assert isinstance(chunk, bytes | bytearray | memoryview)  # no file regions here
                        writer.write(chunk)
                    await writer.drain()
        finally:
            writer.close()


def committed(request: AlterPartitionRequest, version: int) -> AlterPartitionResponse:
    """The controller agrees to everything: each partition's epoch goes up by one."""
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            isr = tuple(b.broker_id for b in p.new_isr_with_epochs) if version >= 3 else p.new_isr
            partitions.append(PartitionData(partition_index=p.partition_index, leader_id=request.broker_id,
                                            leader_epoch=p.leader_epoch, isr=isr,
                                            partition_epoch=p.partition_epoch + 1))
        topics.append(TopicData(topic_name=topic.topic_name, topic_id=topic.topic_id, partitions=tuple(partitions)))
    return AlterPartitionResponse(topics=tuple(topics))


def metadata_with_controller(port: int, *, topic_id: uuid.UUID | None = TOPIC_ID,
                             listener: str = "REPLICATION") -> MetadataCache:
    metadata = MetadataCache()
    state = PartitionState(leader=BROKER_ID, leader_epoch=5, isr=(1, 2), replicas=(1, 2))
    metadata.update_metadata(
        CONTROLLER,
        [LiveBroker(BROKER_ID, (BrokerEndpoint("127.0.0.1", 1, "CLIENT"),)),
         LiveBroker(CONTROLLER, (BrokerEndpoint("127.0.0.1", 1, "CLIENT"),
                                 BrokerEndpoint("127.0.0.1", port, listener)))],
        [(("t", 0), state), (("t", 1), state), (("u", 0), state)],
        {"t": topic_id, "u": topic_id} if topic_id is not None else None)
    return metadata


def manager(metadata: MetadataCache) -> AlterPartitionManager:
    return AlterPartitionManager(metadata, BROKER_ID, lambda: BROKER_EPOCH, lambda: "REPLICATION",
                                 request_timeout_ms=10_000, connect_timeout_ms=10_000, retry_backoff_ms=10,
                                 retry_backoff_max_ms=50)


def run(controller: FakeController, scenario: Callable[[AlterPartitionManager, FakeController], Awaitable[None]],
        *, topic_id: uuid.UUID | None = TOPIC_ID) -> None:
    async def main() -> None:
        port = await controller.start()
        alter = manager(metadata_with_controller(port, topic_id=topic_id))
        try:
            await scenario(alter, controller)
        finally:
            await alter.shutdown()
            await controller.stop()
    asyncio.run(main())


def test_proposals_are_batched_sent_with_the_broker_epoch_and_answered_with_the_committed_state() -> None:
    async def scenario(alter: AlterPartitionManager, controller: FakeController) -> None:
        first = alter.submit(("t", 0), LeaderAndIsr(BROKER_ID, 5, (1, 2, 3), 9))
        second = alter.submit(("t", 1), LeaderAndIsr(BROKER_ID, 5, (1,), 4))
        assert await asyncio.wait_for(first, 30) == LeaderAndIsr(BROKER_ID, 5, (1, 2, 3), 10)
        assert await asyncio.wait_for(second, 30) == LeaderAndIsr(BROKER_ID, 5, (1,), 5)
        (request, version), = controller.requests  # both in one request
        assert version == 3 and (request.broker_id, request.broker_epoch) == (BROKER_ID, BROKER_EPOCH)
        (topic,) = request.topics
        assert topic.topic_id == TOPIC_ID
        assert [(p.partition_index, [b.broker_id for b in p.new_isr_with_epochs], p.partition_epoch)
                for p in topic.partitions] == [(0, [1, 2, 3], 9), (1, [1], 4)]

    run(FakeController(committed), scenario)


def test_a_topic_without_a_known_id_goes_by_name_in_v1() -> None:
    async def scenario(alter: AlterPartitionManager, controller: FakeController) -> None:
        answer = await asyncio.wait_for(alter.submit(("u", 0), LeaderAndIsr(BROKER_ID, 5, (1,), 2)), 30)
        assert answer == LeaderAndIsr(BROKER_ID, 5, (1,), 3)
        (request, version), = controller.requests
        assert version == 1 and request.topics[0].topic_name == "u" and request.topics[0].partitions[0].new_isr == (1,)

    run(FakeController(committed), scenario, topic_id=None)


def test_a_partition_error_resolves_its_future_and_a_second_proposal_is_not_attempted() -> None:
    def refuse_t0(request: AlterPartitionRequest, version: int) -> AlterPartitionResponse:
        answer = committed(request, version)
        topics = tuple(TopicData(topic_id=t.topic_id, partitions=tuple(
            PartitionData(partition_index=0, error_code=ErrorCode.INVALID_UPDATE_VERSION) if p.partition_index == 0
            else p for p in t.partitions)) for t in answer.topics)
        return AlterPartitionResponse(topics=topics)

    async def scenario(alter: AlterPartitionManager, controller: FakeController) -> None:
        first = alter.submit(("t", 0), LeaderAndIsr(BROKER_ID, 5, (1,), 9))
        again = alter.submit(("t", 0), LeaderAndIsr(BROKER_ID, 5, (1, 2), 9))
        assert again.result() == ErrorCode.OPERATION_NOT_ATTEMPTED  # one per partition, at once
        assert await asyncio.wait_for(first, 30) == ErrorCode.INVALID_UPDATE_VERSION
        other = alter.submit(("t", 1), LeaderAndIsr(BROKER_ID, 5, (1,), 4))
        assert await asyncio.wait_for(other, 30) == LeaderAndIsr(BROKER_ID, 5, (1,), 5)

    run(FakeController(refuse_t0), scenario)


def test_not_controller_and_a_dropped_connection_are_retried_until_answered() -> None:
    script: list[str] = ["drop", "not controller", "stale broker epoch"]

    def flaky(request: AlterPartitionRequest, version: int) -> Message | None:
        step = script.pop(0) if script else "ok"
        if step == "drop":
            return None
        if step == "not controller":
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
        if step == "stale broker epoch":
            return AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        return committed(request, version)

    async def scenario(alter: AlterPartitionManager, controller: FakeController) -> None:
        answer = await asyncio.wait_for(alter.submit(("t", 0), LeaderAndIsr(BROKER_ID, 5, (1, 2), 9)), 60)
        assert answer == LeaderAndIsr(BROKER_ID, 5, (1, 2), 10)
        assert len(controller.requests) == 4
        assert {r.topics[0].partitions[0].partition_epoch for r, _ in controller.requests} == {9}

    run(FakeController(flaky), scenario)


def test_a_partition_left_out_of_the_answer_is_sent_again() -> None:
    calls = 0

    def forgetful(request: AlterPartitionRequest, version: int) -> AlterPartitionResponse:
        nonlocal calls
        calls += 1
        return AlterPartitionResponse(topics=()) if calls == 1 else committed(request, version)

    async def scenario(alter: AlterPartitionManager, controller: FakeController) -> None:
        answer = await asyncio.wait_for(alter.submit(("t", 0), LeaderAndIsr(BROKER_ID, 5, (1,), 2)), 30)
        assert answer == LeaderAndIsr(BROKER_ID, 5, (1,), 3)
        assert len(controller.requests) == 2

    run(FakeController(forgetful), scenario)


def test_without_a_known_controller_it_waits_and_sends_once_one_is_known() -> None:
    async def main() -> None:
        controller = FakeController(committed)
        port = await controller.start()
        metadata = metadata_with_controller(port)
        known = metadata.controller_id
        metadata.controller_id = -1
        alter = manager(metadata)
        try:
            future = alter.submit(("t", 0), LeaderAndIsr(BROKER_ID, 5, (1,), 2))
            await asyncio.sleep(0.2)
            assert not future.done() and controller.requests == []
            metadata.controller_id = known
            assert await asyncio.wait_for(future, 30) == LeaderAndIsr(BROKER_ID, 5, (1,), 3)
        finally:
            await alter.shutdown()
            await controller.stop()
    asyncio.run(main())
