"""Apache ZooKeeper (Debian's 3.8 package) as local processes: standalone or an N-node ensemble.

For ``strom dev-cluster`` and the tests; production runs its own ZooKeeper. Invariants:

- Everything binds to 127.0.0.1 only: ``clientPortAddress`` for clients, quorum and election
  ports on 127.0.0.1, and the AdminServer (upstream it binds 0.0.0.0:8080) is off.
- ``tickTime=500`` so short session timeouts are honoured (the server clamps a session to
  [2, maxSessionTimeout] ticks); ``maxSessionTimeout`` is raised to 60 s so Kafka's default
  18 s broker session is not clamped to 20 ticks either.
- A node is ready when it answers the ``srvr`` four-letter word with a Mode; an ensemble is
  ready when every running node does and exactly one of them is the leader.
- Each node is one JVM in a process group of its own, so the tests can SIGKILL, SIGSTOP and
  SIGCONT a single node (the ZooKeeper leader, say) and restart it on the same ports and data.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
LOGGING_JARS = (Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar"))
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
TICK_TIME_MS = 500
MAX_SESSION_TIMEOUT_MS = 60_000
HEAP = "256m"
START_TIMEOUT = 60.0  # seconds: a quorum forms in ~1.5 s, but two loaded cores can be slow
STOP_TIMEOUT = 20.0
BIND_ATTEMPTS = 3

_LOG4J = """\
# ZooKeeper's logging (written by strom.cluster.zookeeper_server): warnings to stderr.
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


class ZooKeeperError(RuntimeError):
    """ZooKeeper cannot be started or did not become ready; the message says why in one line."""


def check_installation() -> str:
    """The java executable, or a one-line ZooKeeperError naming what to install."""
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperError("no java on PATH: ZooKeeper needs a Java runtime (Debian: apt-get install default-jre-headless)")
    if not ZOOKEEPER_JAR.is_file():
        raise ZooKeeperError(f"{ZOOKEEPER_JAR} is missing: install Debian's ZooKeeper (apt-get install zookeeper)")
    return java


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports, all held open together so none is handed out twice.

    Drawn below the kernel's ephemeral range: the JVM binds them a second or two later, and
    a port from bind(0) could meanwhile become another process's outgoing connection (tests
    on the other pytest worker, a broker's clients)."""
    low = _ephemeral_low()
    candidates = random.Random().sample(range(max(1024, low - 12_000), low), min(count * 50, 11_000))
    sockets: list[socket.socket] = []
    try:
        for port in candidates:
            if len(sockets) == count:
                break
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            sockets.append(sock)
        if len(sockets) < count:
            raise ZooKeeperError(f"no {count} free loopback ports below {low}")
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _ephemeral_low(default: int = 32768) -> int:
    """The lowest port the kernel hands out for bind(0) and outgoing connections."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ranges:
            return int(ranges.read().split()[0])
    except (OSError, ValueError, IndexError):
        return default


SRVR_TIMEOUT = 10.0  # seconds: a JVM busy starting on two loaded cores can be slow to answer


def four_letter_word(port: int, word: str = "srvr", timeout: float = SRVR_TIMEOUT) -> str | None:
    """The server's answer to a four-letter word, or None if it does not answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(word.encode("ascii"))
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        return None
    return b"".join(chunks).decode("utf-8", "replace")


def server_mode(port: int, timeout: float = SRVR_TIMEOUT) -> str | None:
    """``leader``, ``follower``, ``standalone`` … from ``srvr``; None while not serving."""
    answer = four_letter_word(port, timeout=timeout) or ""
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            return line.partition(":")[2].strip()
    return None


@dataclass
class ZooKeeperNode:
    """One server: its ports, its directory, and its JVM while running."""

    node_id: int
    client_port: int
    quorum_port: int
    election_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    log_start: int = 0  # the log's size when the running JVM was started

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"


