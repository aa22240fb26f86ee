"""Cluster benchmark: Strom's cluster mode beside Apache Kafka 3.9 in ZooKeeper mode, one run (issue 17).

    .venv/bin/python benchmarks/cluster.py [--rounds 5] [--systems strom,kafka39]
        [--figures produce,create,metadata,shutdown,failover,leader-failover]
        [--metadata-requests 2000] [--produce-records 50000]

Figures 5-7 (replication, issue 18: produce with RF 1/3 and acks 1/all, consume, leader
failover on SIGKILL and SIGTERM) are in ``benchmarks/_replication.py``; ``--systems kafka39``
or ``--systems strom`` runs one side alone.

Both systems run on the same ZooKeeper (Debian's 3.8, standalone, tickTime 500 ms,
``strom.cluster.zookeeper_server``), each cluster in a chroot of its own, with
``zookeeper.session.timeout.ms=6000`` for every broker of both (Kafka's default is 18 s).
Strom's brokers are ``strom serve`` processes (``tests.support.cluster.StromCluster``),
Kafka's are 3.9.2 JVMs from the jars ``scripts/kafka-reference`` fetches
(``tests.support.reference_broker.Kafka39Cluster``): node ids 1..N on loopback ports, the
shared reference settings. Both 3-broker clusters run side by side and the rounds take
turns (Strom, Kafka, Strom, ...), so load from elsewhere on the machine falls on both; then
both 1-broker clusters the same way. Every figure is taken the same way for both, from
outside: ZooKeeper's znodes read with kazoo, Metadata v12, CreateTopics v7 and
DeleteTopics v6 over the wire, encoded by Strom's codec. Each figure gets one uncounted
warm-up round per system (a JVM runs warm in practice) and is reported as best and median.

3. create: CreateTopics (100 partitions, replication factor 1) sent to the controller: until
   its answer, until the controller's Metadata gives every partition a leader, until every
   broker's does; on 3 brokers and on 1. The topic is deleted after each round.
4. metadata: a 1,000-partition topic (replication factor 1) on 3 brokers; ``--metadata-requests``
   Metadata requests for it per round, one at a time on one connection to a broker that
   is not the controller, the answers read whole but not decoded: median and p99 latency,
   requests/s. The topic stays for figures 2 and 1, as a cluster's topics would.
2. shutdown: SIGTERM to a broker (not the controller) that leads the most partitions of a
   new 12-partition topic. Kafka's topic has replication factor 3, so its figure is the
   time until the controller's Metadata shows none led by it (its controlled shutdown moved
   them), and until the process exited. Strom's cluster mode part 1 has one replica per
   partition, so nothing can move: its figure is SIGTERM to exit only (its controlled
   shutdown, then closing its logs), and the comparison waits for part 2.
1. failover: once every broker's Metadata gives every partition a leader and the cluster
   has been idle ``SETTLE_SECONDS``, SIGKILL the broker ``/controller`` names; time until
   ``/controller`` names another, split into the session expiry (until ZooKeeper deletes
   the dead broker's ``/controller``: a watch) and the election, and until every live
   broker's Metadata names the new controller (also counted from the expiry: the part each
   system controls, as the expiry falls at a random point of the dead broker's ping cycle).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.support starts both clusters

from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import NoNodeError  # noqa: E402
from kazoo.protocol.states import EventType, WatchedEvent  # noqa: E402

import benchmarks._replication as replication  # noqa: E402
from strom.cluster.zookeeper_server import ZooKeeperEnsemble  # noqa: E402
from strom.protocol.headers import encode_request  # noqa: E402
from strom.protocol.message import Message  # noqa: E402
from strom.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest  # noqa: E402
from strom.protocol.messages.create_topics_response import CreateTopicsResponse  # noqa: E402
from strom.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState  # noqa: E402
from strom.protocol.messages.delete_topics_response import DeleteTopicsResponse  # noqa: E402
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic  # noqa: E402
from strom.protocol.messages.metadata_response import MetadataResponse  # noqa: E402
from tests.support.reference_broker import WireClient  # noqa: E402

SESSION_TIMEOUT_MS = 6000  # zookeeper.session.timeout.ms of every broker, both systems
METADATA_VERSION = 12
CREATE_TOPICS_VERSION = 7
DELETE_TOPICS_VERSION = 6
POLL_SECONDS = 0.005
SETTLE_SECONDS = 2.5  # idle before a controller is killed: longer than a ZooKeeper ping cycle
TIMEOUT = 180.0  # seconds for anything to happen: two loaded cores, JVMs starting
FIGURES = ("failover", "shutdown", "create", "metadata", "produce", "leader-failover")


class Cluster(Protocol):
    """What the benchmark needs of either system's cluster; everything else it reads from outside."""

    name: str
    zookeeper_connect: str

    def bootstrap(self, broker_id: int) -> str: ...
    def broker_ids(self) -> list[int]: ...
    def kill(self, broker_id: int) -> None: ...
    def send_sigterm(self, broker_id: int) -> subprocess.Popen[bytes] | subprocess.Popen[str]: ...
    def reap(self, broker_id: int) -> None: ...
    def restart(self, broker_id: int) -> None: ...


