"""A real ``strom serve`` process for tests: started on a free port, stopped with SIGTERM.

Tests talk to it only over the wire, exactly as a client application would.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from strom.protocol.framing import FrameDecoder

READY = "ready on "


class BrokerProcess:
    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.overrides = dict(overrides or {})
        self.process: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        # Listeners used at every start (fixed ports); None: PLAINTEXT on a free port, the same one after a restart.
        self.fixed_listeners: str | None = None

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        listeners = self.fixed_listeners or self.overrides.pop("listeners", None) or (
            f"PLAINTEXT://{self.bootstrap}" if self.bootstrap else "PLAINTEXT://127.0.0.1:0"
        )
        command = [sys.executable, "-m", "strom", "serve", "--data-dir", str(self.data_dir), "--listeners", listeners]
        for name, value in self.overrides.items():
            command += ["--override", f"{name}={value}"]
        log = open(self.log_path, "a")  # noqa: SIM115 - the child owns it while it runs
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if READY in line:
                self.bootstrap = line.rsplit(READY, 1)[1].strip()
                return self
            if not line and self.process.poll() is not None:
                break
        raise RuntimeError(f"strom serve did not start; see {self.log_path}:\n{self.log_path.read_text()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout)
        self.process = None
        return code

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def rss_bytes(self) -> int:
        assert self.process is not None
        with open(f"/proc/{self.process.pid}/statm") as file:
            return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def raw_request(broker: BrokerProcess, frame: bytes) -> bytes | None:
    """Send one request frame on a new connection; its answer, or None if the broker hung up."""
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(frame)
        decoder = FrameDecoder()
        while True:
            data = sock.recv(65536)
            if not data:
                return None
            frames = decoder.feed(data)
            if frames:
                return frames[0]
