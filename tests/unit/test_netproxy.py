"""tests.support.netproxy against a trivial echo server: each fault does what it says and
is counted, and healing lets the held bytes flow on in order."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.support.netproxy import DOWNSTREAM, UPSTREAM, TcpProxy

TIMEOUT_S = 30.0


class _EchoHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server = self.server
        assert isinstance(server, _EchoServer)
        while True:
            try:
                data = self.request.recv(65536)
            except OSError:
                return
            if not data:
                server.eofs += 1
                return
            server.received += len(data)
            self.request.sendall(data)


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EchoHandler)
        self.received = 0
        self.eofs = 0


@pytest.fixture
def echo() -> Iterator[_EchoServer]:
    server = _EchoServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(TIMEOUT_S)


@pytest.fixture
def proxy(echo: _EchoServer) -> Iterator[TcpProxy]:
    with TcpProxy(0, "127.0.0.1", echo.server_address[1]) as running:
        yield running


def _wait(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _connect(proxy: TcpProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=TIMEOUT_S)


def _receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_pass_through_forwards_both_ways_and_counts(proxy: TcpProxy, echo: _EchoServer) -> None:
    payload = bytes(range(256)) * 1000
    with _connect(proxy) as sock:
        sock.sendall(payload)
        assert _receive(sock, len(payload)) == payload
        stats = proxy.stats()
        assert stats.forwarded == {UPSTREAM: len(payload), DOWNSTREAM: len(payload)}
        assert stats.withheld == {UPSTREAM: 0, DOWNSTREAM: 0}
        assert (stats.accepted, stats.open_connections) == (1, 1)
    _wait(lambda: proxy.stats().open_connections == 0, "the closed connection to be forgotten")
    assert echo.eofs == 1


def test_black_hole_holds_bytes_without_an_error_and_healing_delivers_them_in_order(
        proxy: TcpProxy, echo: _EchoServer) -> None:
    with _connect(proxy) as sock:
        proxy.black_hole()
        sock.sendall(b"first,")
        sock.sendall(b"second")
        _wait(lambda: proxy.stats().withheld[UPSTREAM] == 12, "the proxy to take the bytes in")
        assert echo.received == 0  # nothing reached the target, and the connection is still open
        assert proxy.stats().open_connections == 1
        proxy.pass_through()
        assert _receive(sock, 12) == b"first,second"
        assert echo.received == 12


def test_a_black_hole_in_one_direction_lets_the_other_through(proxy: TcpProxy, echo: _EchoServer) -> None:
    with _connect(proxy) as sock:
        proxy.black_hole(DOWNSTREAM)
        sock.sendall(b"ping")
        _wait(lambda: echo.received == 4, "the request to reach the target")
        _wait(lambda: proxy.stats().withheld[DOWNSTREAM] == 4, "the answer to be held")
        assert proxy.stats().forwarded[DOWNSTREAM] == 0
        proxy.pass_through(DOWNSTREAM)
        assert _receive(sock, 4) == b"ping"


def test_drop_resets_open_connections_and_refuses_new_ones_until_healed(proxy: TcpProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"hello")
        assert _receive(sock, 5) == b"hello"
        proxy.drop()
        with pytest.raises(ConnectionError):
            sock.sendall(b"more")
            _receive(sock, 1)
    # The kernel accepts and the proxy resets at once: connect() itself may see the reset.
    with pytest.raises(ConnectionError), _connect(proxy) as refused:
        refused.sendall(b"x")
        assert refused.recv(1) == b""  # a FIN instead of the RST would fail here
    stats = proxy.stats()
    assert (stats.reset, stats.refused, stats.open_connections) == (1, 1, 0)
    proxy.pass_through()
    with _connect(proxy) as healed:
        healed.sendall(b"again")
        assert _receive(healed, 5) == b"again"


def test_delay_holds_each_read_at_least_that_long(proxy: TcpProxy) -> None:
    proxy.delay(0.3, UPSTREAM)
    with _connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(b"late")
        assert _receive(sock, 4) == b"late"
        assert time.monotonic() - started >= 0.3  # a lower bound only: load can only add to it
    assert proxy.mode(UPSTREAM) == "delay" and proxy.mode(DOWNSTREAM) == "pass"


def test_a_target_that_is_down_ends_the_connection(echo: _EchoServer) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # bound, never listening: connections are refused
        with TcpProxy(0, "127.0.0.1", port) as proxy:
            with contextlib.suppress(ConnectionResetError), _connect(proxy) as sock:  # reset, maybe in connect()
                assert sock.recv(1) == b""
            assert proxy.stats().accepted == 0


def test_bad_controls_are_refused(proxy: TcpProxy) -> None:
    with pytest.raises(ValueError, match="negative"):
        proxy.delay(-1)
    with pytest.raises(ValueError, match="unknown direction"):
        proxy.black_hole("sideways")  # type: ignore[arg-type]