class StromSide:
    """Strom's brokers, ``strom serve`` processes through ``tests.support.cluster.StromCluster``."""

    def __init__(self, directory: Path, zookeeper_connect: str, brokers: int) -> None:
        from tests.support.cluster import StromCluster

        self.name = "strom"
        self.zookeeper_connect = zookeeper_connect
        self.cluster = StromCluster(directory, zookeeper_connect, brokers,
                                    {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)})

    def bootstrap(self, broker_id: int) -> str:
        return self.cluster.brokers[broker_id].bootstrap

    def broker_ids(self) -> list[int]:
        return list(self.cluster.brokers)

    def kill(self, broker_id: int) -> None:
        self.cluster.kill(broker_id)

    def send_sigterm(self, broker_id: int) -> subprocess.Popen[str]:
        process = self.cluster.brokers[broker_id].process
        assert process is not None
        process.send_signal(signal.SIGTERM)
        return process

    def reap(self, broker_id: int) -> None:
        self.cluster.brokers[broker_id].stop(timeout=60)

    def restart(self, broker_id: int) -> None:
        self.cluster.restart(broker_id, timeout=TIMEOUT)


class KafkaSide:
    """Kafka 3.9.2 brokers in ZooKeeper mode, through ``reference_broker.Kafka39Cluster``."""

    def __init__(self, directory: Path, zookeeper_connect: str, brokers: int) -> None:
        from tests.support.reference_broker import Kafka39Cluster

        self.name = "kafka39"
        self.zookeeper_connect = zookeeper_connect
        self.cluster = Kafka39Cluster(directory, zookeeper_connect, brokers,
                                      {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)})

    def bootstrap(self, broker_id: int) -> str:
        return self.cluster.members[broker_id].bootstrap

    def broker_ids(self) -> list[int]:
        return list(self.cluster.members)

    def kill(self, broker_id: int) -> None:
        self.cluster.kill(broker_id)

    def send_sigterm(self, broker_id: int) -> subprocess.Popen[bytes]:
        return self.cluster.terminate(broker_id)

    def reap(self, broker_id: int) -> None:
        member = self.cluster.members[broker_id]
        if member.process is not None:
            member.process.wait(60)

    def restart(self, broker_id: int) -> None:
        self.cluster.restart(broker_id, TIMEOUT)


@contextmanager
def started(system: str, directory: Path, zookeeper: ZooKeeperEnsemble, brokers: int) -> Iterator[Cluster]:
    """A cluster of ``brokers`` brokers of ``system`` in a fresh chroot; stopped on leaving."""
    connect = f"{zookeeper.connect_string}/{system}-{brokers}-{int(time.time() * 1000)}"
    path = directory / f"{system}-{brokers}"
    if system == "strom":
        strom = StromSide(path, connect, brokers)
        try:
            strom.cluster.start(TIMEOUT)
            yield strom
        finally:
            strom.cluster.stop()
    else:
        kafka = KafkaSide(path, connect, brokers)
        try:
            kafka.cluster.start(TIMEOUT)
            yield kafka
        finally:
            kafka.cluster.stop()


