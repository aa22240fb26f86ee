"""A TCP proxy between a client and a broker that can lose answers on purpose.

It reads the client's request frames to learn each correlation id's API key, then
forwards the broker's answers; told to drop the answer to the n-th Produce request,
it swallows that answer (the broker has appended the records) and cuts the client's
connection, which is exactly the lost acknowledgement an idempotent producer must
survive without writing the records twice.

Metadata answers are rewritten so the client keeps talking through the proxy: every
broker's host and port become the proxy's own.
"""

from __future__ import annotations

import asyncio
import struct
import threading

from strom.protocol.headers import decode_response, encode_response, peek_request
from strom.protocol.messages.metadata_response import MetadataResponse

PRODUCE, METADATA = 0, 3


class DroppingProxy:
    def __init__(self, broker: str, drop_produce_answers: set[int]) -> None:
        host, port = broker.rsplit(":", 1)
        self.target = (host, int(port))
        self.drop = set(drop_produce_answers)  # 1-based numbers of Produce requests
        self.produce_requests = 0
        self.dropped = 0
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(10)
        self.bootstrap = f"127.0.0.1:{self.port}"

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        broker_reader, broker_writer = await asyncio.open_connection(*self.target)
        pending: dict[int, tuple[int, int, bool]] = {}  # correlation id -> (api key, version, drop)

        async def upstream() -> None:
            while True:
                frame = await _read_frame(client_reader)
                if frame is None:
                    break
                api_key, api_version, correlation_id = peek_request(frame)
                drop = False
                if api_key == PRODUCE:
                    self.produce_requests += 1
                    drop = self.produce_requests in self.drop
                pending[correlation_id] = (api_key, api_version, drop)
                broker_writer.write(struct.pack(">i", len(frame)) + frame)
            broker_writer.close()

        async def downstream() -> None:
            while True:
                frame = await _read_frame(broker_reader)
                if frame is None:
                    break
                (correlation_id,) = struct.unpack_from(">i", frame)
                api_key, api_version, drop = pending.pop(correlation_id, (-1, -1, False))
                if drop:
                    self.dropped += 1
                    client_writer.transport.abort()  # the answer is lost with the connection
                    broker_writer.close()
                    return
                if api_key == METADATA:
                    frame = self._rewrite_metadata(frame, api_version)
                client_writer.write(struct.pack(">i", len(frame)) + frame)
            client_writer.close()

        await asyncio.gather(upstream(), downstream(), return_exceptions=True)

    def _rewrite_metadata(self, frame: bytes, version: int) -> bytes:
        correlation_id, body = decode_response(frame, METADATA, version)
        assert isinstance(body, MetadataResponse)
        brokers = tuple(type(b)(node_id=b.node_id, host="127.0.0.1", port=self.port, rack=b.rack)
                        for b in body.brokers)
        rewritten = MetadataResponse(
            throttle_time_ms=body.throttle_time_ms, brokers=brokers, cluster_id=body.cluster_id,
            controller_id=body.controller_id, topics=body.topics,
            cluster_authorized_operations=body.cluster_authorized_operations)
        chunks = encode_response(rewritten, version, correlation_id)
        return b"".join(bytes(c) for c in chunks)[4:]  # type: ignore[arg-type]


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
