"""``/metrics`` over HTTP/1.1, served by a small asyncio server in the broker's own loop.

Why not prometheus_client's ``start_http_server``: its thread would read the broker's
state (partitions, groups) while the loop changes it. In the loop, a scrape sees one
consistent state and needs no locks; it holds the loop for the time the text takes to
write (a few milliseconds for a thousand partitions: BENCHMARKS.md, "Metrics"). One
request per connection, answered and closed: Prometheus scrapes every few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST

from strom.metrics.listener import MetricsListener

logger = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 16 * 1024  # a scrape's request line and headers are a few hundred bytes
READ_TIMEOUT_S = 30.0


def bind(listener: MetricsListener) -> socket.socket:
    """The listening socket, bound now so a port in use is known at start (``OSError``)."""
    host = listener.host or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, listener.port), family=family, backlog=64)
    sock.setblocking(False)
    return sock


class MetricsServer:
    """Serves ``render()`` on a bound socket: GET /metrics (or /) → the text format."""

    def __init__(self, render: Callable[[], bytes], sock: socket.socket) -> None:
        self.render = render
        self.sock = sock
        self._server: asyncio.Server | None = None
        self._starting: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def start(self) -> None:
        """Serve from the running loop on (the socket is bound and listening already)."""
        self._starting = asyncio.create_task(self._start())

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, sock=self.sock, limit=MAX_REQUEST_HEAD)

    async def stop(self) -> None:
        if self._starting is not None:
            await self._starting
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
        self.sock.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            method, _, rest = head.partition(b" ")
            path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
            if method not in (b"GET", b"HEAD"):
                status, body, content_type = b"405 Method Not Allowed", b"only GET\n", b"text/plain"
            elif path not in (b"/metrics", b"/"):
                status, body, content_type = b"404 Not Found", b"see /metrics\n", b"text/plain"
            else:
                status, body, content_type = b"200 OK", self.render(), CONTENT_TYPE_LATEST.encode()
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type
                         + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
                         + (body if method != b"HEAD" else b""))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        except Exception:
            logger.exception("answering a metrics scrape failed")
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
