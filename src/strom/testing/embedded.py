"""A real Strom broker for another project's tests: in a thread of the test process, or a subprocess.

``EmbeddedBroker.start(data_dir, mode=..., overrides=...)`` listens on a free loopback port
(``PLAINTEXT://127.0.0.1:0``: the kernel picks the port while the socket binds, so two
brokers never race for one) over ``data_dir`` and returns once the socket is accepting.
``stop()`` shuts it down as ``strom serve`` does on SIGTERM: connections closed, logs
flushed and closed, the thread joined or the process reaped.

- ``"thread"`` (the default): the broker's own event loop in a daemon thread. No
  interpreter to start and nothing to import twice, so it is ready in a few tens of
  milliseconds; the test's own event loop (pytest-asyncio, anyio) is never shared.
- ``"process"``: ``python -m strom serve`` in a subprocess, for a test that wants the broker
  out of its process (its own GIL, a crash that cannot take the test down, a kill -9).
  The port is read from the ``ready on host:port`` line it prints.

Settings are Kafka's defaults with a few that suit one broker in a test
(``TEST_DEFAULTS``: one partition for the internal topics, no initial rebalance delay);
``overrides`` (Kafka property names) win over both.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the codec loads with the first helper call, not with the pytest plugin
    from strom.protocol.records.v2 import Record

Mode = Literal["thread", "process"]
MODES: tuple[Mode, ...] = ("thread", "process")

TEST_DEFAULTS: Mapping[str, str] = {
    "offsets.topic.num.partitions": "1",  # one __consumer_offsets partition, not 50: a quicker first group
    "transaction.state.log.num.partitions": "1",  # likewise for __transaction_state
    "group.initial.rebalance.delay.ms": "0",  # a test's lone consumer joins at once, not after 3 s
}
START_TIMEOUT_S = 60.0  # a subprocess on a loaded CI machine; a thread is ready in milliseconds
STOP_TIMEOUT_S = 30.0
_READY = re.compile(rb"ready on (\S+):(\d+)")


class BrokerStartError(RuntimeError):
    """The broker did not start; the message says why (a bad override, the process's output)."""


class EmbeddedBroker:
    """A started broker: ``bootstrap_servers`` for any client, and helpers for assertions."""

    def __init__(self, data_dir: Path, mode: Mode, overrides: Mapping[str, str]) -> None:
        self.data_dir = data_dir
        self.mode = mode
        self.overrides = dict(overrides)
        self.host = "127.0.0.1"
        self.port = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port``, as confluent-kafka, kafka-python, aiokafka and ``strom.client`` take it."""
        return f"{self.host}:{self.port}"

    def properties(self) -> dict[str, str]:
        """The broker's settings: test defaults, then overrides, then its data dir and listener."""
        return {**TEST_DEFAULTS, **self.overrides, "log.dirs": str(self.data_dir),
                "listeners": "PLAINTEXT://127.0.0.1:0"}

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def start(cls, data_dir: Path, *, mode: Mode = "thread",
              overrides: Mapping[str, str] | None = None) -> EmbeddedBroker:
        if mode not in MODES:
            raise BrokerStartError(f"unknown strom broker mode {mode!r} (one of: {', '.join(MODES)})")
        broker = cls(data_dir, mode, overrides or {})
        if mode == "thread":
            broker._start_thread()
        else:
            broker._start_process()
        return broker

    def stop(self) -> None:
        """Shut down cleanly; safe to call twice."""
        if self._thread is not None:
            loop, stop = self._loop, self._stop
            if loop is not None and stop is not None and not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop ended on its own (it failed)
                    loop.call_soon_threadsafe(stop.set)
            self._thread.join(STOP_TIMEOUT_S)
            if self._thread.is_alive():
                raise RuntimeError(f"the strom broker thread did not stop within {STOP_TIMEOUT_S:.0f} s")
            self._thread = None
        if self._process is not None:
            process, self._process = self._process, None
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT_S)
            if process.stdout is not None:
                process.stdout.close()

    def __enter__(self) -> EmbeddedBroker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _start_thread(self) -> None:
        from strom.broker.broker import Broker
        from strom.broker.config import BrokerConfig, ConfigError
        from strom.broker.server import SocketServer

        try:
            config = BrokerConfig.from_properties(self.properties())
            self.data_dir.mkdir(parents=True, exist_ok=True)
            broker = Broker(config)
        except ConfigError as exc:
            raise BrokerStartError(f"strom broker: {exc}") from None
        broker.startup()
        ready: Future[int] = Future()

        async def run() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            server = SocketServer(broker)
            try:
                await server.start()
                broker.start_background_work()
            except BaseException as exc:
                await broker.shutdown()
                ready.set_exception(exc)
                return
            ready.set_result(server.port)
            try:
                await self._stop.wait()
            finally:
                await server.stop()
                await broker.shutdown()

        self._thread = threading.Thread(target=asyncio.run, args=(run(),), name="strom-broker", daemon=True)
        self._thread.start()
        try:
            self.port = ready.result(START_TIMEOUT_S)
        except Exception as exc:
            self._thread.join(STOP_TIMEOUT_S)
            self._thread = None
            raise BrokerStartError(f"strom broker: {exc}") from exc

    def _start_process(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "strom", "serve", "--log-level", "warning"]
        for name, value in self.properties().items():
            command += ["--override", f"{name}={value}"]
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self._process.stdout is not None
        timer = threading.Timer(START_TIMEOUT_S, self._process.kill)  # a hung start ends the readline below
        timer.start()
        output: list[bytes] = []
        try:
            for line in iter(self._process.stdout.readline, b""):
                output.append(line)
                found = _READY.search(line)
                if found:
                    self.host, self.port = found[1].decode(), int(found[2])
                    return
        finally:
            timer.cancel()
        self.stop()
        text = b"".join(output).decode(errors="replace").strip()
        raise BrokerStartError(f"strom serve exited before it was ready: {text or 'no output'}")

    # -- helpers ---------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None) -> None:
        """Create ``name`` through CreateTopics (raises ``WireError`` when the broker refuses)."""
        from strom.testing.wire import WireClient

        with WireClient(self.bootstrap_servers) as client:
            client.create_topic(name, partitions, configs)

    def read_all(self, topic: str) -> list[Record]:
        """Every committed record of ``topic`` now, partition by partition in offset order.

        Each ``Record`` has ``offset``, ``timestamp``, ``key``, ``value`` and ``headers``
        (bytes); control records and aborted transactions are left out, as a
        read_committed consumer sees them.
        """
        from strom.testing.wire import EARLIEST, LATEST, WireClient

        records: list[Record] = []
        with WireClient(self.bootstrap_servers) as client:
            for partition in client.partitions(topic):
                end = client.list_offset(topic, partition, LATEST)
                offset = client.list_offset(topic, partition, EARLIEST)
                while offset < end:
                    fetched, next_offset = client.fetch(topic, partition, offset)
                    records += (record for record in fetched if record.offset < end)
                    if next_offset == offset:
                        break  # nothing more to read below the end (never expected)
                    offset = next_offset
        return records