# -- reading the cluster from outside --------------------------------------------------------
class Observer:
    """A ZooKeeper session and Metadata connections of the benchmark's own."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=30)
        self.zk.start(30)
        self.clients: dict[int, WireClient] = {}

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
        self.zk.stop()
        self.zk.close()

    def controller(self) -> int:
        """The broker id ``/controller`` names (Kafka's JSON, the same for both), -1 if none."""
        try:
            data, _ = self.zk.get("/controller")
        except NoNodeError:
            return -1
        broker_id: int = json.loads(data)["brokerid"]
        return broker_id

    def registered(self) -> set[int]:
        try:
            return {int(child) for child in self.zk.get_children("/brokers/ids")}
        except NoNodeError:
            return set()

    def client(self, broker_id: int) -> WireClient:
        if broker_id not in self.clients:
            self.clients[broker_id] = WireClient(self.cluster.bootstrap(broker_id), timeout=60, client_id="cluster-bench")
        return self.clients[broker_id]

    def call(self, broker_id: int, request: Message, version: int) -> Message:
        """One request to ``broker_id``; a connection that failed is dropped, the next call opens another."""
        try:
            return self.client(broker_id).call(request, version)
        except OSError:
            self.drop(broker_id)
            raise

    def drop(self, broker_id: int) -> None:
        client = self.clients.pop(broker_id, None)
        if client is not None:
            client.close()

    def partitions(self, broker_id: int, topic: str) -> list[tuple[int, int, int]]:
        """(partition, leader, ISR size) of ``topic`` as broker ``broker_id``'s Metadata has it."""
        request = MetadataRequest(topics=(MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False)
        response = self.call(broker_id, request, METADATA_VERSION)
        assert isinstance(response, MetadataResponse)
        return [(p.partition_index, p.leader_id, len(p.isr_nodes))
                for t in response.topics if t.name == topic and t.error_code == 0 for p in t.partitions]

    def everything_led(self, broker_id: int) -> bool:
        """Every partition of every topic has a leader in broker ``broker_id``'s Metadata."""
        request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        response = self.call(broker_id, request, METADATA_VERSION)
        assert isinstance(response, MetadataResponse)
        return all(t.error_code == 0 and all(p.leader_id >= 0 for p in t.partitions) for t in response.topics)

    def names_controller(self, broker_id: int, controller: int) -> bool:
        request = MetadataRequest(topics=(), allow_auto_topic_creation=False)
        response = self.call(broker_id, request, METADATA_VERSION)
        assert isinstance(response, MetadataResponse)
        return response.controller_id == controller

    def all_led(self, broker_id: int, topic: str, partitions: int, isr: int = 1) -> bool:
        states = self.partitions(broker_id, topic)
        return len(states) == partitions and all(leader >= 0 and size >= isr for _, leader, size in states)

    def create_topic(self, controller: int, topic: str, partitions: int, replication_factor: int) -> None:
        request = CreateTopicsRequest(topics=(CreatableTopic(name=topic, num_partitions=partitions,
                                                             replication_factor=replication_factor),),
                                      timeout_ms=int(TIMEOUT * 1000))
        response = self.call(controller, request, CREATE_TOPICS_VERSION)
        assert isinstance(response, CreateTopicsResponse)
        (result,) = response.topics
        if result.error_code != 0:
            raise RuntimeError(f"{self.cluster.name}: CreateTopics {topic}: error {result.error_code} {result.error_message}")

    def delete_topic(self, topic: str) -> None:
        """DeleteTopics at the controller, then until ZooKeeper holds no trace of the topic."""
        controller = wait_for_int(self.controller, "a controller")
        request = DeleteTopicsRequest(topics=(DeleteTopicState(name=topic),), timeout_ms=int(TIMEOUT * 1000))
        response = self.call(controller, request, DELETE_TOPICS_VERSION)
        assert isinstance(response, DeleteTopicsResponse)
        (result,) = response.responses
        if result.error_code != 0:
            raise RuntimeError(f"{self.cluster.name}: DeleteTopics {topic}: error {result.error_code} {result.error_message}")
        wait_for(lambda: not self.zk.exists(f"/brokers/topics/{topic}")
                 and not self.zk.exists(f"/admin/delete_topics/{topic}"), f"{topic} deleted")

    def wait_settled(self) -> int:
        """Until every broker is registered, a controller elected, and every broker's Metadata
        lists them all; the controller."""
        expected = set(self.cluster.broker_ids())
        wait_for(lambda: self.registered() == expected, "every broker registered")
        controller = wait_for_int(lambda: self.controller() if self.controller() in expected else 0, "a controller")
        for broker_id in expected:
            self.drop(broker_id)  # a restarted broker: a new connection
            wait_for(partial(self._lists_all, broker_id, expected), f"broker {broker_id} listing every broker")
        return controller

    def _lists_all(self, broker_id: int, expected: set[int]) -> bool:
        request = MetadataRequest(topics=(), allow_auto_topic_creation=False)
        response = self.call(broker_id, request, METADATA_VERSION)
        assert isinstance(response, MetadataResponse)
        return {b.node_id for b in response.brokers} == expected and response.controller_id in expected


def wait_for(condition: Callable[[], object], what: str, timeout: float = TIMEOUT) -> object:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
        except (OSError, AssertionError) as exc:  # a broker (re)starting: not yet
            last = exc
        else:
            if value:
                return value
        time.sleep(0.02)
    raise TimeoutError(f"no {what} within {timeout:.0f} s (last error: {last!r})")


def wait_for_int(condition: Callable[[], object], what: str) -> int:
    value = wait_for(condition, what)
    assert isinstance(value, int)
    return value


# -- the figures -------------------------------------------------------------------------------
@dataclass
class Results:
    figures: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, system: str, figure: str, value: float) -> None:
        self.figures.setdefault((figure, system), []).append(value)
        print(f"  {system:8} {figure:52} {value:10.4f}", flush=True)


def quiesce(observer: Observer) -> None:
    """Until every broker's Metadata gives every partition a leader, then ``SETTLE_SECONDS`` more.

    So the controller killed next is idle: its last word to ZooKeeper is a ping, at a random
    point of its ~2 s ping cycle, for both systems alike (a controller still writing partition
    states when killed would keep its session alive until the very end).
    """
    for broker_id in observer.cluster.broker_ids():
        wait_for(partial(observer.everything_led, broker_id), f"every partition led in broker {broker_id}'s Metadata")
    time.sleep(SETTLE_SECONDS)


def controller_failover(observer: Observer, results: Results | None) -> None:
    """One round of figure 1 (``results`` None: a warm-up); the killed broker is started again."""
    cluster = observer.cluster
    controller = wait_for_int(observer.wait_settled, "a settled cluster")
    quiesce(observer)
    observer.drop(controller)
    deleted: list[float] = []  # when ZooKeeper expired the dead session and its /controller went

    def watch(event: WatchedEvent) -> None:  # kazoo's thread: note the time, nothing else
        if event.type == EventType.DELETED:
            deleted.append(time.monotonic())

    if not observer.zk.exists("/controller", watch=watch):
        raise RuntimeError(f"{cluster.name}: /controller vanished before the kill")
    began = time.monotonic()
    cluster.kill(controller)
    while (named := observer.controller()) in (controller, -1):
        if time.monotonic() - began > TIMEOUT:
            raise TimeoutError(f"{cluster.name}: no new controller within {TIMEOUT:.0f} s")
        time.sleep(POLL_SECONDS)
    elected = time.monotonic()
    for broker_id in cluster.broker_ids():
        if broker_id != controller:
            wait_for(partial(observer.names_controller, broker_id, named), f"broker {broker_id} naming {named}")
    known = time.monotonic()
    if results is not None:
        expired = deleted[0] if deleted else elected
        results.add(cluster.name, "1. controller SIGKILL -> new /controller (s)", elected - began)
        results.add(cluster.name, "1. ... of which the session expiry, SIGKILL -> /controller deleted (s)",
                    expired - began)
        results.add(cluster.name, "1. ... and the election, /controller deleted -> new /controller (ms)",
                    (elected - expired) * 1000)
        results.add(cluster.name, "1. controller SIGKILL -> every live broker's Metadata names it (s)", known - began)
        results.add(cluster.name, "1. ... /controller deleted -> every live broker's Metadata names it (ms)",
                    (known - expired) * 1000)
    cluster.restart(controller)


def controlled_shutdown(observer: Observer, results: Results | None, round_number: int) -> None:
    """One round of figure 2 on a fresh 12-partition topic; the stopped broker is started again."""
    cluster = observer.cluster
    replication_factor = 3 if cluster.name == "kafka39" else 1
    controller = wait_for_int(observer.wait_settled, "a settled cluster")
    topic = f"moves-{round_number}"
    observer.create_topic(controller, topic, 12, replication_factor)
    wait_for(partial(observer.all_led, controller, topic, 12, replication_factor), f"{topic} fully replicated")
    leaders = [leader for _, leader, _ in observer.partitions(controller, topic)]
    target = max((b for b in cluster.broker_ids() if b != controller), key=leaders.count)
    observer.drop(target)
    began = time.monotonic()
    process = cluster.send_sigterm(target)
    exited: float | None = None
    moved: float | None = None if replication_factor > 1 else 0.0  # RF 1: nothing can move
    while moved is None or exited is None:
        now = time.monotonic()
        if now - began > TIMEOUT:
            raise TimeoutError(f"{cluster.name}: broker {target} still leads or runs after {TIMEOUT:.0f} s")
        if exited is None and process.poll() is not None:
            exited = now - began
        if moved is None and all(leader != target for _, leader, _ in observer.partitions(controller, topic)):
            moved = now - began
        time.sleep(POLL_SECONDS)
    cluster.reap(target)
    if results is not None:
        results.add(cluster.name, "2. broker SIGTERM -> process exited (s)", exited)
        if replication_factor > 1:
            results.add(cluster.name, "2. broker SIGTERM -> none led by it, RF 3 (s)", moved)
    cluster.restart(target)
    observer.wait_settled()
    observer.delete_topic(topic)


def topic_creation(observer: Observer, results: Results | None, round_number: int) -> None:
    """One round of figure 3: a 100-partition topic created, timed, then deleted."""
    cluster = observer.cluster
    brokers = len(cluster.broker_ids())
    controller = wait_for_int(observer.wait_settled, "a settled cluster")
    topic = f"created-{brokers}-{round_number}"
    began = time.monotonic()
    observer.create_topic(controller, topic, 100, 1)
    answered = time.monotonic() - began
    while not observer.all_led(controller, topic, 100):
        time.sleep(POLL_SECONDS)
    led = time.monotonic() - began
    for broker_id in cluster.broker_ids():
        while not observer.all_led(broker_id, topic, 100):
            time.sleep(POLL_SECONDS)
    everywhere = time.monotonic() - began
    if results is not None:
        figure = f"3. create 100 partitions, {brokers} broker{'s' if brokers > 1 else ''}"
        results.add(cluster.name, f"{figure}: answered (s)", answered)
        results.add(cluster.name, f"{figure}: controller's Metadata (s)", led)
        results.add(cluster.name, f"{figure}: every broker's Metadata (s)", everywhere)
    observer.delete_topic(topic)


def read_frame(sock: socket.socket, buffer: bytearray) -> int:
    """Read one size-prefixed response whole (not decoded: the client's cost stays out); its size."""
    header = memoryview(buffer)[:4]
    got = 0
    while got < 4:
        count = sock.recv_into(header[got:], 4 - got)
        if count == 0:
            raise ConnectionError("the broker closed the connection")
        got += count
    size: int = struct.unpack(">i", header)[0]
    if len(buffer) < size:
        buffer.extend(bytes(size - len(buffer)))
    view = memoryview(buffer)[:size]
    got = 0
    while got < size:
        count = sock.recv_into(view[got:], size - got)
        if count == 0:
            raise ConnectionError("the broker closed the connection")
        got += count
    return size


class MetadataProbe:
    """Figure 4: a 1,000-partition topic, and one connection to a broker that is not the controller."""

    TOPIC = "metadata-1000"

    def __init__(self, observer: Observer) -> None:
        cluster = observer.cluster
        self.name = cluster.name
        controller = wait_for_int(observer.wait_settled, "a settled cluster")
        observer.create_topic(controller, self.TOPIC, 1000, 1)
        for broker_id in cluster.broker_ids():
            wait_for(partial(observer.all_led, broker_id, self.TOPIC, 1000),
                     f"{self.TOPIC} led in broker {broker_id}'s Metadata")
        target = min(b for b in cluster.broker_ids() if b != controller)
        host, port = cluster.bootstrap(target).rsplit(":", 1)
        request = MetadataRequest(topics=(MetadataRequestTopic(name=self.TOPIC),), allow_auto_topic_creation=False)
        self.frame = encode_request(request, METADATA_VERSION, 1, "cluster-bench")
        self.buffer = bytearray(1 << 16)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def run(self, results: Results | None, requests: int) -> None:
        latencies = []
        size = 0
        began = time.perf_counter()
        for _ in range(requests):
            sent = time.perf_counter()
            self.sock.sendall(self.frame)
            size = read_frame(self.sock, self.buffer)
            latencies.append(time.perf_counter() - sent)
        elapsed = time.perf_counter() - began
        if results is not None:
            latencies.sort()
            figure = "4. Metadata, 1,000 partitions"
            results.add(self.name, f"{figure}: median latency (ms)", statistics.median(latencies) * 1000)
            results.add(self.name, f"{figure}: p99 latency (ms)", latencies[int(len(latencies) * 0.99) - 1] * 1000)
            results.add(self.name, f"{figure}: requests/s, one connection", requests / elapsed)
            results.add(self.name, f"{figure}: response size (bytes)", size)

    def close(self) -> None:
        self.sock.close()


def interleaved(observers: list[Observer], rounds: int, one_round: Callable[[Observer, Results | None, int], None],
                results: Results) -> None:
    """A warm-up round of each system, then ``rounds`` rounds, the systems taking turns."""
    for round_number in range(rounds + 1):
        for observer in observers:
            one_round(observer, results if round_number > 0 else None, round_number)


def run(systems: list[str], directory: Path, zookeeper: ZooKeeperEnsemble, args: argparse.Namespace,
        results: Results) -> None:
    """Every system's 3-broker cluster up at once (rounds alternate between them), then 1-broker ones."""
    with ExitStack() as stack:
        observers = []
        for system in systems:
            print(f"starting {system}, 3 brokers", flush=True)
            cluster = stack.enter_context(started(system, directory, zookeeper, 3))
            observers.append(Observer(cluster))
            stack.callback(observers[-1].close)
        if "produce" in args.figures:
            throughput = replication.ThroughputFigures(directory, args.produce_records)
            interleaved(observers, args.rounds, throughput.run, results)
        if "leader-failover" in args.figures:
            failover = replication.FailoverFigures()
            for how in ("kill", "term"):
                interleaved(observers, args.rounds, partial(failover.run, how=how), results)
        if "create" in args.figures:
            interleaved(observers, args.rounds, topic_creation, results)
        if "metadata" in args.figures:
            probes = [MetadataProbe(observer) for observer in observers]
            for probe in probes:
                stack.callback(probe.close)
            interleaved(observers, args.rounds,
                        lambda observer, record, _: probes[observers.index(observer)].run(record, args.metadata_requests),
                        results)
        if "shutdown" in args.figures:
            interleaved(observers, args.rounds, controlled_shutdown, results)
        if "failover" in args.figures:
            interleaved(observers, args.rounds, lambda observer, record, _: controller_failover(observer, record),
                        results)
    if "create" not in args.figures:
        return
    with ExitStack() as stack:
        observers = []
        for system in systems:
            print(f"starting {system}, 1 broker", flush=True)
            cluster = stack.enter_context(started(system, directory, zookeeper, 1))
            observers.append(Observer(cluster))
            stack.callback(observers[-1].close)
        interleaved(observers, args.rounds, topic_creation, results)


def report(results: Results, systems: list[str]) -> str:
    higher_is_better = ("requests/s", "MB/s")
    lines = ["| figure | " + " | ".join(f"{s} best | {s} median" for s in systems) + " |",
             "|---|" + "---|---|" * len(systems)]
    in_order = list(dict.fromkeys(figure for figure, _ in results.figures))  # as measured, by number
    for figure in sorted(in_order, key=lambda figure: figure.split(".", 1)[0]):
        cells = []
        for system in systems:
            values = results.figures.get((figure, system))
            if not values:
                cells += ["-", "-"]
                continue
            best = max(values) if any(unit in figure for unit in higher_is_better) else min(values)
            cells += [f"{best:.3f}" if best < 100 else f"{best:,.0f}", f"{statistics.median(values):.3f}"
                      if statistics.median(values) < 100 else f"{statistics.median(values):,.0f}"]
        lines.append(f"| {figure} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--systems", default="strom,kafka39")
    parser.add_argument("--figures", default=",".join(FIGURES))
    parser.add_argument("--metadata-requests", type=int, default=2000)
    parser.add_argument("--produce-records", type=int, default=50_000)
    args = parser.parse_args()
    systems = args.systems.split(",")
    args.figures = args.figures.split(",")
    for system in systems:
        if system not in ("strom", "kafka39"):
            parser.error(f"unknown system {system!r}: expected strom and/or kafka39")
    for figure in args.figures:
        if figure not in FIGURES:
            parser.error(f"unknown figure {figure!r}: expected some of {','.join(FIGURES)}")
    if args.rounds < 1 or args.metadata_requests < 100 or args.produce_records < 1000:
        parser.error("--rounds must be at least 1, --metadata-requests at least 100, --produce-records 1000")
    # A SIGTERM (a CI timeout, say) unwinds like Ctrl-C, so every broker and ZooKeeper stops.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = Results()
    with tempfile.TemporaryDirectory(prefix="strom-cluster-bench-") as data, \
            ZooKeeperEnsemble(Path(data) / "zookeeper", size=1) as zookeeper:
        run(systems, Path(data), zookeeper, args, results)
    print()
    print(f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS} for every broker; {args.rounds} rounds after a warm-up")
    print(report(results, systems))
    for line in replication.goals(results.figures, systems, SESSION_TIMEOUT_MS):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
