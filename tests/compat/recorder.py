"""A tiny socket recorder that real clients take for a one-broker Kafka cluster.

It answers just enough (ApiVersions, Metadata, Produce) for a producer to get as far
as sending its record batches, and keeps every request it decoded, so tests can check
that Strom's codec reads exactly what librdkafka and kafka-python put on the wire.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import Request, decode_request, encode_response
from strom.protocol.message import Message
from strom.protocol.messages import (
    APIS,
    ApiVersionsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from strom.protocol.messages.api_versions_response import ApiVersion
from strom.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from strom.protocol.messages.produce_response import (
    PartitionProduceResponse,
    TopicProduceResponse,
)

SERVED = (0, 3, 18, 22)  # Produce, Metadata, ApiVersions, InitProducerId (idempotence)
PRODUCER_ID = 4242
# librdkafka infers features from API versions: the v2 record format needs Fetch v4+
# and LZ4 needs FindCoordinator. A producer sends neither, so advertising them costs
# the recorder nothing.
ADVERTISED = (*SERVED, 1, 10)
NODE_ID = 1


class Recorder:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.errors: list[BaseException] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._next_offset = 0
        self._lock = threading.Lock()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        self._closing.set()
        self._server.close()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        with conn:
            while not self._closing.is_set():
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                try:
                    for frame in decoder.feed(data):
                        request = decode_request(frame)
                        with self._lock:
                            self.requests.append(request)
                        response = self._answer(request)
                        if response is not None:
                            conn.sendall(
                                b"".join(
                                    encode_response(
                                        response, request.api_version, request.correlation_id
                                    )
                                )
                            )
                except Exception as exc:  # recorded and asserted on by the test
                    self.errors.append(exc)
                    return

    def _answer(self, request: Request) -> Message | None:
        body = request.body
        if isinstance(body, ProduceRequest):
            return None if body.acks == 0 else self._produced(body)
        if isinstance(body, MetadataRequest):
            names = [t.name for t in body.topics or ()]
            return MetadataResponse(
                brokers=(MetadataResponseBroker(NODE_ID, "127.0.0.1", self.port),),
                cluster_id="strom-recorder",
                controller_id=NODE_ID,
                topics=tuple(_topic(name) for name in names if name),
            )
        if isinstance(body, InitProducerIdRequest):
            return InitProducerIdResponse(producer_id=PRODUCER_ID, producer_epoch=0)
        if request.api_key not in SERVED:
            raise ValueError(f"the recorder does not serve {request.api.name}")
        return ApiVersionsResponse(
            api_keys=tuple(
                ApiVersion(key, APIS[key].versions.start, APIS[key].versions.stop - 1)
                for key in ADVERTISED
            )
        )

    def _produced(self, body: ProduceRequest) -> ProduceResponse:
        with self._lock:
            offset = self._next_offset
            self._next_offset += 1000
        return ProduceResponse(
            responses=tuple(
                TopicProduceResponse(
                    topic.name,
                    tuple(
                        PartitionProduceResponse(p.index, 0, offset) for p in topic.partition_data
                    ),
                )
                for topic in body.topic_data
            )
        )


def _topic(name: str) -> MetadataResponseTopic:
    partition = MetadataResponsePartition(
        error_code=0,
        partition_index=0,
        leader_id=NODE_ID,
        leader_epoch=0,
        replica_nodes=(NODE_ID,),
        isr_nodes=(NODE_ID,),
    )
    return MetadataResponseTopic(
        error_code=0,
        name=name,
        topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
        partitions=(partition,),
    )


@contextmanager
def recording() -> Iterator[Recorder]:
    recorder = Recorder()
    recorder.start()
    try:
        yield recorder
    finally:
        recorder.close()
