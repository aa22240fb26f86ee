"""The network layer: listen, read frames, hand them to the broker, write the answers.

Concurrency model: one asyncio event loop owns every connection and all broker state
(no locks). Each connection is one task that reads a frame, awaits the broker's answer
and writes it before reading the next: requests on a connection are answered in order
(Kafka "mutes" a connection the same way), pipelined requests wait in the socket
buffer, and a client that stops reading stalls only itself — backpressure instead of
unbounded buffering. Responses go out with ``socket.sendmsg`` (header and small parts)
and ``os.sendfile`` (record data straight from segment files, zero copy).

TLS listeners (SSL, SASL_SSL: ``BrokerConfig.tls_listeners``) get a ``TlsConnection``, chosen
once at accept so a PLAINTEXT connection does no TLS work at all: the standard library's
``ssl.SSLObject`` over two ``MemoryBIO``s (sans-IO) on the same non-blocking socket, the
handshake on the connection's own task with a time limit. Neither ``sendmsg`` nor
``sendfile`` can carry TLS records, so its write path reads segment bytes (``os.preadv``
into a bounded buffer) and encrypts them: zero copy is lost on TLS, as on Kafka.

Idle connections are found by one sweep over all connections (Kafka's selector does the
same), not by a timeout around every read: ``asyncio.wait_for`` costs a task per call
and, on Python 3.11, can swallow a cancellation that races with a completed read,
which once left a shutting-down broker waiting on a connection that would never end.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, cast

from strom.broker import request_context
from strom.broker.broker import Broker, Endpoint
from strom.broker.connection_errors import CloseConnection
from strom.protocol.errors import ProtocolError
from strom.protocol.framing import FrameDecoder
from strom.protocol.primitives import Records, Region
from strom.security.authenticator import Authenticator
from strom.security.ssl_principal_mapper import (
    ANONYMOUS,
    CertificateError,
    NoMatchingRule,
    subject_dn,
)

if TYPE_CHECKING:
    from strom.security.tls import ListenerTls

logger = logging.getLogger(__name__)

RECV_BYTES = 256 * 1024
IOV_MAX = 512  # well under Linux's 1024 buffers per sendmsg
SHUTDOWN_GRACE_S = 5.0  # how long a stopping server waits for cancelled connections
TLS_HANDSHAKE_TIMEOUT_S = 15.0  # a client that starts a TLS connection must finish its handshake by then
TLS_WRITE_BYTES = 256 * 1024  # plaintext encrypted per write: bounds a TLS connection's buffers
TLS_RECEIVE_BYTES = 64 * 1024  # decrypted bytes handed to the framing at once (kept per connection)


class SocketServer:
    """One listening socket per listener (``strom.broker.listeners``); each connection knows
    the listener it came through, so handlers answer with that listener's endpoints."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._sockets: dict[str, socket.socket] = {}  # listener name -> bound socket
        self._accepting: list[asyncio.Task[None]] = []
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._sweeping: asyncio.Task[None] | None = None
        self._tls: dict[str, ListenerTls] = {}  # TLS listener name -> its context and principal mapping

    @property
    def ports(self) -> dict[str, int]:
        """The port each listener bound (an ephemeral one where it asked for 0)."""
        return {name: sock.getsockname()[1] for name, sock in self._sockets.items()}

    @property
    def port(self) -> int:
        """The first listener's port."""
        return next(iter(self.ports.values()))

    async def start(self) -> None:
        settings = self.broker.listener_settings
        try:  # the TLS listeners (SSL, SASL_SSL) and their contexts
            self._tls = self.broker.config.tls_listeners()
        except ValueError as exc:  # a ConfigError: read at start already; a file changed since is still one line
            raise ListenError(str(exc)) from None
        for listener in settings.listeners:
            host = listener.host or "0.0.0.0"  # an empty host: every interface, as Kafka
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            try:
                sock = socket.create_server((host, listener.port), family=family, reuse_port=False, backlog=1024)
            except OSError as exc:  # an operator's to fix (a port in use, an address not here): one line
                self._close_sockets()
                raise ListenError(f"cannot listen on {host}:{listener.port}: {exc.strerror or exc} "
                                  f"(listener {listener.name})") from None
            sock.setblocking(False)
            self._sockets[listener.name] = sock
        ports = self.ports
        endpoints = {}
        for advertised in settings.advertised:  # Kafka: an empty host is this machine's name, port 0 the bound one
            endpoints[advertised.name] = Endpoint(advertised.host or socket.getfqdn(),
                                                  advertised.port or ports[advertised.name])
        self.broker.advertised_endpoints = endpoints
        self.broker.advertised = endpoints[settings.advertised[0].name]
        self._accepting = [asyncio.create_task(self._accept_loop(name, sock)) for name, sock in self._sockets.items()]
        if self.broker.metrics is not None and self.broker.metrics.collector is not None:  # issue 21: per listener
            self.broker.metrics.collector.connection_listeners = lambda: [c.listener for c in self._connections.values()]
        self._sweeping = asyncio.create_task(self._idle_sweep(self.broker.config.connections_max_idle_ms / 1000))

    def _close_sockets(self) -> None:
        for sock in self._sockets.values():
            sock.close()

    async def stop(self) -> None:
        for background in (*self._accepting, self._sweeping):
            if background is not None:
                background.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await background
        self._close_sockets()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE_S)
            if stuck:  # never expected; shutting down matters more than waiting for them
                logger.warning("%d connections did not stop within %.0f s", len(stuck), SHUTDOWN_GRACE_S)

    async def _idle_sweep(self, idle_s: float) -> None:
        """Close connections that have waited for a request longer than ``idle_s``."""
        interval = min(max(idle_s / 4, 0.01), 5.0)
        while True:
            await asyncio.sleep(interval)
            deadline = time.monotonic() - idle_s
            for task, connection in list(self._connections.items()):
                if connection.waiting_since is not None and connection.waiting_since < deadline:
                    connection.idle = True
                    task.cancel()

    async def _accept_loop(self, listener: str, server_socket: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        tls = self._tls.get(listener)  # chosen once per listener: a PLAINTEXT connection does no TLS work
        while True:
            conn, address = await loop.sock_accept(server_socket)
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = Connection(self.broker, conn, address, listener) if tls is None else \
                TlsConnection(self.broker, conn, address, listener, tls)
            task = asyncio.create_task(connection.run())
            self._connections[task] = connection
            task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        del self._connections[task]


class Connection:
    def __init__(self, broker: Broker, sock: socket.socket, address: object, listener: str = "") -> None:
        self.broker = broker
        self.sock = sock
        self.address = address
        self.listener = listener  # the listener's name; "" means the broker's first
        self.loop = asyncio.get_running_loop()
        self.decoder = FrameDecoder(broker.config.socket_request_max_bytes)
        # When the connection began waiting for its next request; None while one is served.
        self.waiting_since: float | None = time.monotonic()
        self.idle = False  # set by the server's sweep just before it cancels this connection
        # SASL listeners: the connection's authenticator answers frames until the principal is
        # known (strom.security.authenticator); None on PLAINTEXT and SSL listeners.
        host = self.address[0] if isinstance(self.address, tuple) else ""
        self.authenticator: Authenticator | None = broker.new_authenticator(listener, host)
        # The next bytes from the client, b"" at its end (TlsConnection: decrypted ones).
        self.receive: Callable[[], Awaitable[bytes | memoryview]] = functools.partial(self.loop.sock_recv, sock, RECV_BYTES)

    async def run(self) -> None:
        if isinstance(self.address, tuple):
            request_context.client_host.set(f"/{self.address[0]}")  # Kafka's "/host" form
        request_context.listener_name.set(self.listener)
        try:
            while True:
                data = await self.receive()
                if not data:
                    return
                self.waiting_since = None
                frames = self.decoder.feed(data) if self.authenticator is None else self._sasl_frames(data, self.authenticator)
                for frame in frames:
                    authenticator = self.authenticator
                    if authenticator is not None and authenticator.intercepts(frame):
                        response = await authenticator.handle(frame)
                        request_context.principal.set(authenticator.principal)
                        if response is not None:
                            await self.send(response)
                        delay_s = authenticator.close_delay_s()
                        if delay_s is not None:  # a failed authentication: answered, now closed
                            await asyncio.sleep(delay_s)
                            raise CloseConnection("authentication failed")
                        continue
                    response = await self.broker.handle(frame)
                    if response is not None:
                        await self.send(response)
                    if request_context.throttle_ms.get():  # a quota's delay (KIP-219): mute, then go on
                        await self._mute()
                self.waiting_since = time.monotonic()
        except (ProtocolError, CloseConnection) as exc:
            logger.info("closing connection from %s: %s", self.address, exc)
        except ConnectionError:
            pass
        except asyncio.CancelledError:
            if not self.idle:
                raise
            logger.info("closing idle connection from %s (connections.max.idle.ms)", self.address)
        except Exception:
            logger.exception("closing connection from %s after an unexpected error", self.address)
        finally:
            self.close()

    def close(self) -> None:
        self.sock.close()

    def _sasl_frames(self, data: bytes | memoryview, authenticator: Authenticator) -> Iterator[bytes]:
        """A SASL connection's frames, one at a time while it authenticates: each size is
        checked against ``sasl.server.max.receive.size`` before its body is buffered (Kafka's
        SaslServerAuthenticator), and after authentication against ``socket.request.max.bytes``,
        even for a frame that arrived with the last token. The next frame is decoded only once
        the one before has been answered, so the limit is the one in force then."""
        decoder = self.decoder
        while True:
            limit = authenticator.max_receive_size
            if limit is None:
                decoder.max_frame_size = self.broker.config.socket_request_max_bytes
                yield from decoder.feed(data)
                return
            decoder.max_frame_size = min(limit, self.broker.config.socket_request_max_bytes)
            frame = decoder.next_frame(data)
            if frame is None:
                return
            data = b""
            yield frame

    async def _mute(self) -> None:
        delay_ms = request_context.throttle_ms.get()
        request_context.throttle_ms.set(0)
        await asyncio.sleep(delay_ms / 1000)

    async def send(self, chunks: Sequence[Records]) -> None:
        """Write buffers with sendmsg and file regions with sendfile, in order."""
        pending: list[memoryview] = []
        for chunk in chunks:
            if isinstance(chunk, bytes | bytearray | memoryview):
                if len(chunk):
                    pending.append(memoryview(chunk).cast("B"))
            else:  # a Region: a range of a segment file
                await self._sendmsg(pending)
                pending = []
                await self._sendfile(chunk)
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

    async def _sendfile(self, region: Region) -> None:
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


class TlsConnection(Connection):
    """A connection on a TLS listener: the same request loop over ``ssl.SSLObject``.

    The socket stays non-blocking and the event loop's; TLS is sans-IO in between: bytes
    read from the socket go into ``_incoming``, the TLS object turns them into plaintext
    (``receive``) and plaintext into records in ``_outgoing``, which ``_flush`` writes.
    """

    def __init__(self, broker: Broker, sock: socket.socket, address: object, listener: str,
                 tls: ListenerTls) -> None:
        super().__init__(broker, sock, address, listener)
        self.tls = tls
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls_object = tls.context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.receive = self._receive_tls
        self._plaintext_view = memoryview(bytearray(TLS_RECEIVE_BYTES))  # receive's buffer, reused
        self._region_buffer: memoryview | None = None  # _send_region's, made on the first fetch
        self.principal = ANONYMOUS  # the TLS principal, once the handshake is done

    async def run(self) -> None:
        try:
            async with asyncio.timeout(TLS_HANDSHAKE_TIMEOUT_S):
                principal = await self._handshake()
        except (OSError, TimeoutError, NoMatchingRule, CertificateError) as exc:  # ssl.SSLError is an OSError
            # A plaintext client, an untrusted or expired certificate, a client that went away:
            # one line, and the broker goes on (the client has had TLS's alert where it applies).
            logger.info("closing connection from %s: TLS handshake on listener %s failed: %s", self.address,
                        self.listener, _reason(exc))
            self.sock.close()
            return
        except asyncio.CancelledError:
            self.sock.close()
            if not self.idle:
                raise
            return
        self.principal = principal
        request_context.principal.set(principal)  # a SASL_SSL authenticator replaces it once authenticated
        await super().run()

    def close(self) -> None:
        """Say TLS's close_notify (as Kafka does) where the socket takes it at once, then close."""
        with contextlib.suppress(ssl.SSLError, OSError):
            self._tls_object.unwrap()  # writes close_notify, then would wait for the client's: not waited for
        with contextlib.suppress(OSError):
            self.sock.send(self._outgoing.read())
        self.sock.close()

    async def _handshake(self) -> str:
        """Complete the server side of the handshake; the client's principal (Kafka's
        DefaultKafkaPrincipalBuilder for SSL: the mapped DN, or ANONYMOUS without a certificate)."""
        while True:
            try:
                self._tls_object.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                data = await self.loop.sock_recv(self.sock, RECV_BYTES)
                if not data:
                    raise ConnectionError("the client closed the connection") from None
                self._incoming.write(data)
            except ssl.SSLError:
                with contextlib.suppress(OSError):  # the alert tells the client why
                    await self._flush()
                raise
        await self._flush()
        certificate = self._tls_object.getpeercert(binary_form=True)
        if certificate is None:
            return ANONYMOUS
        return self.tls.principal_mapper.principal(subject_dn(certificate))

    async def _receive_tls(self) -> bytes | memoryview:
        """Decrypted bytes: every whole TLS record already received, up to ``TLS_RECEIVE_BYTES``
        (a record is at most 16 KiB; handing the framing one at a time cost a loop turn each)."""
        view = self._plaintext_view
        filled = 0
        while filled < TLS_RECEIVE_BYTES:
            try:
                read = cast(int, self._tls_object.read(TLS_RECEIVE_BYTES - filled, view[filled:]))  # into view
            except ssl.SSLWantReadError:
                if filled:
                    break
                if self._outgoing.pending:
                    await self._flush()
                encrypted = await self.loop.sock_recv(self.sock, RECV_BYTES)
                if not encrypted:
                    return b""
                self._incoming.write(encrypted)
                continue
            except ssl.SSLZeroReturnError:  # the client's close_notify
                break
            except ssl.SSLError as exc:
                raise CloseConnection(f"TLS error: {_reason(exc)}") from None
            if not read:
                break
            filled += read
            if not self._incoming.pending and not self._tls_object.pending():
                break  # nothing more decrypted without another recv
        if self._outgoing.pending:  # e.g. a TLS 1.3 KeyUpdate answered
            await self._flush()
        return view[:filled]  # read by the framing before the next receive overwrites it

    async def send(self, chunks: Sequence[Records]) -> None:
        """Encrypt and write buffers and file regions in order. Buffers in a row go out as one
        write (a TLS record each would cost a header and a seal apiece); a region is read in
        pieces of ``TLS_WRITE_BYTES``, so a large fetch never sits whole in memory."""
        pending: list[bytes | bytearray | memoryview] = []
        pending_bytes = 0
        for chunk in chunks:
            if isinstance(chunk, bytes | bytearray | memoryview):
                pending.append(chunk)
                pending_bytes += chunk.nbytes if isinstance(chunk, memoryview) else len(chunk)
                if pending_bytes >= TLS_WRITE_BYTES:
                    await self._write_tls(b"".join(pending))
                    pending, pending_bytes = [], 0
                continue
            if pending:
                await self._write_tls(b"".join(pending))
                pending, pending_bytes = [], 0
            await self._send_region(chunk)
        if pending:
            await self._write_tls(b"".join(pending))

    async def _send_region(self, region: Region) -> None:
        """A range of a segment file, read (``preadv``) and encrypted: it cannot be sent as is."""
        if self._region_buffer is None:  # only connections that fetch records hold one
            self._region_buffer = memoryview(bytearray(TLS_WRITE_BYTES))
        buffer = self._region_buffer
        offset, remaining = region.position, region.length
        while remaining:
            read = os.preadv(region.fd, [buffer[:min(remaining, TLS_WRITE_BYTES)]], offset)
            if read == 0:
                raise ConnectionError("segment file ended before the region did")
            await self._write_tls(buffer[:read])
            offset += read
            remaining -= read

    async def _write_tls(self, plaintext: bytes | memoryview) -> None:
        self._tls_object.write(plaintext)  # into _outgoing: a MemoryBIO never blocks
        await self._flush()

    async def _flush(self) -> None:
        """Write every TLS record waiting in ``_outgoing`` to the socket."""
        pending = memoryview(self._outgoing.read())
        while pending:
            try:
                sent = self.sock.send(pending)
            except BlockingIOError:
                await self._writable()
                continue
            pending = pending[sent:]


def _reason(exc: BaseException) -> str:
    """One line for a TLS failure: OpenSSL's reason, the certificate check's where there is one."""
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"{exc.reason}: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    if isinstance(exc, TimeoutError):
        return f"not complete within {TLS_HANDSHAKE_TIMEOUT_S:.0f} s"
    return str(exc) or type(exc).__name__


class ListenError(RuntimeError):
    """The listener cannot be opened; the message is one line for the operator."""


async def serve(broker: Broker, stop: asyncio.Event) -> None:
    """Run a started broker until ``stop`` is set, then shut down cleanly."""
    server = SocketServer(broker)
    await server.start()
    cluster = broker.cluster
    if cluster is not None:
        # Registering needs the bound endpoint; "ready" means registered in the cluster.
        try:
            await cluster.startup()
        except BaseException:
            await server.stop()
            await cluster.shutdown()
            await broker.shutdown()
            raise
    broker.start_background_work()
    endpoint = broker.advertised
    logger.info("strom broker %d ready on %s:%d (listeners: %s; inter-broker: %s)", broker.node_id, endpoint.host,
                endpoint.port, ", ".join(f"{name}://{e.host}:{e.port}" for name, e in broker.advertised_endpoints.items()),
                broker.inter_broker_listener)
    print(f"strom: broker {broker.node_id} ready on {endpoint.host}:{endpoint.port}", flush=True)
    try:
        await stop.wait()
    finally:
        if cluster is not None:  # hand leadership over while still serving (ControlledShutdown)
            await cluster.controlled_shutdown()
        await server.stop()
        if cluster is not None:
            await cluster.shutdown()
        await broker.shutdown()
        logger.info("strom broker stopped cleanly")
