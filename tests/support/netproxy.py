"""A TCP proxy the tests control, for network faults that never leave 127.0.0.1.

    proxy = TcpProxy(0, "127.0.0.1", broker_port)   # clients connect to proxy.port
    proxy.black_hole()                              # bytes stop, connections stay open
    proxy.pass_through()                            # what was held flows on, in order
    assert proxy.stats().withheld[UPSTREAM] > 0     # the fault did happen

Why a proxy: iptables needs root and distinct addresses; a proxy per link (broker to
broker, broker to ZooKeeper) cuts one link while every process stays on loopback.

Each connection is two directions, *upstream* (the connecting side to the target) and
*downstream* (back), each set on its own:

- ``pass_through()``: bytes forwarded as they come;
- ``black_hole()``: bytes read but not forwarded, connections kept open: the receiver
  hears nothing and no error, as with packets dropped by a firewall. What arrives is held
  in order (up to ``HOLD_CHUNKS`` reads, then the proxy stops reading and TCP's flow
  control stops the sender) and flows on after ``pass_through()``, as TCP's
  retransmissions would deliver it once a partition heals; a close is held the same way;
- ``delay(seconds)``: each read is forwarded ``seconds`` after it arrived;
- ``drop()``: every connection is reset now, and each new one is accepted and reset at once
  (a firewall that rejects), until another mode is set. Dropping concerns whole
  connections, so it applies to both directions whatever direction is named.

One asyncio loop in a daemon thread serves the proxy; the control methods are called from
the test's thread and return once the change is in force. Counters (``stats()``) say how
many bytes were forwarded and withheld per direction and how many connections were
accepted, reset by ``drop()``, or refused while dropping, so a test can assert that what it
injected happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

UPSTREAM: Final = "upstream"
DOWNSTREAM: Final = "downstream"
BOTH: Final = "both"
Direction = Literal["upstream", "downstream", "both"]
Mode = Literal["pass", "black_hole", "delay", "drop"]

READ_BYTES: Final = 64 * 1024
HOLD_CHUNKS: Final = 64  # reads held per direction before the proxy stops reading
CONTROL_TIMEOUT_S: Final = 30.0
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ProxyStats:
    forwarded: dict[str, int]  # bytes written on, per direction
    withheld: dict[str, int]  # bytes that arrived while the direction was black-holed
    accepted: int  # connections accepted and forwarded
    reset: int  # connections reset by drop()
    refused: int  # connections reset at once because the proxy was dropping
    open_connections: int


@dataclass(slots=True)
class _DirectionState:
    mode: Mode = "pass"
    delay_s: float = 0.0


@dataclass(eq=False, slots=True)
class _Connection:
    client: asyncio.StreamWriter
    target: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    closed_directions: int = 0  # directions whose sender closed and whose close was passed on

    def reset(self) -> None:
        for writer in (self.client, self.target):
            _reset(writer)
        for task in self.tasks:
            task.cancel()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER 0), so the peer learns at once, as from a rejecting firewall."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class TcpProxy:
    """Forwards ``listen_host:listen_port`` (0: an ephemeral port, see ``port``) to the target."""

    def __init__(self, listen_port: int, target_host: str, target_port: int, *,
                 listen_host: str = "127.0.0.1", name: str = "") -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.name = name or f"proxy-to-{target_host}:{target_port}"
        self._states = {UPSTREAM: _DirectionState(), DOWNSTREAM: _DirectionState()}
        self._forwarded = {UPSTREAM: 0, DOWNSTREAM: 0}
        self._withheld = {UPSTREAM: 0, DOWNSTREAM: 0}
        self._accepted = self._reset_count = self._refused = 0
        self._connections: set[_Connection] = set()
        self._loop = asyncio.new_event_loop()
        self._changed: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name=self.name, daemon=True)
        self._thread.start()
        self._server: asyncio.Server = self._call(self._listen(listen_host, listen_port))
        self.port: int = self._server.sockets[0].getsockname()[1]

    # -- control (any thread) ------------------------------------------------------------------
    def pass_through(self, direction: Direction = BOTH) -> None:
        self._set(direction, "pass")

    def black_hole(self, direction: Direction = BOTH) -> None:
        self._set(direction, "black_hole")

    def delay(self, seconds: float, direction: Direction = BOTH) -> None:
        if seconds < 0:
            raise ValueError(f"a delay cannot be negative: {seconds}")
        self._set(direction, "delay", seconds)

    def drop(self, direction: Direction = BOTH) -> None:
        """Reset every connection and each new one (both directions: a connection is cut whole)."""
        self._set(BOTH if direction == BOTH else direction, "drop")

    def mode(self, direction: Literal["upstream", "downstream"]) -> Mode:
        return self._states[direction].mode

    def stats(self) -> ProxyStats:
        return self._call(self._stats())

    def close(self) -> None:
        """Stop listening, reset every connection, end the thread."""
        if not self._loop.is_running():
            return
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CONTROL_TIMEOUT_S)
        self._loop.close()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _set(self, direction: Direction, mode: Mode, delay_s: float = 0.0) -> None:
        if direction not in (UPSTREAM, DOWNSTREAM, BOTH):
            raise ValueError(f"unknown direction {direction!r}: upstream, downstream or both")
        self._call(self._apply(direction, mode, delay_s))

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(CONTROL_TIMEOUT_S)

    # -- the loop's side -------------------------------------------------------------------------
    async def _listen(self, host: str, port: int) -> asyncio.Server:
        self._changed = asyncio.Event()
        return await asyncio.start_server(self._accept, host, port, reuse_address=True, backlog=128)

    async def _apply(self, direction: Direction, mode: Mode, delay_s: float) -> None:
        for name in (UPSTREAM, DOWNSTREAM) if direction == BOTH else (direction,):
            self._states[name] = _DirectionState(mode, delay_s)
        if self._dropping():
            for connection in list(self._connections):
                connection.reset()
                self._reset_count += 1
            self._connections.clear()
        self._wake()

    def _wake(self) -> None:
        """Writers waiting out a black hole look at the modes again."""
        assert self._changed is not None
        self._changed.set()
        self._changed = asyncio.Event()

    def _dropping(self) -> bool:
        return any(state.mode == "drop" for state in self._states.values())

    async def _stats(self) -> ProxyStats:
        return ProxyStats(dict(self._forwarded), dict(self._withheld), self._accepted, self._reset_count,
                          self._refused, len(self._connections))

    async def _close(self) -> None:
        self._server.close()
        for connection in list(self._connections):
            connection.reset()
        self._connections.clear()
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self._dropping():
            self._refused += 1
            _reset(client_writer)
            return
        try:
            target_reader, target_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:  # the target is down: the connecting side sees its connection end
            _reset(client_writer)
            return
        if self._dropping():  # dropped while connecting
            self._refused += 1
            _reset(client_writer)
            _reset(target_writer)
            return
        self._accepted += 1
        connection = _Connection(client_writer, target_writer)
        self._connections.add(connection)
        upstream: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(HOLD_CHUNKS)
        downstream: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(HOLD_CHUNKS)
        connection.tasks = [
            asyncio.create_task(self._read(UPSTREAM, client_reader, upstream)),
            asyncio.create_task(self._write(UPSTREAM, upstream, target_writer, connection)),
            asyncio.create_task(self._read(DOWNSTREAM, target_reader, downstream)),
            asyncio.create_task(self._write(DOWNSTREAM, downstream, client_writer, connection)),
        ]

    async def _read(self, direction: str, reader: asyncio.StreamReader,
                    queue: asyncio.Queue[tuple[float, bytes]]) -> None:
        """Read and queue with the time each read may go on; b"" queued marks the end."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await reader.read(READ_BYTES)
            except OSError:
                data = b""
            state = self._states[direction]
            if state.mode == "black_hole":
                self._withheld[direction] += len(data)
            await queue.put((loop.time() + (state.delay_s if state.mode == "delay" else 0.0), data))
            if not data:
                return

    async def _write(self, direction: str, queue: asyncio.Queue[tuple[float, bytes]],
                     writer: asyncio.StreamWriter, connection: _Connection) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                due, data = await queue.get()
                while self._states[direction].mode == "black_hole":
                    assert self._changed is not None
                    await self._changed.wait()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:  # the sender closed its side: close ours (a half close where possible)
                    if writer.can_write_eof():
                        writer.write_eof()
                    connection.closed_directions += 1
                    if connection.closed_directions == 2:
                        self._finish(connection)
                    return
                writer.write(data)
                await writer.drain()
                self._forwarded[direction] += len(data)
        except OSError:
            self._end(connection)

    def _finish(self, connection: _Connection) -> None:
        """Both sides closed: close the sockets (FIN, not RST) and forget the connection."""
        self._connections.discard(connection)
        connection.client.close()
        connection.target.close()

    def _end(self, connection: _Connection) -> None:
        if connection in self._connections:
            self._connections.discard(connection)
            connection.reset()


def _ephemeral_low(default: int = 32768) -> int:
    """The lowest port the kernel hands out for bind(0) and for outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


@contextlib.contextmanager
def reserved_ports(count: int, host: str = "127.0.0.1") -> Iterator[list[int]]:
    """``count`` distinct ports nothing listens on, held (bound, not listening) inside the block
    and free after it for the processes that will listen on them. They are drawn below the
    kernel's ephemeral range, so no bind of port 0 and no outgoing connection of any process
    (the other pytest worker's brokers, clients and JVMs) can take one between the block's end
    and the listener's bind — a port from bind(0) was taken so once, in a two-worker run."""
    low = _ephemeral_low()
    candidates = random.Random().sample(range(max(1024, low - 12_000), low), min(count * 50, 11_000))
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for port in candidates:
            if len(ports) == count:
                break
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind((host, port))
            except OSError:
                continue
            ports.append(port)
        if len(ports) < count:
            raise RuntimeError(f"no {count} free ports below {low} on {host}")
        yield ports
