"""Apache Kafka itself, started beside Strom as the reference broker (issue 16).

Kafka is the yardstick for behaviour (tests/differential) and for speed (benchmarks):

    with start_reference_broker("39", tmp_dir) as kafka:
        kafka.bootstrap, kafka.pid, kafka.startup_seconds, kafka.rss_bytes()

"39" is Kafka 3.9 in ZooKeeper mode with its own ZooKeeper, "4" the newest Kafka 4.x in
combined KRaft mode. Both run through ``scripts/kafka-reference start`` (the one place that
knows their settings, JVM flags and start order) in a process group of their own, so
stopping it stops the broker first and ZooKeeper after, and a hung JVM is killed with its
group. The jars come from Maven Central through ``scripts/kafka-reference install``, which
``./scripts/test`` runs; when they are missing here they are fetched first.

A broker is ready when a Metadata request, encoded by Strom's codec, is answered and lists
a broker: before that, a client could connect but not yet produce anywhere.
``startup_seconds`` runs from the start of the first server JVM (ZooKeeper's for 3.9, so
the figure includes it; the broker's own for 4.x) to that answer, read from the kernel's
record of when each process started; the one-off ``kafka-storage format`` of a new 4.x data
directory and the launcher's own checks are not counted, as a deployed broker does not
repeat them at every start.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from strom.cluster.zookeeper_server import free_ports
from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.metadata_request import MetadataRequest
from strom.protocol.messages.metadata_response import MetadataResponse
from strom.storage.config import parse_properties

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kafka-reference"
SHARED_SETTINGS = ROOT / "tools" / "kafka-reference" / "server.properties"
LINES = ("39", "4")
START_TIMEOUT = 180.0  # seconds: JVMs start in a few, but CI's two cores may be busy
STOP_TIMEOUT = 60.0


def shared_settings() -> dict[str, str]:
    """The broker settings every reference broker runs with (to give Strom the same)."""
    return parse_properties(SHARED_SETTINGS.read_text())


def free_port() -> int:
    """A free loopback port below the ephemeral range (``free_ports``): the server binds it
    seconds later, and meanwhile no outgoing connection of another test can take it."""
    return free_ports(1)[0]


class WireClient:
    """One connection speaking Kafka's protocol through Strom's codec, one request at a time."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, client_id: str = "strom-differential") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.decoder = FrameDecoder()
        self.correlation_id = 0
        self.client_id = client_id

    def call(self, request: Message, version: int) -> Message:
        assert request.API_KEY is not None
        self.correlation_id += 1
        self.sock.sendall(encode_request(request, version, self.correlation_id, self.client_id))
        frames: list[bytes] = []
        while not frames:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError(f"the broker closed the connection after {type(request).__name__} v{version}")
            frames = self.decoder.feed(data)
        correlation_id, response = decode_response(frames[0], request.API_KEY, version)
        if correlation_id != self.correlation_id:
            raise ConnectionError(f"correlation id {correlation_id}, expected {self.correlation_id}")
        return response

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def metadata_answer(bootstrap: str, timeout: float = 5.0) -> MetadataResponse | None:
    """One Metadata v12 request for no topics; its answer, or None if none came."""
    try:
        with WireClient(bootstrap, timeout=timeout) as client:
            response = client.call(MetadataRequest(topics=()), 12)
    except OSError:  # refused, reset or timed out: not listening or not serving yet
        return None
    assert isinstance(response, MetadataResponse)
    return response


