"""A blocking Kafka wire client for the test helpers: CreateTopics, Metadata, ListOffsets, Fetch.

The helpers of ``strom.testing`` (``create_topic``, ``read_all``) speak Kafka's protocol
through Strom's generated codec over one socket, so they work the same on a broker in a
thread of the test process, in a subprocess, or on any Kafka-compatible broker — and they
never go through a client library a test may be checking.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from strom.protocol.error_codes import ErrorCode
from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from strom.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from strom.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from strom.protocol.records.header import iter_batches
from strom.protocol.records.v2 import Record, decode_batch

LATEST, EARLIEST = -1, -2  # ListOffsets' timestamps for the log end and log start offsets
FETCH_BYTES = 8 * 1024 * 1024


class WireError(RuntimeError):
    """The broker answered a helper's request with an error code."""


class WireClient:
    """One connection, one request at a time; ``call`` returns the decoded response."""

    def __init__(self, bootstrap_servers: str, timeout: float = 30.0) -> None:
        host, port = bootstrap_servers.split(",")[0].rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._decoder = FrameDecoder()
        self._correlation_id = 0

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def call(self, request: Message, version: int) -> Any:
        """Typed ``Any`` so callers read the response's fields directly."""
        assert request.API_KEY is not None
        self._correlation_id += 1
        self._sock.sendall(encode_request(request, version, self._correlation_id, "strom-testing"))
        while True:
            frames = list(self._decoder.feed(self._receive()))
            if frames:
                break
        answered_id, response = decode_response(bytes(frames[0]), request.API_KEY, version)
        if answered_id != self._correlation_id:
            raise WireError(f"answer to request {answered_id}, expected {self._correlation_id}")
        return response

    def _receive(self) -> bytes:
        chunk = self._sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        return chunk

    # -- the helpers' requests -------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None) -> None:
        topic = CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=-1,
            configs=tuple(CreatableTopicConfig(key, value) for key, value in (configs or {}).items()),
        )
        response = self.call(CreateTopicsRequest(topics=(topic,), timeout_ms=30_000), version=5)
        (result,) = response.topics
        if result.error_code != ErrorCode.NONE:
            raise WireError(f"CreateTopics {name!r}: {ErrorCode(result.error_code).name}"
                            f"{': ' + result.error_message if result.error_message else ''}")

    def partitions(self, topic: str) -> list[int]:
        request = MetadataRequest(topics=(MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False)
        response = self.call(request, version=9)
        (found,) = response.topics
        if found.error_code != ErrorCode.NONE:
            raise WireError(f"Metadata {topic!r}: {ErrorCode(found.error_code).name}")
        return sorted(partition.partition_index for partition in found.partitions)

    def list_offset(self, topic: str, partition: int, timestamp: int) -> int:
        request = ListOffsetsRequest(
            replica_id=-1, isolation_level=1,  # read_committed: LATEST is the last stable offset
            topics=(ListOffsetsTopic(topic, (ListOffsetsPartition(partition, timestamp=timestamp),)),),
        )
        response = self.call(request, version=5)
        ((found,),) = [t.partitions for t in response.topics]
        if found.error_code != ErrorCode.NONE:
            raise WireError(f"ListOffsets {topic}-{partition}: {ErrorCode(found.error_code).name}")
        offset: int = found.offset
        return offset

    def fetch(self, topic: str, partition: int, offset: int) -> tuple[list[Record], int]:
        """Records from ``offset`` on (committed only, control batches left out), and the
        offset after the last batch returned (``offset`` itself when there was none)."""
        request = FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=FETCH_BYTES, isolation_level=1,
            topics=(FetchTopic(topic=topic, partitions=(
                FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=FETCH_BYTES),)),),
        )
        response = self.call(request, version=11)
        ((found,),) = [t.partitions for t in response.responses]
        if found.error_code != ErrorCode.NONE:
            raise WireError(f"Fetch {topic}-{partition}: {ErrorCode(found.error_code).name}")
        # Kafka's consumer: a producer's aborted transaction starts at its first offset and
        # ends at that producer's next control batch (the abort marker).
        pending = sorted((txn.first_offset, txn.producer_id) for txn in (found.aborted_transactions or ()))
        aborting: set[int] = set()
        records: list[Record] = []
        record_set = bytes(found.records or b"")
        next_offset = offset
        for position, header in iter_batches(record_set):
            last_offset = header.base_offset + header.last_offset_delta
            next_offset = max(next_offset, last_offset + 1)
            while pending and pending[0][0] <= last_offset:
                aborting.add(pending.pop(0)[1])
            if header.is_control:
                aborting.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in aborting:
                continue
            records.extend(r for r in decode_batch(record_set, position, copy=True).records if r.offset >= offset)
        return records, next_offset
