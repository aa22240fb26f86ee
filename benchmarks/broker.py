"""Broker benchmark: Strom against Apache Kafka, Tansu and librdkafka's mock cluster, same load, one run.

    .venv/bin/python benchmarks/broker.py [--rounds 3] [--small 500000] [--large 300000]
        [--brokers strom,kafka39,kafka4,tansu,mock]

Security variants (issue 20; not in the default set), the same workloads beside ``strom``'s
plaintext rows: ``strom-tls`` (the clients on an SSL listener), ``strom-sasl-ssl`` (SASL_SSL,
SCRAM-SHA-512; the user made with AlterUserScramCredentials on a PLAINTEXT set-up listener) and
``strom-acl`` (PLAINTEXT with the ACL authorizer on and 1,000 ACLs loaded, the benchmark's
``User:ANONYMOUS`` allowed by its own few among them): ``--brokers strom,strom-tls,strom-sasl-ssl,strom-acl``; ``kafka39-tls`` is Kafka 3.9's SSL
listener with the same certificates, beside ``kafka39``.
Every broker also gets ``--one-record-requests`` Produce requests of one 100 B record each
(kcat, ``batch.num.messages=1``); the broker's CPU for them over their count is its cost per
request, so ``strom-acl`` minus ``strom`` is what the authorizer adds to a Produce. The CPU
figures read the broker's own CPU time (/proc), so other load on the machine moves them little.

Apache Kafka (``kafka39``: 3.9 with ZooKeeper; ``kafka4``: 4.x in KRaft mode) runs from the
jars ``scripts/kafka-reference`` fetches from Maven Central, with the shared reference
settings, and gets one uncounted warm-up pass of the workloads per round (a JVM is run
warm in practice). Also measured per broker: start to first answered Metadata, resident
memory after the 1 KiB run (Kafka: the broker JVM alone, not its ZooKeeper), and the time
for a two-member confluent-kafka group to form and fetch.

Load generators: ``kcat-wheel`` (kcat on librdkafka 2.16, from ../shared/peers/install.sh,
which this script runs if needed; C, so the client is not the bottleneck) and, for
latency, ``latency.c`` (librdkafka, paced; built with gcc when Debian's librdkafka-dev is
installed, else confluent-kafka stands in). Workloads: 100 B records to one partition (linger 5 ms);
1 KiB records to four partitions; consuming those back with a kcat process per partition; p50/p99
produce latency (acks=all) at a fixed rate. Rounds are interleaved across brokers and
each figure is reported as best and median, since single runs here swing by ±40 %.
Tansu keeps its data in memory (the only engine in its build); Strom writes segment
files with the default flush policy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.support.reference_broker starts Apache Kafka
# --pin: the broker on CPU 1 and the latency generator on CPU 0 (taskset), so that on a
# 2-core machine they do not preempt each other.
PIN_BROKER: list[str] = []
PIN_CLIENT: list[str] = []
PEERS = REPO.parent / "shared" / "peers"
PEERS_VENV = REPO / ".peers-venv"


@dataclass
class Broker:
    name: str
    bootstrap: str
    stop: Callable[[], None]
    pid: int | None = None  # the broker process, for its resident memory
    startup_seconds: float | None = None  # process start to the first answered Metadata
    warm_up: bool = False  # a JVM: one uncounted round first, as Kafka runs warm in practice
    # A TLS listener (strom-tls): kcat's -X settings and confluent-kafka's for it.
    client_config: dict[str, str] = field(default_factory=dict)

    def kcat_args(self) -> list[str]:
        return [arg for name, value in self.client_config.items() for arg in ("-X", f"{name}={value}")]


@dataclass
class Results:
    figures: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, broker: str, workload: str, value: float) -> None:
        self.figures.setdefault((workload, broker), []).append(value)


def ensure_peers() -> Path:
    kcat = PEERS_VENV / "bin" / "kcat-wheel"
    if not kcat.exists():
        subprocess.run([str(PEERS / "install.sh"), str(PEERS_VENV)], check=True)
    return kcat


@contextmanager
def strom(partitions: int, loop: str = "asyncio", security: str = "", acls: int = 0) -> Iterator[Broker]:
    """``security``: ``"tls"`` puts the clients on an SSL listener, ``"sasl-ssl"`` on a
    SASL_SSL one (SCRAM-SHA-512), with PEM certificates made for the run as the tests'; a
    PLAINTEXT listener beside it answers the start-up probe (and makes the SCRAM user).
    ``acls``: the ACL authorizer on, with that many ACLs written to the data directory first."""
    with tempfile.TemporaryDirectory(prefix="strom-bench-") as data:
        listeners = "PLAINTEXT://127.0.0.1:0"
        client_config: dict[str, str] = {}
        overrides: list[str] = []
        secure_port = _free_port()
        if security:
            from tests.support.certs import make_certificates

            certs = make_certificates(Path(data) / "certs")
            protocol = {"tls": "SSL", "sasl-ssl": "SASL_SSL"}[security]
            listeners += f",{protocol}://127.0.0.1:{secure_port}"
            settings = certs.broker_overrides(protocol)
            client_config = {"security.protocol": protocol.lower(), "ssl.ca.location": str(certs.ca)}
            if security == "sasl-ssl":
                settings["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
                client_config |= {"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": SCRAM_USER[0],
                                  "sasl.password": SCRAM_USER[1]}
            for name, value in settings.items():
                overrides += ["--override", f"{name}={value}"]
        if acls:
            _write_acls(Path(data) / "data", acls)
            overrides += ["--override", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"]
        command = [
            sys.executable, "-m", "strom", "serve", "--data-dir", str(Path(data) / "data"),
            "--listeners", listeners, "--log-level", "warning",
            "--override", f"num.partitions={partitions}", "--event-loop", loop,
            # as Kafka's shared reference settings (tools/kafka-reference/server.properties)
            "--override", "group.initial.rebalance.delay.ms=0", *overrides,
        ]
        # Run from bytecode as an installed package does, even where the environment says
        # not to write it (as benchmarks/startup.py): the start-up figure is not a compile.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(REPO / ".venv" / "pycache")
        started = time.monotonic()
        process = subprocess.Popen(PIN_BROKER + command, stdout=subprocess.PIPE, text=True, env=env)
        assert process.stdout is not None
        line = process.stdout.readline()
        bootstrap = line.rsplit("ready on ", 1)[1].strip()
        try:
            startup = wait_for_metadata(bootstrap, lambda: process.poll() is None, started)
            name = "strom" if loop == "asyncio" else f"strom-{loop}"
            if security == "sasl-ssl":
                _create_scram_user(bootstrap)
            if security:
                name, bootstrap = f"{name}-{security}", f"127.0.0.1:{secure_port}"
            if acls:
                name = f"{name}-acl"
                _check_authorizer_on(bootstrap)
            yield Broker(name, bootstrap, process.terminate, process.pid, startup, client_config=client_config)
        finally:
            process.terminate()
            process.wait(30)


SCRAM_USER = ("bench", "bench-secret")


def _create_scram_user(plaintext_bootstrap: str) -> None:
    """The benchmark's SCRAM-SHA-512 user, made as a client does (KIP-554: salted here)."""
    from strom.protocol.messages.alter_user_scram_credentials_request import (
        AlterUserScramCredentialsRequest,
        ScramCredentialUpsertion,
    )
    from strom.security.sasl.scram import MECHANISMS
    from tests.support.reference_broker import WireClient

    scram, salt, iterations = MECHANISMS["SCRAM-SHA-512"], os.urandom(24), 4096
    upsertion = ScramCredentialUpsertion(SCRAM_USER[0], scram.kip554_type, iterations, salt,
                                         scram.salted_password(SCRAM_USER[1].encode(), salt, iterations))
    with WireClient(plaintext_bootstrap) as client:
        response = client.call(AlterUserScramCredentialsRequest(upsertions=(upsertion,)), 0)
    errors = [result.error_code for result in response.results]  # type: ignore[attr-defined]
    if errors != [0]:
        raise RuntimeError(f"AlterUserScramCredentials answered {errors}")