def wait_for_metadata(bootstrap: str, alive: Callable[[], bool], timeout: float = START_TIMEOUT) -> float:
    """Poll until a Metadata answer lists a broker; the CLOCK_BOOTTIME instant it came.

    ``alive`` is asked between tries, so a broker that died does not cost the whole timeout.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = metadata_answer(bootstrap)
        if answer is not None and answer.brokers:
            return time.clock_gettime(time.CLOCK_BOOTTIME)
        if not alive():
            raise RuntimeError(f"the broker at {bootstrap} exited before answering Metadata")
        time.sleep(0.02)
    raise TimeoutError(f"no Metadata answer listing a broker from {bootstrap} within {timeout:.0f} s")


def process_start_boottime(pid: int) -> float:
    """When ``pid`` started, in seconds of CLOCK_BOOTTIME (field 22 of /proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces and ')'
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


def process_rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def normalise_line(version: str) -> str:
    """"39", "3.9", "kafka39" -> "39"; "4", "4.x", "kafka4" -> "4"."""
    line = version.lower().removeprefix("kafka").replace(".x", "").replace(".", "")
    if line not in LINES:
        raise ValueError(f"unknown reference Kafka {version!r}: expected 39 or 4")
    return line


def install(version: str) -> Path:
    """Fetch the jars of a Kafka line if they are not there yet; their directory."""
    line = normalise_line(version)
    result = subprocess.run([str(SCRIPT), "install", line], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"scripts/kafka-reference install {line} failed:\n{result.stderr}")
    jar_dir = subprocess.run([str(SCRIPT), "dir", line], capture_output=True, text=True, check=True)
    return Path(jar_dir.stdout.strip())


@dataclass
class ReferenceBroker:
    """A running reference Kafka: where to reach it and what its start cost."""

    line: str
    kafka_version: str
    bootstrap: str
    data_dir: Path
    log_path: Path
    pid: int  # the Kafka broker's JVM
    zookeeper_pid: int | None  # Kafka 3.9's ZooKeeper JVM; None for KRaft
    startup_seconds: float  # first server JVM's start (ZooKeeper's for 3.9) to Metadata
    broker_startup_seconds: float  # the broker JVM's own start to Metadata
    _process: subprocess.Popen[bytes] = field(repr=False)

    def rss_bytes(self) -> int:
        """Resident memory of the broker JVM (ZooKeeper's is ``zookeeper_rss_bytes``)."""
        return process_rss_bytes(self.pid)

    def zookeeper_rss_bytes(self) -> int:
        return process_rss_bytes(self.zookeeper_pid) if self.zookeeper_pid is not None else 0

    def alive(self) -> bool:
        return self._process.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        stop_group(self._process, timeout, [self.pid, self.zookeeper_pid])


def stop_group(process: subprocess.Popen[bytes], timeout: float, pids: list[int | None]) -> None:
    """SIGTERM the launcher (it stops the broker, then ZooKeeper); SIGKILL its group if stuck.

    A JVM left behind by a launcher that died is killed too, but only while it is still in
    the launcher's process group, so a recycled pid is never touched.
    """
    group = process.pid
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(group, signal.SIGKILL)
        process.wait(timeout)
    for pid in pids:
        if pid is None:
            continue
        try:
            if os.getpgid(pid) == group:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


@contextmanager
def start_reference_broker(
    version: str, tmp_dir: Path, timeout: float = START_TIMEOUT
) -> Iterator[ReferenceBroker]:
    """Start Kafka ``version`` ("39" or "4") on free loopback ports with its data in ``tmp_dir``;
    stop it on leaving the block (or, should this process die first, when it is gone)."""
    line = normalise_line(version)
    jar_dir = install(line)
    for attempt in range(_BIND_ATTEMPTS):
        try:
            broker = _start(line, jar_dir, Path(tmp_dir) / f"kafka{line}-{attempt}", timeout)
            break
        except _PortTaken:  # another process took a port between free_port() and the bind
            if attempt == _BIND_ATTEMPTS - 1:
                raise RuntimeError(f"Kafka {line}: its ports were taken {_BIND_ATTEMPTS} times") from None
    try:
        yield broker
    finally:
        broker.stop()


_BIND_ATTEMPTS = 3


class _PortTaken(Exception):
    pass


def _start(line: str, jar_dir: Path, data_dir: Path, timeout: float) -> ReferenceBroker:
    log_path = data_dir.with_name(f"{data_dir.name}.log")
    port, second_port = free_port(), free_port()
    while second_port == port:
        second_port = free_port()
    second = "--zk-port" if line == "39" else "--controller-port"
    command = [str(SCRIPT), "start", line, "--port", str(port), "--data", str(data_dir), second, str(second_port),
               "--owner-pid", str(os.getpid())]
    bootstrap = f"127.0.0.1:{port}"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        answered_at = wait_for_metadata(bootstrap, lambda: process.poll() is None, timeout)
        pid = _read_pid(data_dir / "kafka.pid")
        assert pid is not None, "the launcher wrote no kafka.pid"
        zookeeper_pid = _read_pid(data_dir / "zookeeper.pid") if line == "39" else None
        first_start = process_start_boottime(zookeeper_pid if zookeeper_pid is not None else pid)
        return ReferenceBroker(
            line=line,
            kafka_version=jar_dir.name,
            bootstrap=bootstrap,
            data_dir=data_dir,
            log_path=log_path,
            pid=pid,
            zookeeper_pid=zookeeper_pid,
            startup_seconds=answered_at - first_start,
            broker_startup_seconds=answered_at - process_start_boottime(pid),
            _process=process,
        )
    except BaseException as exc:
        stop_group(process, STOP_TIMEOUT, [_read_pid(data_dir / "kafka.pid"), _read_pid(data_dir / "zookeeper.pid")])
        if not isinstance(exc, Exception):
            raise
        output = _tail(log_path)
        if "Address already in use" in output:
            raise _PortTaken from exc
        raise RuntimeError(f"Kafka {line} did not start ({exc}); its log {log_path}:\n{output}") from exc


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


@dataclass
class ClusterMember:
    """One broker of a ``Kafka39Cluster``: its id, its port (kept across restarts) and its JVM."""

    broker_id: int
    port: int
    data_dir: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)  # the launcher
    pid: int | None = None  # the broker's JVM

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.with_name(f"{self.data_dir.name}.log")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Kafka39Cluster:
    """N Kafka 3.9 brokers (ids 1..N) in ZooKeeper mode on one ZooKeeper that the caller runs.

        with Kafka39Cluster(tmp, "127.0.0.1:2181/kafka", brokers=3, settings={...}) as kafka:
            kafka.members[1].bootstrap, kafka.kill(1), kafka.terminate(2), kafka.restart(1)

    The cluster counterpart of ``start_reference_broker("39")`` (which keeps its own
    ZooKeeper and one broker): each broker is ``scripts/kafka-reference start 39 --zookeeper``
    with the shared settings plus ``settings``, on a loopback port it keeps when restarted, in
    a process group of its own. ``kill`` and ``terminate`` signal the JVM itself, as an
    operator's ``kill`` would; the launcher exits with it. A broker is ready when its own
    Metadata answer lists a broker; the cluster when one lists all N.
    """

    def __init__(self, directory: Path, zookeeper_connect: str, brokers: int = 3,
                 settings: dict[str, str] | None = None) -> None:
        self.zookeeper_connect = zookeeper_connect
        self.settings = dict(settings or {})
        self.members = {broker_id: ClusterMember(broker_id, free_port(), directory / f"kafka-{broker_id}")
                        for broker_id in range(1, brokers + 1)}

    def start(self, timeout: float = START_TIMEOUT) -> Kafka39Cluster:
        install("39")
        try:
            for broker_id in self.members:
                self.start_broker(broker_id, timeout)
            self.wait_for_brokers(len(self.members), timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_for_brokers(self, count: int, timeout: float = START_TIMEOUT) -> None:
        """Until a live broker's Metadata lists ``count`` brokers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for member in self.members.values():
                answer = metadata_answer(member.bootstrap) if member.alive() else None
                if answer is not None and len(answer.brokers) == count:
                    return
            time.sleep(0.05)
        raise TimeoutError(f"Kafka 3.9 cluster: no broker listed {count} brokers within {timeout:.0f} s")

    def start_broker(self, broker_id: int, timeout: float = START_TIMEOUT) -> None:
        member = self.members[broker_id]
        member.data_dir.mkdir(parents=True, exist_ok=True)
        command = [str(SCRIPT), "start", "39", "--port", str(member.port), "--data", str(member.data_dir),
                   "--zookeeper", self.zookeeper_connect, "--broker-id", str(broker_id),
                   "--owner-pid", str(os.getpid())]
        for name, value in self.settings.items():
            command += ["--set", f"{name}={value}"]
        with open(member.log_path, "ab") as log:
            member.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for_metadata(member.bootstrap, member.alive, timeout)
        except BaseException as exc:
            self._stop_member(member)
            if not isinstance(exc, Exception):
                raise
            raise RuntimeError(f"Kafka 3.9 broker {broker_id} did not start ({exc}); its log "
                               f"{member.log_path}:\n{_tail(member.log_path)}") from exc
        member.pid = _read_pid(member.data_dir / "kafka.pid")
        assert member.pid is not None, "the launcher wrote no kafka.pid"

    def kill(self, broker_id: int) -> None:
        """SIGKILL the broker's JVM (no controlled shutdown, its ZooKeeper session left to expire)."""
        member = self.members[broker_id]
        assert member.process is not None and member.pid is not None
        os.kill(member.pid, signal.SIGKILL)
        member.process.wait(STOP_TIMEOUT)

    def terminate(self, broker_id: int) -> subprocess.Popen[bytes]:
        """SIGTERM the broker's JVM (its controlled shutdown); the launcher, which exits with it."""
        member = self.members[broker_id]
        assert member.process is not None and member.pid is not None
        os.kill(member.pid, signal.SIGTERM)
        return member.process

    def restart(self, broker_id: int, timeout: float = START_TIMEOUT) -> None:
        self._stop_member(self.members[broker_id])
        self.start_broker(broker_id, timeout)

    def stop(self) -> None:
        for member in self.members.values():
            self._stop_member(member)

    @staticmethod
    def _stop_member(member: ClusterMember) -> None:
        if member.process is not None:
            stop_group(member.process, STOP_TIMEOUT, [member.pid or _read_pid(member.data_dir / "kafka.pid")])
            member.process = None

    def __enter__(self) -> Kafka39Cluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# Session-wide brokers for the tests that compare against Kafka (tests/differential imports
# these into its conftest): one JVM start per run, not per test.
@pytest.fixture(scope="session")
def kafka39(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceBroker]:
    with start_reference_broker("39", tmp_path_factory.mktemp("kafka39")) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceBroker]:
    with start_reference_broker("4", tmp_path_factory.mktemp("kafka4")) as broker:
        yield broker
