"""An in-process broker for handler tests: the real ``Broker`` in the test's own event loop.

No socket and no subprocess. A request is encoded with the generated codec exactly as a
client puts it on the wire (header and body, size prefix stripped as the network layer's
framing does), handed to ``Broker.handle`` as one frame, and the buffers the broker
answers with are joined (file regions read back from the segment file, the bytes
``sendfile`` would send) and decoded into the API's response class for that version.
So a test goes through the whole public path — decode, dispatch, handler, storage,
encode — and keeps working however the broker's insides are reshaped.

pytest-asyncio is not used in this repository: a test hands an ``async`` scenario to the
``broker`` fixture, which runs it with ``asyncio.run`` between ``startup()`` +
``start_background_work()`` and ``shutdown()``::

    def test_metadata(broker: BrokerRunner) -> None:
        async def scenario(h: BrokerHarness) -> None:
            response = await h.request(MetadataRequest(topics=None), version=12)
            assert response.brokers[0].node_id == 1

        broker.run(scenario)
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from strom.broker import request_context
from strom.broker.broker import Broker
from strom.broker.config import BrokerConfig
from strom.protocol.error_codes import ErrorCode
from strom.protocol.framing import size_prefix
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from strom.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from strom.protocol.primitives import Region
from strom.protocol.records.header import iter_batches
from strom.protocol.records.v2 import Record, decode_batch
from strom.protocol.records.v2_builder import build_record_batch

CLIENT_ID = "harness"
CLIENT_HOST = "/127.0.0.1"  # what a connection from localhost sets (JoinGroup records it)

# Settings that keep a test broker small and quick; everything else is Kafka's default.
TEST_PROPERTIES: Mapping[str, str] = {
    "offsets.topic.num.partitions": "1",  # one __consumer_offsets directory, not 50
    "group.initial.rebalance.delay.ms": "0",  # a lone member's first join answers at once
    "log.cleaner.enable": "false",  # no cleaner threads unless a test asks for them
}

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3  # ListOffsets' special timestamps

Scenario = Callable[["BrokerHarness"], Awaitable[None]]


class BrokerHarness:
    """A started broker and the client side of its request path."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._correlation_ids = itertools.count(1)

    # -- the request path ----------------------------------------------------------------
    async def request(self, body: Message, version: int, *, client_id: str | None = CLIENT_ID) -> Any:
        """The decoded answer to ``body`` sent at ``version``; None when there is none (acks=0).

        Typed ``Any`` so tests read the response's fields directly; ``decode_response``
        builds the API's own response class and refuses trailing bytes.
        """
        correlation_id = next(self._correlation_ids)
        frame = encode_request(body, version, correlation_id, client_id)
        answer = await self.send_frame(frame[4:])
        if answer is None:
            return None
        assert body.API_KEY is not None
        answered_id, response = decode_response(answer[4:], body.API_KEY, version)
        assert answered_id == correlation_id
        return response

    async def send_frame(self, frame: bytes) -> bytes | None:
        """One request frame (no size prefix) in, the whole response frame (with it) out.

        ``CloseConnection`` from the broker propagates: the caller asserts on it.
        """
        chunks = await self.broker.handle(frame)
        if chunks is None:
            return None
        answer = b"".join(_materialise(chunk) for chunk in chunks)
        assert answer[:4] == size_prefix(len(answer) - 4), "the size prefix must count the whole frame"
        return answer

    # -- helpers -------------------------------------------------------------------------
    async def create_topic(
        self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> uuid.UUID:
        """Create a topic through CreateTopics (v7) and return its id."""
        topic = CreatableTopic(
            name=name,
            num_partitions=partitions,
            replication_factor=1,
            configs=tuple(CreatableTopicConfig(k, v) for k, v in (configs or {}).items()),
        )
        response = await self.request(CreateTopicsRequest(topics=(topic,), timeout_ms=5000), version=7)
        (result,) = response.topics
        assert result.error_code == ErrorCode.NONE, result.error_message
        topic_id: uuid.UUID = result.topic_id
        return topic_id

    async def produce(
        self,
        topic: str,
        partition: int,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[bytes | None] | None = None,
        timestamp: int | None = None,
    ) -> int:
        """Append one v2 batch through Produce (v9, acks=-1); its base offset."""
        response = await self.request(produce_request(topic, partition, batch(values, keys=keys, timestamp=timestamp)),
                                      version=9)
        (topic_response,) = response.responses
        (partition_response,) = topic_response.partition_responses
        assert partition_response.error_code == ErrorCode.NONE, partition_response.error_message
        base_offset: int = partition_response.base_offset
        return base_offset

    async def list_offset(self, topic: str, partition: int, timestamp: int = LATEST) -> int:
        """ListOffsets (v7): the offset for ``timestamp`` (-1 latest, -2 earliest, -3 max timestamp)."""
        request = ListOffsetsRequest(
            replica_id=-1, topics=(ListOffsetsTopic(topic, (ListOffsetsPartition(partition, timestamp=timestamp),)),)
        )
        response = await self.request(request, version=7)
        ((found,),) = [t.partitions for t in response.topics]
        assert found.error_code == ErrorCode.NONE
        offset: int = found.offset
        return offset


def batch(
    values: Sequence[bytes | None], *, keys: Sequence[bytes | None] | None = None, timestamp: int | None = None
) -> bytes:
    """One uncompressed v2 batch of ``values`` (keyless unless ``keys`` are given)."""
    keys = keys if keys is not None else [None] * len(values)
    return bytes(build_record_batch((key, value, (), timestamp) for key, value in zip(keys, values, strict=True)))


def produce_request(topic: str, partition: int, records: bytes | None, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=(TopicProduceData(topic, (PartitionProduceData(partition, records),)),),
    )


def records_of(record_set: bytes | bytearray | memoryview | None) -> list[Record]:
    """Every record of a fetched record set (a trailing partial batch is left out, as clients do)."""
    if not record_set:
        return []
    return [record for pos, _ in iter_batches(record_set) for record in decode_batch(record_set, pos, copy=True).records]


def _materialise(chunk: object) -> bytes:
    """A response chunk as bytes: buffers as they are, a file region read from its file."""
    if isinstance(chunk, bytes | bytearray | memoryview):
        return bytes(chunk)
    region: Region = chunk  # type: ignore[assignment]
    data = os.pread(region.fd, region.length, region.position)
    assert len(data) == region.length, "a file region must lie within its file"
    return data


class BrokerRunner:
    """Runs scenarios against a fresh broker over the test's temporary data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def config(self, properties: Mapping[str, str] | None = None) -> BrokerConfig:
        merged = {"log.dirs": str(self.data_dir), **TEST_PROPERTIES, **(properties or {})}
        return BrokerConfig.from_properties(merged)

    def run(self, scenario: Scenario, properties: Mapping[str, str] | None = None) -> None:
        """Start a broker, run ``scenario`` on it in a new event loop, shut it down."""
        config = self.config(properties)

        async def main() -> None:
            request_context.client_host.set(CLIENT_HOST)
            broker = Broker(config)
            broker.startup()
            broker.start_background_work()
            try:
                await scenario(BrokerHarness(broker))
            finally:
                await broker.shutdown()

        asyncio.run(main())


# Memory-backed when the machine has one: the broker fsyncs as it would in production
# (topic metadata, checkpoints, offset commits), and on a busy disk those fsyncs, not
# the broker, took most of a handler test's time (30 s against 8 s for the suite).
# Durability is the crash tests' business, not these.
MEMORY_DIR = Path("/dev/shm")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerRunner]:
    """A ``BrokerRunner`` over a fresh data directory of this test's own (in memory if possible)."""
    if MEMORY_DIR.is_dir() and os.access(MEMORY_DIR, os.W_OK):
        data_dir = Path(tempfile.mkdtemp(prefix="strom-harness-", dir=MEMORY_DIR))
        try:
            yield BrokerRunner(data_dir)
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
    else:
        data_dir = tmp_path / "data"
        data_dir.mkdir()
        yield BrokerRunner(data_dir)