def _write_acls(data_dir: Path, count: int) -> None:
    """``count`` ACLs in the broker's ACL file before it starts: benchmarks/acl_authorize.py's
    mix for other principals (literal, prefixed, group, deny) plus what the benchmark's
    ``User:ANONYMOUS`` needs, each literal: Write and Read on its topics, Create on the
    cluster (topics made on first use), Read on its consumer groups (prefixed ``formation-``)."""
    from acl_authorize import acls as other_acls  # benchmarks/ is this script's directory

    from strom.security.acl.authorizer import AclAuthorizer
    from strom.security.acl.model import (
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourceType,
    )
    from strom.security.acl.store import FileAclStore

    def allow(kind: ResourceType, name: str, operation: AclOperation,
              pattern: PatternType = PatternType.LITERAL) -> AclBinding:
        entry = AccessControlEntry("User:ANONYMOUS", "*", operation, AclPermissionType.ALLOW)
        return AclBinding(ResourcePattern(kind, name, pattern), entry)

    own = [allow(ResourceType.TOPIC, topic, operation) for topic in TOPICS
           for operation in (AclOperation.WRITE, AclOperation.READ)]
    own += [allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.CREATE),
            allow(ResourceType.GROUP, "formation-", AclOperation.READ, PatternType.PREFIXED)]
    data_dir.mkdir(parents=True, exist_ok=True)
    errors = AclAuthorizer(FileAclStore(str(data_dir))).create_acls(other_acls(count - len(own)) + own)
    if any(errors):
        raise RuntimeError(f"ACLs refused: {[error for error in errors if error]}")