class ZooKeeperEnsemble:
    """``size`` ZooKeeper servers on loopback (1 = standalone), started and stopped together.

        with ZooKeeperEnsemble(tmp_path, size=3) as zookeeper:
            zookeeper.connect_string        # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
            zookeeper.kill(zookeeper.leader())
    """

    def __init__(self, directory: Path, size: int = 1, heap: str = HEAP) -> None:
        if size < 1:
            raise ValueError(f"a ZooKeeper ensemble needs at least one server, not {size}")
        self.directory = directory
        self.heap = heap
        self.nodes = self._allocate(size)

    def _allocate(self, size: int) -> dict[int, ZooKeeperNode]:
        ports = free_ports(3 * size)
        return {
            node_id: ZooKeeperNode(node_id, ports[3 * i], ports[3 * i + 1], ports[3 * i + 2], self.directory / f"zk{node_id}")
            for i, node_id in enumerate(range(1, size + 1))
        }

    @property
    def connect_string(self) -> str:
        return ",".join(f"127.0.0.1:{node.client_port}" for node in self.nodes.values())

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = START_TIMEOUT) -> ZooKeeperEnsemble:
        """Start every server and wait until the ensemble serves; stops them all on failure."""
        java = check_installation()
        for attempt in range(BIND_ATTEMPTS):
            try:
                for node in self.nodes.values():
                    self._write_config(node)
                    self._spawn(java, node)
                self.wait_ready(timeout, list(self.nodes))
                return self
            except ZooKeeperError:
                self.stop()
                if attempt == BIND_ATTEMPTS - 1 or not self._a_port_was_taken():
                    raise
                # Another process bound one of the ports between free_ports() and the JVM's bind.
                self.nodes = self._allocate(len(self.nodes))
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _a_port_was_taken(self) -> bool:
        for node in self.nodes.values():
            with node.log_path.open("rb") as log:
                log.seek(node.log_start)
                if b"Address already in use" in log.read():
                    return True
        return False

    def stop(self) -> None:
        for node_id in self.nodes:
            self.stop_node(node_id)

    def stop_node(self, node_id: int, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM (after SIGCONT, in case it is paused); SIGKILL if it does not exit in time."""
        node = self.nodes[node_id]
        if node.process is None:
            return
        if node.process.poll() is None:
            self._signal(node, signal.SIGCONT)
            self._signal(node, signal.SIGTERM)
            try:
                node.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(node, signal.SIGKILL)
                node.process.wait(timeout)
        node.process = None

    def kill(self, node_id: int) -> None:
        """SIGKILL one server: a crash, with no goodbye to its peers or clients."""
        node = self.nodes[node_id]
        if node.process is not None and node.process.poll() is None:
            self._signal(node, signal.SIGKILL)
            node.process.wait(STOP_TIMEOUT)
        node.process = None

    def pause(self, node_id: int) -> None:
        """SIGSTOP: alive but silent, as a server in a long GC pause or behind a partition.
        Returns once every thread of the JVM has stopped: the signal only asks, and on a busy
        machine a thread still running could answer one more request (seen once in CI)."""
        node = self.nodes[node_id]
        self._signal(node, signal.SIGSTOP)
        if node.process is not None:
            _wait_stopped(node.process.pid)

    def resume(self, node_id: int) -> None:
        self._signal(self.nodes[node_id], signal.SIGCONT)

    def restart(self, node_id: int, timeout: float = START_TIMEOUT) -> None:
        """Stop (if running) and start one server on the same ports and data; wait for it."""
        self.stop_node(node_id)
        self._spawn(check_installation(), self.nodes[node_id])
        self.wait_ready(timeout, [node_id])

    # ------------------------------------------------------------------ status

    def mode(self, node_id: int, timeout: float = SRVR_TIMEOUT) -> str | None:
        """The server's ``srvr`` Mode; None if it is down, not serving, or silent for ``timeout``."""
        node = self.nodes[node_id]
        return server_mode(node.client_port, timeout) if node.running else None

    def leader(self) -> int | None:
        """The server that leads the ensemble now (the standalone server for size 1)."""
        for node_id, node in self.nodes.items():
            if node.running and self.mode(node_id) in ("leader", "standalone"):
                return node_id
        return None

    def wait_ready(self, timeout: float = START_TIMEOUT, node_ids: Sequence[int] | None = None) -> None:
        """Until every running server answers ``srvr`` with a Mode and exactly one of them
        leads; ``node_ids`` must be among the running (a server that exited fails at once)."""
        deadline = time.monotonic() + timeout
        while True:
            running = [i for i, node in self.nodes.items() if node.running]
            for node_id in node_ids or []:
                if not self.nodes[node_id].running:
                    raise ZooKeeperError(
                        f"ZooKeeper server {node_id} exited: see {self.nodes[node_id].log_path}")
            if not running:
                raise ZooKeeperError(f"no ZooKeeper server is running: see {self.directory}")
            modes = {i: self.mode(i) for i in running}
            if all(modes.values()) and sum(m in ("leader", "standalone") for m in modes.values()) == 1:
                return
            if time.monotonic() > deadline:
                raise ZooKeeperError(f"ZooKeeper did not become ready within {timeout:.0f} s (modes {modes})")
            time.sleep(0.05)

    # ------------------------------------------------------------------ internals

    def _write_config(self, node: ZooKeeperNode) -> None:
        data_dir = node.directory / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={TICK_TIME_MS}", "initLimit=10", "syncLimit=5",
            f"maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}",
            f"dataDir={data_dir}",
            f"clientPort={node.client_port}", "clientPortAddress=127.0.0.1",
            "maxClientCnxns=0", "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,mntr,stat",
        ]
        if len(self.nodes) > 1:
            (data_dir / "myid").write_text(f"{node.node_id}\n")
            lines += [f"server.{peer.node_id}=127.0.0.1:{peer.quorum_port}:{peer.election_port}"
                      for peer in self.nodes.values()]
        (node.directory / "zoo.cfg").write_text("\n".join(lines) + "\n")
        (node.directory / "log4j.properties").write_text(_LOG4J)

    def _spawn(self, java: str, node: ZooKeeperNode) -> None:
        classpath = ":".join([str(node.directory), str(ZOOKEEPER_JAR), *(str(jar) for jar in LOGGING_JARS)])
        command = [java, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
                   "-cp", classpath, MAIN_CLASS, str(node.directory / "zoo.cfg")]
        node.log_start = node.log_path.stat().st_size if node.log_path.exists() else 0
        with node.log_path.open("ab") as log:
            node.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=node.directory, start_new_session=True)

    @staticmethod
    def _signal(node: ZooKeeperNode, signum: signal.Signals) -> None:
        if node.process is not None and node.process.poll() is None:
            os.kill(node.process.pid, signum)


def _wait_stopped(pid: int, timeout: float = 10.0) -> None:
    """Until every thread of ``pid`` is in the stopped state (``T`` in /proc/<pid>/task/*/stat);
    a process that exited meanwhile is no longer running either way."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            states = [Path(task, "stat").read_text().rsplit(")", 1)[1].split()[0]
                      for task in Path(f"/proc/{pid}/task").iterdir()]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return
        if all(state in ("T", "t", "Z", "X") for state in states):
            return
        time.sleep(0.01)
    raise ZooKeeperError(f"ZooKeeper (pid {pid}) did not stop within {timeout:g} s of SIGSTOP")

