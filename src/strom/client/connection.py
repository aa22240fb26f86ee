"""One TCP connection to one broker: pipelined requests, answers matched in order.

Kafka answers the requests of one connection in the order they were sent, so the
connection keeps its outstanding requests in a FIFO and checks each answer's
correlation id against the oldest; a mismatch means the stream is out of step and the
connection is closed, failing everything outstanding. The wire format is the generated
codec's; this module only frames, matches and times out.

An ``asyncio.Protocol`` rather than streams: answers are decoded in ``data_received``
and resolve their futures directly, without a reader task waking per frame.

Versions are negotiated once per connection with ApiVersions (KIP-511: a broker that
does not know our ApiVersions version answers in v0 with the versions it does know,
and we ask again). ``version_for`` then picks, per request, the highest version both
sides speak, so the client works against brokers older or narrower than Strom.

A request that times out closes the connection, as the Java client does: its answer
may still arrive, and nothing after it on this connection could be matched safely.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TypeVar

from strom.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.api_versions_response import ApiVersionsResponse

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

_UNSUPPORTED = int(ErrorCode.UNSUPPORTED_VERSION).to_bytes(2, "big")
# Above this many buffered bytes a sender waits for the socket to drain (backpressure).
WRITE_HIGH_WATER = 4 * 1024 * 1024

try:
    _SOFTWARE_VERSION = version("strom")
except PackageNotFoundError:  # running from a source tree
    _SOFTWARE_VERSION = "0"


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    api_key: int
    api_version: int
    future: asyncio.Future[Message]
    timer: asyncio.TimerHandle | None


class BrokerConnection(asyncio.Protocol):
    """A connection to ``host:port``; open it with ``BrokerConnection.open``."""

    def __init__(self, host: str, port: int, *, node_id: int, client_id: str,
                 request_timeout_ms: int) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder()
        self._in_flight: deque[_InFlight] = deque()
        self._next_correlation_id = 0
        self._closed_error: KafkaError | None = None
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._lost = self._loop.create_future()

    def __repr__(self) -> str:
        return f"<BrokerConnection node {self.node_id} {self.host}:{self.port}>"

    @classmethod
    async def open(cls, host: str, port: int, *, node_id: int = -1, client_id: str = "strom",
                   request_timeout_ms: int = 30_000, connect_timeout_ms: int = 10_000,
                   ) -> BrokerConnection:
        """Connect and negotiate API versions; raises ``KafkaConnectionError``."""
        loop = asyncio.get_running_loop()
        connection = cls(host, port, node_id=node_id, client_id=client_id,
                         request_timeout_ms=request_timeout_ms)
        try:
            async with asyncio.timeout(connect_timeout_ms / 1000):
                await loop.create_connection(lambda: connection, host, port)
        except (OSError, TimeoutError) as exc:
            raise KafkaConnectionError(f"cannot connect to {host}:{port}: {exc or 'timed out'}") from None
        try:
            await connection._negotiate_versions()
        except BaseException:
            connection.close()
            raise
        return connection

    # -- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        try:
            for frame in self._decoder.feed(data):
                self._on_frame(frame)
        except (ProtocolError, KafkaError) as exc:
            logger.warning("%r: %s; closing", self, exc)
            self._fail(KafkaConnectionError(f"{self!r}: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f"connection to {self.host}:{self.port} lost" + (f": {exc}" if exc else "")
        self._fail(KafkaConnectionError(reason))
        if not self._lost.done():
            self._lost.set_result(None)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # -- requests ------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered: what "least loaded" compares."""
        return len(self._in_flight)

    def version_for(self, api_key: int, supported: range) -> int:
        """The highest version of ``api_key`` that both we (``supported``) and the broker speak."""
        versions = self.api_versions.get(api_key)
        if versions is None:
            raise UnsupportedVersionError(f"{self!r} does not serve API key {api_key}")
        low, high = max(versions[0], supported.start), min(versions[1], supported.stop - 1)
        if low > high:
            raise UnsupportedVersionError(
                f"{self!r} serves API key {api_key} in v{versions[0]}-{versions[1]}; "
                f"this client needs v{supported.start}-{supported.stop - 1}")
        return high

    async def send(self, request: M | Message, *, version: int, timeout_ms: int | None = None,
                   expect_response: bool = True) -> Message:
        """Send ``request`` in ``version`` and return the decoded answer.

        With ``expect_response=False`` (Produce with acks=0) it returns once written,
        with the request itself as a placeholder answer.
        """
        await self.wait_writable()
        future = self.send_nowait(request, version=version, timeout_ms=timeout_ms,
                                  expect_response=expect_response)
        return await future

    async def wait_writable(self) -> None:
        """Wait while the socket buffer is over its high-water mark."""
        if not self._can_write.is_set():
            waiter = asyncio.ensure_future(self._can_write.wait())
            done, _ = await asyncio.wait((waiter, self._lost), return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:
                waiter.cancel()

    def send_nowait(self, request: Message, *, version: int, timeout_ms: int | None = None,
                    expect_response: bool = True) -> asyncio.Future[Message]:
        """Write ``request`` now; the future resolves with its answer (for pipelining)."""
        if self._closed_error is not None:
            raise self._closed_error
        assert self._transport is not None and request.API_KEY is not None
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(request, version, correlation_id, self.client_id)
        future: asyncio.Future[Message] = self._loop.create_future()
        if expect_response:
            timeout = self.request_timeout if timeout_ms is None else timeout_ms / 1000
            timer = self._loop.call_later(timeout, self._timed_out, correlation_id)
            self._in_flight.append(_InFlight(correlation_id, request.API_KEY, version, future, timer))
        else:
            future.set_result(request)
        self._transport.write(frame)
        return future

    def close(self) -> None:
        self._fail(KafkaConnectionError(f"{self!r} closed"))

    async def wait_closed(self) -> None:
        await asyncio.shield(self._lost)

    # -- internals -----------------------------------------------------------------------
    def _on_frame(self, frame: bytes) -> None:
        if not self._in_flight:
            raise KafkaConnectionError("an answer arrived with no request outstanding")
        entry = self._in_flight[0]
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        if correlation_id != entry.correlation_id:
            raise KafkaConnectionError(
                f"answer for correlation id {correlation_id}, expected {entry.correlation_id}")
        self._in_flight.popleft()
        if entry.timer is not None:
            entry.timer.cancel()
        if entry.future.done():  # the caller gave up (cancelled)
            return
        api_version = entry.api_version
        if entry.api_key == ApiVersionsRequest.API_KEY and frame[4:6] == _UNSUPPORTED:
            api_version = 0  # KIP-511: a broker that does not know our version answers in v0
        try:
            _, body = decode_response(frame, entry.api_key, api_version)
        except ProtocolError as exc:
            raise KafkaConnectionError(f"undecodable answer: {exc}") from None
        entry.future.set_result(body)

    def _timed_out(self, correlation_id: int) -> None:
        self._fail(KafkaTimeoutError(
            f"{self!r}: no answer to request {correlation_id} within the request timeout"))

    def _fail(self, error: KafkaError) -> None:
        if self._closed_error is None:
            self._closed_error = error
        while self._in_flight:
            entry = self._in_flight.popleft()
            if entry.timer is not None:
                entry.timer.cancel()
            if not entry.future.done():
                entry.future.set_exception(error)
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()
        self._can_write.set()

    async def _negotiate_versions(self) -> None:
        request = ApiVersionsRequest(client_software_name="strom",
                                     client_software_version=_SOFTWARE_VERSION)
        version = ApiVersionsRequest.VALID_VERSIONS.stop - 1
        for _ in range(2):
            response = await self.send(request, version=version)
            assert isinstance(response, ApiVersionsResponse)
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION and ApiVersionsRequest.API_KEY in self.api_versions:
                version = self.version_for(ApiVersionsRequest.API_KEY, ApiVersionsRequest.VALID_VERSIONS)
                continue
            if response.error_code:
                raise KafkaError(response.error_code, f"ApiVersions to {self.host}:{self.port}")
            return
        raise UnsupportedVersionError(f"{self!r}: ApiVersions negotiation did not converge")