def _check_authorizer_on(bootstrap: str) -> None:
    """The ACLs are in force: DescribeAcls, which the benchmark's principal has no ACL for, is
    refused (CLUSTER_AUTHORIZATION_FAILED, 31; without an authorizer it is SECURITY_DISABLED)."""
    from strom.protocol.messages.describe_acls_request import DescribeAclsRequest
    from tests.support.reference_broker import WireClient

    with WireClient(bootstrap) as client:
        response = client.call(DescribeAclsRequest(1, None, 1, None, None, 1, 1), 3)
    code = response.error_code  # type: ignore[attr-defined]
    if code != 31:
        raise RuntimeError(f"strom-acl: DescribeAcls answered error {code}, not 31: no authorizer?")


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def tansu(port: int = 19092) -> Iterator[Broker]:
    env = {**os.environ, "PEERS_VENV": str(PEERS_VENV)}
    pid = subprocess.run(
        [*PIN_BROKER, str(PEERS / "tansu.sh"), str(port)], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()
    try:
        yield Broker("tansu", f"127.0.0.1:{port}", lambda: None)
    finally:
        subprocess.run([str(PEERS / "tansu.sh"), "stop", pid], check=False, env=env, capture_output=True)


@contextmanager
def mock_cluster(topics: list[str]) -> Iterator[Broker]:
    command = [str(PEERS_VENV / "bin" / "python"), str(PEERS / "mock_cluster.py"), "--brokers", "1", "--max-seconds", "1800"]
    for topic in topics:
        command += ["--topic", topic]
    process = subprocess.Popen(PIN_BROKER + command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    bootstrap = process.stdout.readline().strip()
    try:
        yield Broker("mock", bootstrap, process.terminate)
    finally:
        process.terminate()
        process.wait(30)


@contextmanager
def kafka(line: str) -> Iterator[Broker]:
    """Apache Kafka (``39``: 3.9 with its ZooKeeper, ``4``: 4.x in KRaft mode), from the jars
    ``scripts/kafka-reference`` fetches, with the shared reference settings; the
    benchmark's topics are created up front (its ``num.partitions`` is 1)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.reference_broker import start_reference_broker

    with tempfile.TemporaryDirectory(prefix=f"kafka{line}-bench-") as data, \
            start_reference_broker(line, Path(data)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        wanted = [NewTopic(name, count, 1) for name, count in TOPICS.items()]
        for future in admin.create_topics(wanted).values():
            future.result(60)
        yield Broker(f"kafka{line}", broker.bootstrap, lambda: None, broker.pid, broker.startup_seconds,
                     warm_up=True)


@contextmanager
def kafka39_ssl() -> Iterator[Broker]:
    """Kafka 3.9 with the clients on an SSL listener (PEM files, KIP-651; the same certificates
    as strom-tls): one broker of ``Kafka39Cluster`` on a ZooKeeper of its own, a PLAINTEXT
    listener beside the SSL one for its start-up probe and the topics' creation."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from strom.cluster.zookeeper_server import ZooKeeperEnsemble
    from tests.support.certs import make_certificates
    from tests.support.reference_broker import Kafka39Cluster

    with tempfile.TemporaryDirectory(prefix="kafka39-ssl-bench-") as data, \
            ZooKeeperEnsemble(Path(data) / "zookeeper", size=1) as zookeeper:
        certs = make_certificates(Path(data) / "certs")
        cluster = Kafka39Cluster(Path(data), zookeeper.connect_string, brokers=1)
        member, ssl_port = cluster.members[1], _free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{member.port},SSL://127.0.0.1:{ssl_port}"
        cluster.settings |= {"listeners": listeners, "advertised.listeners": listeners,
                             "offsets.topic.replication.factor": "1", **certs.broker_overrides("SSL")}
        cluster.start()
        try:
            admin = AdminClient({"bootstrap.servers": member.bootstrap})
            for future in admin.create_topics([NewTopic(n, c, 1) for n, c in TOPICS.items()]).values():
                future.result(60)
            yield Broker("kafka39-tls", f"127.0.0.1:{ssl_port}", lambda: None, member.pid, warm_up=True,
                         client_config={"security.protocol": "ssl", "ssl.ca.location": str(certs.ca)})
        finally:
            cluster.stop()


# The benchmark's topics and their partitions (Strom and Tansu create them on first use).
TOPICS = {"small": 1, "large": 4, "latency": 1, "probe": 4, "warmup": 1, "warmup4": 4, "requests": 1}


def wait_for_metadata(bootstrap: str, alive: Callable[[], bool], started: float) -> float:
    """Seconds from ``started`` (monotonic) to the first answered Metadata request."""
    from tests.support.reference_broker import metadata_answer

    while alive():
        if metadata_answer(bootstrap, timeout=1.0) is not None:
            return time.monotonic() - started
        time.sleep(0.01)
    raise RuntimeError(f"the broker on {bootstrap} exited before answering Metadata")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def group_formation(broker: Broker, topic: str) -> float:
    """Seconds from two consumers subscribing (one group, confluent-kafka) to both having
    fetched a record: JoinGroup, SyncGroup, OffsetFetch and the first Fetch."""
    import uuid

    import confluent_kafka

    group = f"formation-{uuid.uuid4().hex[:8]}"
    members = [confluent_kafka.Consumer({**broker.client_config, "bootstrap.servers": broker.bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
               for _ in range(2)]
    start = time.perf_counter()
    for member in members:
        member.subscribe([topic])
    fetched = [False, False]
    while not all(fetched) and time.perf_counter() - start < 120:
        for i, member in enumerate(members):
            message = member.poll(0.01)
            if message is not None and message.error() is None:
                fetched[i] = True
    elapsed = time.perf_counter() - start
    for member in members:
        member.close()
    if not all(fetched):
        raise RuntimeError(f"{broker.name}: the two-member group did not fetch in 120 s")
    return elapsed


def _records_file(directory: Path, count: int, size: int) -> Path:
    path = directory / f"records-{count}-{size}.txt"
    if not path.exists():
        line = (b"x" * (size - 1)) + b"\n"
        with open(path, "wb") as file:
            for index in range(count):
                stamp = b"%010d" % index
                file.write(stamp + line[len(stamp):])
    return path


def kcat_produce(kcat: Path, broker: Broker, topic: str, records: Path, partition: int | None,
                 settings: tuple[str, ...] = ("linger.ms=5", "batch.size=1000000")) -> float:
    command = [str(kcat), "-b", broker.bootstrap, *broker.kcat_args(), "-P", "-t", topic, "-l", str(records),
               "-X", "queue.buffering.max.messages=1000000"]
    command += [arg for setting in settings for arg in ("-X", setting)]
    if partition is not None:
        command += ["-p", str(partition)]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def kcat_consume(kcat: Path, broker: Broker, topic: str, partitions: int, expected: int) -> float:
    """One kcat process per partition (kcat reads one partition, or all, per process).

    Each writes its offsets to its own file: reading pipes one after another would let
    a full pipe stall the others and measure this script instead of the broker.
    """
    with tempfile.TemporaryDirectory(prefix="strom-bench-consume-") as out:
        outputs = [open(Path(out) / f"{p}.txt", "wb") for p in range(partitions)]  # noqa: SIM115
        start = time.perf_counter()
        processes = [
            subprocess.Popen(
                [str(kcat), "-b", broker.bootstrap, *broker.kcat_args(), "-C", "-t", topic, "-p", str(p),
                 "-o", "beginning", "-e", "-q", "-f", "%o\n"],
                stdout=outputs[p],
            )
            for p in range(partitions)
        ]
        for process in processes:
            process.wait(timeout=300)
        elapsed = time.perf_counter() - start
        seen = 0
        for p, output in enumerate(outputs):
            output.close()
            seen += (Path(out) / f"{p}.txt").read_bytes().count(b"\n")
    if seen < expected:
        raise RuntimeError(f"{broker.name}: consumed {seen} of {expected}")
    return elapsed


def c_latency_tool(work: Path) -> Path | None:
    """Build benchmarks/latency.c (needs gcc and Debian's librdkafka-dev), or None."""
    binary = work / "latency"
    if not binary.exists():
        source = Path(__file__).with_name("latency.c")
        built = subprocess.run(["gcc", "-O2", "-o", str(binary), str(source), "-lrdkafka"],
                               capture_output=True, check=False)
        if built.returncode != 0:
            print("latency.c did not build (gcc, librdkafka-dev?); using the Python generator", flush=True)
            return None
    return binary


def c_latency(tool: Path, broker: Broker, topic: str, rate: int, seconds: float) -> tuple[float, float]:
    out = subprocess.run([*PIN_CLIENT, str(tool), broker.bootstrap, topic, str(rate), str(seconds)],
                         capture_output=True, text=True, check=True, timeout=seconds + 120).stdout.split()
    return float(out[0]), float(out[1])


def latency(broker: Broker, topic: str, rate: int, seconds: float) -> tuple[float, float]:
    """p50/p99 produce latency (ms) with acks=all at ``rate`` records/s, confluent-kafka."""
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all", "message.timeout.ms": 20000}
    )
    latencies: list[float] = []
    lock = threading.Lock()

    def delivered(err: object, msg: confluent_kafka.Message) -> None:
        # librdkafka's own clock from produce() to the broker's acknowledgement, so the
        # figure does not depend on how often this script calls poll().
        if err is None:
            with lock:
                latencies.append(msg.latency() * 1000)

    # Paced in 1 ms ticks with a sleep between them, so the load generator leaves the
    # broker its core instead of spinning on the other one.
    per_tick = max(1, rate // 1000)
    start = time.perf_counter()
    for tick in range(int(seconds * 1000)):
        for _ in range(per_tick):
            try:
                producer.produce(topic, value=b"y" * 100, partition=0, on_delivery=delivered)
            except BufferError:  # the broker is not keeping up: count it as falling behind
                producer.poll(0.01)
        producer.poll(0)
        pause = start + (tick + 1) / 1000 - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    producer.flush(30)
    latencies.sort()
    if len(latencies) < count_expected(rate, seconds) // 2:
        return float("nan"), float("nan")  # most records never acknowledged (broker down?)
    return latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]


def one_record_requests(kcat: Path, broker: Broker, work: Path, count: int) -> float:
    """Broker CPU (µs) per Produce request of one 100 B record (acks=1, one partition): each
    request is decoded, authorized, appended and answered alone, so the fixed cost per
    request (the authorizer's check among it) is not spread over a batch's records."""
    assert broker.pid is not None
    records = _records_file(work, count, 100)
    before = cpu_seconds(broker.pid)
    kcat_produce(kcat, broker, "requests", records, 0,
                 ("linger.ms=0", "batch.num.messages=1", "acks=1", "max.in.flight=5"))
    return (cpu_seconds(broker.pid) - before) / count * 1e6


def count_expected(rate: int, seconds: float) -> int:
    return max(1, rate // 1000) * int(seconds * 1000)


def warm_up(kcat: Path, broker: Broker, work: Path, args: argparse.Namespace) -> None:
    """The workloads once, uncounted, into topics of their own: a JVM's JIT warms up."""
    kcat_produce(kcat, broker, "warmup", _records_file(work, args.small, 100), 0)
    kcat_produce(kcat, broker, "warmup4", _records_file(work, args.large, 1024), None)
    kcat_consume(kcat, broker, "warmup4", 4, args.large)
    if args.latency_rate:
        latency(broker, "warmup", args.latency_rate, min(args.latency_seconds, 2))


def one_round(kcat: Path, broker: Broker, work: Path, args: argparse.Namespace, results: Results) -> None:
    if broker.startup_seconds is not None:
        results.add(broker.name, "start to first Metadata answer (s)", broker.startup_seconds)
    if broker.warm_up:
        warm_up(kcat, broker, work, args)
    small = _records_file(work, args.small, 100)
    large = _records_file(work, args.large, 1024)
    seconds = kcat_produce(kcat, broker, "small", small, 0)
    results.add(broker.name, "produce 100 B, 1 partition (records/s)", args.small / seconds)
    baseline = kcat_produce(kcat, broker, "small", _records_file(work, 1, 100), 0)  # start-up only
    if seconds > baseline:
        results.add(broker.name, "produce 100 B, net of kcat start-up (records/s)", args.small / (seconds - baseline))
    if broker.name != "mock":  # the mock keeps ~5 MiB per partition: it cannot hold this load
        seconds = kcat_produce(kcat, broker, "large", large, None)
        results.add(broker.name, "produce 1 KiB, 4 partitions (records/s)", args.large / seconds)
        cpu_before = cpu_seconds(broker.pid) if broker.pid is not None else None
        seconds = kcat_consume(kcat, broker, "large", 4, args.large)
        results.add(broker.name, "consume 1 KiB, 4 kcat processes (records/s)", args.large / seconds)
        if cpu_before is not None and broker.pid is not None:  # what the broker spends, whatever else runs
            spent = cpu_seconds(broker.pid) - cpu_before
            results.add(broker.name, "consume 1 KiB: broker CPU per record (us)", spent / args.large * 1e6)
        # kcat's own start-up, metadata and end-of-partition detection take about half a
        # second whatever the broker; timing 4 one-record partitions measures that, and
        # the net figure is what the broker's fetch path delivers once the clients run.
        for partition in range(4):
            subprocess.run([str(kcat), "-b", broker.bootstrap, *broker.kcat_args(), "-P", "-t", "probe",
                            "-p", str(partition)],
                           input=b"x\n", check=True, capture_output=True)
        baseline = kcat_consume(kcat, broker, "probe", 4, 4)
        if seconds > baseline:
            results.add(broker.name, "consume 1 KiB, net of kcat start-up (records/s)", args.large / (seconds - baseline))
        if broker.pid is not None:
            results.add(broker.name, "resident memory after the 1 KiB run (MiB)", rss_mib(broker.pid))
        results.add(broker.name, "two-member group: subscribe to both fetched (s)", group_formation(broker, "large"))
    if args.one_record_requests and broker.pid is not None:
        results.add(broker.name, "produce, one record a request: broker CPU per request (us)",
                    one_record_requests(kcat, broker, work, args.one_record_requests))
    if args.latency_rate and not broker.client_config:  # latency.c speaks PLAINTEXT only
        tool = c_latency_tool(work)
        if tool is not None:
            p50, p99 = c_latency(tool, broker, "latency", args.latency_rate, args.latency_seconds)
        else:
            p50, p99 = latency(broker, "latency", args.latency_rate, args.latency_seconds)
        results.add(broker.name, f"produce latency p50 at {args.latency_rate}/s (ms)", p50)
        results.add(broker.name, f"produce latency p99 at {args.latency_rate}/s (ms)", p99)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", type=int, default=500_000, help="100 B records per round")
    parser.add_argument("--large", type=int, default=300_000, help="1 KiB records per round")
    parser.add_argument("--latency-rate", type=int, default=5000, help="records/s for the latency run (0: skip)")
    parser.add_argument("--latency-seconds", type=float, default=5)
    parser.add_argument("--brokers", default="strom,kafka39,kafka4,tansu,mock")
    parser.add_argument("--one-record-requests", type=int, default=20_000,
                        help="Produce requests of one record each, for the broker's CPU per request (0: skip)")
    parser.add_argument("--acls", type=int, default=1000, help="ACLs loaded in strom-acl")
    parser.add_argument("--pin", action="store_true", help="pin brokers to CPU 1, the latency generator to CPU 0")
    args = parser.parse_args()
    if args.pin:
        PIN_BROKER[:] = ["taskset", "-c", "1"]
        PIN_CLIENT[:] = ["taskset", "-c", "0"]
    kcat = ensure_peers()
    results = Results()
    chosen = args.brokers.split(",")
    starters: dict[str, Callable[[], object]] = {
        "strom": lambda: strom(4),
        "strom-uvloop": lambda: strom(4, "uvloop"),
        # issue 20: the same workloads over an SSL listener, over SASL_SSL, and with ACLs checked
        "strom-tls": lambda: strom(4, security="tls"),
        "strom-sasl-ssl": lambda: strom(4, security="sasl-ssl"),
        "strom-acl": lambda: strom(4, acls=args.acls),
        "tansu": lambda: tansu(),
        "mock": lambda: mock_cluster(["small:1", "large:4", "latency:1", "probe:4"]),
        "kafka39": lambda: kafka("39"),
        "kafka4": lambda: kafka("4"),
        "kafka39-tls": kafka39_ssl,
    }
    with tempfile.TemporaryDirectory(prefix="strom-bench-work-") as work:
        for round_number in range(args.rounds):
            for name in chosen:
                with starters[name]() as broker:  # type: ignore[attr-defined]
                    print(f"round {round_number + 1}: {name} on {broker.bootstrap}", flush=True)
                    one_round(kcat, broker, Path(work), args, results)
    print(f"\n{'workload':48} {'broker':12} {'best':>12} {'median':>12}")
    for (workload, name), values in sorted(results.figures.items()):
        lower_is_better = "latency" in workload or workload.endswith(("(s)", "(MiB)", "(us)"))
        best = min(values) if lower_is_better else max(values)
        print(f"{workload:48} {name:12} {best:12,.1f} {statistics.median(values):12,.1f}")


if __name__ == "__main__":
    main()
