"""The network layer: listen, read frames, hand them to the broker, write the answers.

Concurrency model: one asyncio event loop owns every connection and all broker state
(no locks). Each connection is one task that reads a frame, awaits the broker's answer
and writes it before reading the next: requests on a connection are answered in order
(Kafka "mutes" a connection the same way), pipelined requests wait in the socket
buffer, and a client that stops reading stalls only itself — backpressure instead of
unbounded buffering. Responses go out with ``socket.sendmsg`` (header and small parts)
and ``os.sendfile`` (record data straight from segment files, zero copy).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Sequence

from strom.broker import request_context
from strom.broker.broker import Broker, CloseConnection, Endpoint
from strom.broker.replica_manager import SendfileRegion
from strom.protocol.errors import ProtocolError
from strom.protocol.framing import FrameDecoder
from strom.protocol.primitives import Records

logger = logging.getLogger(__name__)

RECV_BYTES = 256 * 1024
IOV_MAX = 512  # well under Linux's 1024 buffers per sendmsg


def parse_listener(listener: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` (the only security protocol served so far)."""
    scheme, _, address = listener.strip().partition("://")
    if scheme.upper() != "PLAINTEXT" or not address:
        raise ValueError(f"unsupported listener {listener!r}: only PLAINTEXT://host:port")
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


class SocketServer:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._sock is not None
        port: int = self._sock.getsockname()[1]
        return port

    async def start(self) -> None:
        config = self.broker.config
        host, port = parse_listener(config.listeners.split(",")[0])
        self._sock = socket.create_server((host, port), reuse_port=False, backlog=1024)
        self._sock.setblocking(False)
        advertised = config.advertised_listeners.split(",")[0] if config.advertised_listeners else ""
        if advertised:
            adv_host, adv_port = parse_listener(advertised)
        else:
            adv_host, adv_port = (host if host not in ("0.0.0.0", "::") else socket.gethostname()), self.port
        self.broker.advertised = Endpoint(adv_host, adv_port)
        self._accepting = asyncio.create_task(self._accept_loop())

    async def stop(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
        if self._sock is not None:
            self._sock.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._sock is not None
        while True:
            conn, address = await loop.sock_accept(self._sock)
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = asyncio.create_task(Connection(self.broker, conn, address).run())
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)


class Connection:
    def __init__(self, broker: Broker, sock: socket.socket, address: object) -> None:
        self.broker = broker
        self.sock = sock
        self.address = address
        self.loop = asyncio.get_running_loop()
        self.decoder = FrameDecoder(broker.config.socket_request_max_bytes)

    async def run(self) -> None:
        idle = self.broker.config.connections_max_idle_ms / 1000
        if isinstance(self.address, tuple):
            request_context.client_host.set(f"/{self.address[0]}")  # Kafka's "/host" form
        try:
            while True:
                try:
                    data = await asyncio.wait_for(self.loop.sock_recv(self.sock, RECV_BYTES), idle)
                except TimeoutError:
                    logger.info("closing idle connection from %s (connections.max.idle.ms)", self.address)
                    return
                if not data:
                    return
                for frame in self.decoder.feed(data):
                    response = await self.broker.handle(frame)
                    if response is not None:
                        await self.send(response)
        except (ProtocolError, CloseConnection) as exc:
            logger.info("closing connection from %s: %s", self.address, exc)
        except ConnectionError:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("closing connection from %s after an unexpected error", self.address)
        finally:
            self.sock.close()

    async def send(self, chunks: Sequence[Records]) -> None:
        """Write buffers with sendmsg and file regions with sendfile, in order."""
        pending: list[memoryview] = []
        for chunk in chunks:
            if isinstance(chunk, SendfileRegion):
                await self._sendmsg(pending)
                pending = []
                await self._sendfile(chunk)
            elif isinstance(chunk, bytes | bytearray | memoryview):
                if len(chunk):
                    pending.append(memoryview(chunk).cast("B"))
            else:
                raise TypeError(f"cannot send {type(chunk).__name__}")
        await self._sendmsg(pending)

    async def _sendmsg(self, buffers: list[memoryview]) -> None:
        while buffers:
            try:
                sent = self.sock.sendmsg(buffers[:IOV_MAX])
            except BlockingIOError:
                await self._writable()
                continue
            while sent:
                head = buffers[0]
                if sent >= len(head):
                    sent -= len(head)
                    buffers.pop(0)
                else:
                    buffers[0] = head[sent:]
                    sent = 0

    async def _sendfile(self, region: SendfileRegion) -> None:
        offset, remaining = region.position, region.length
        while remaining:
            try:
                sent = os.sendfile(self.sock.fileno(), region.fd, offset, remaining)
            except BlockingIOError:
                await self._writable()
                continue
            if sent == 0:
                raise ConnectionError("segment file ended before the region did")
            offset += sent
            remaining -= sent

    async def _writable(self) -> None:
        future: asyncio.Future[None] = self.loop.create_future()
        fd = self.sock.fileno()

        def ready() -> None:
            if not future.done():
                future.set_result(None)

        self.loop.add_writer(fd, ready)
        try:
            await future
        finally:
            self.loop.remove_writer(fd)


async def serve(broker: Broker, stop: asyncio.Event) -> None:
    """Run a started broker until ``stop`` is set, then shut down cleanly."""
    server = SocketServer(broker)
    await server.start()
    broker.start_background_work()
    endpoint = broker.advertised
    logger.info("strom broker %d ready on %s:%d", broker.node_id, endpoint.host, endpoint.port)
    print(f"strom: broker {broker.node_id} ready on {endpoint.host}:{endpoint.port}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()
        await broker.shutdown()
        logger.info("strom broker stopped cleanly")
