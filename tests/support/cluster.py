"""A real Strom cluster for tests: Debian's ZooKeeper and ``strom serve`` processes.

    cluster = StromCluster(tmp_path, zookeeper.connect_string + "/c1", brokers=3).start()
    cluster.wait_until(lambda: len(cluster.metadata().brokers) == 3)
    cluster.kill(cluster.controller_id())

Brokers are separate processes (``tests.support.broker_process.BrokerProcess``) with
consecutive node ids, listening on free loopback ports that survive restarts, and a
ZooKeeper session timeout short enough for failover tests to run in seconds. Everything a
test learns about the cluster it learns as a client would: over the wire (Metadata via
Strom's codec) or from ZooKeeper (kazoo), never from a broker's insides.

``proxied=True`` puts every broker-to-broker and broker-to-ZooKeeper link behind a TCP
proxy of its own (``tests.support.netproxy``), so a test can cut any link while every
process stays on 127.0.0.1 (issue 18, "fault injection that stays on loopback"):

- each broker B listens on ``CLIENT`` (clients and the bootstrap, never proxied) and, for
  every broker P (itself included), on ``FROM_P``, advertised at the port of the proxy
  ``link(P, B)`` that forwards to it; broker P sets ``inter.broker.listener.name=FROM_P``,
  so whatever P sends B (fetches, controller requests, AlterPartition) crosses ``link(P, B)``;
- each broker's ``zookeeper.connect`` names its own proxy in front of each ZooKeeper
  server (``zk_links(B)``);
- ``cut``/``heal`` a link between two brokers (black hole or drop, one or both ways),
  ``cut_zookeeper``/``heal_zookeeper`` one broker's ZooKeeper links, ``isolate``/``rejoin`` a
  broker from every other broker and ZooKeeper (clients still reach it). The proxies and
  every listener port live as long as the cluster, across broker restarts.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

from strom.cluster.zk_client import KafkaZkClient
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from strom.protocol.messages.metadata_response import MetadataResponse
from tests.support.broker_process import BrokerProcess, raw_request
from tests.support.netproxy import BOTH, DOWNSTREAM, UPSTREAM, TcpProxy, reserved_ports

SESSION_TIMEOUT_MS = 6000  # brokers' zookeeper.session.timeout.ms here (Kafka's default is 18 s)
METADATA_VERSION = 12
T = TypeVar("T")
CutMode = Literal["black_hole", "drop"]


class StromCluster:
    def __init__(self, directory: Path, zookeeper_connect: str, brokers: int = 3,
                 overrides: dict[str, str] | None = None, *, proxied: bool = False) -> None:
        self.directory = directory
        self.zookeeper_connect = zookeeper_connect
        settings = {
            "zookeeper.connect": zookeeper_connect,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "6",
            "group.initial.rebalance.delay.ms": "0",
            # The last broker of a stopping cluster has nobody to hand its leaderships to and
            # retries, as Kafka does: 3 x 500 ms here rather than Kafka's 3 x 5 s per stop.
            "controlled.shutdown.retry.backoff.ms": "500",
            **(overrides or {}),
        }
        self.brokers: dict[int, BrokerProcess] = {
            node_id: BrokerProcess(directory / f"broker-{node_id}", {**settings, "node.id": str(node_id)})
            for node_id in range(1, brokers + 1)
        }
        self._zk: KafkaZkClient | None = None
        self._links: dict[tuple[int, int], TcpProxy] = {}  # (from, to): what ``from`` sends ``to`` crosses it
        self._zk_links: dict[int, list[TcpProxy]] = {}  # broker -> one proxy per ZooKeeper server
        if proxied:
            self._put_behind_proxies()

    # -- proxied links ----------------------------------------------------------------------
    def _put_behind_proxies(self) -> None:
        ids = list(self.brokers)
        servers, slash, chroot = self.zookeeper_connect.partition("/")
        names = ["CLIENT", *(f"FROM_{p}" for p in ids)]
        with reserved_ports(len(ids) * len(names)) as reserved:  # the proxies' own ports cannot be among them
            chosen = iter(reserved)
            ports = {b: {name: next(chosen) for name in names} for b in ids}
            for b in ids:
                for p in ids:
                    self._links[(p, b)] = TcpProxy(0, "127.0.0.1", ports[b][f"FROM_{p}"], name=f"link-{p}-to-{b}")
                self._zk_links[b] = [
                    TcpProxy(0, host, int(port), name=f"zk-link-{b}-to-{host}:{port}")
                    for host, _, port in (server.strip().rpartition(":") for server in servers.split(","))]
        for b, broker in self.brokers.items():
            broker.fixed_listeners = ",".join(f"{name}://127.0.0.1:{ports[b][name]}" for name in names)
            advertised = {"CLIENT": ports[b]["CLIENT"], **{f"FROM_{p}": self._links[(p, b)].port for p in ids}}
            broker.overrides.update({
                "advertised.listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in advertised.items()),
                "listener.security.protocol.map": ",".join(f"{name}:PLAINTEXT" for name in names),
                "inter.broker.listener.name": f"FROM_{b}",
                "zookeeper.connect": ",".join(f"127.0.0.1:{proxy.port}" for proxy in self._zk_links[b]) + slash + chroot,
            })

    def link(self, source: int, target: int) -> TcpProxy:
        """The proxy every connection ``source`` opens to ``target`` crosses."""
        return self._links[(source, target)]

    def zk_links(self, broker: int) -> list[TcpProxy]:
        """``broker``'s proxies to the ZooKeeper servers, in ``zookeeper.connect``'s order."""
        return self._zk_links[broker]

    def cut(self, source: int, target: int, mode: CutMode = "black_hole", both_ways: bool = True) -> None:
        """Cut the link between two brokers: every byte both ways, or only those ``source`` sends
        ``target`` (on its own connections and as answers on ``target``'s). A one-way drop resets
        the connections ``source`` opens to ``target`` (a reset is never one-way)."""
        for proxy, direction in self._directions(source, target, both_ways):
            if mode == "drop":
                if direction in (UPSTREAM, BOTH):
                    proxy.drop()
            else:
                proxy.black_hole(direction)

    def heal(self, source: int, target: int, both_ways: bool = True) -> None:
        """Undo ``cut`` with the same arguments: held bytes flow on, in order."""
        for proxy, direction in self._directions(source, target, both_ways):
            proxy.pass_through(BOTH if proxy.mode(UPSTREAM) == "drop" else direction)

    def _directions(self, source: int, target: int, both_ways: bool) -> list[tuple[TcpProxy, Literal["upstream", "downstream", "both"]]]:
        if source == target:
            raise ValueError("a broker's link to itself is not cut")
        if both_ways:
            return [(self.link(source, target), BOTH), (self.link(target, source), BOTH)]
        return [(self.link(source, target), UPSTREAM), (self.link(target, source), DOWNSTREAM)]

    def cut_zookeeper(self, broker: int, mode: CutMode = "black_hole") -> None:
        """Cut ``broker`` from every ZooKeeper server, both ways."""
        for proxy in self._zk_links[broker]:
            proxy.drop() if mode == "drop" else proxy.black_hole()

    def heal_zookeeper(self, broker: int) -> None:
        for proxy in self._zk_links[broker]:
            proxy.pass_through()

    def isolate(self, broker: int, mode: CutMode = "black_hole") -> None:
        """Cut ``broker`` from every other broker and from ZooKeeper; clients still reach it."""
        for other in self.brokers:
            if other != broker:
                self.cut(broker, other, mode)
        self.cut_zookeeper(broker, mode)

    def rejoin(self, broker: int) -> None:
        """Undo ``isolate``."""
        for other in self.brokers:
            if other != broker:
                self.heal(broker, other)
        self.heal_zookeeper(broker)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> StromCluster:
        for broker in self.brokers.values():
            broker.data_dir.mkdir(parents=True, exist_ok=True)
            broker.start(timeout)
        self.wait_until(lambda: len(self.metadata().brokers) == len(self.brokers), timeout,
                        "every broker known to the cluster's metadata")
        return self

    def stop(self) -> None:
        proxies = [*self._links.values(), *(p for proxies in self._zk_links.values() for p in proxies)]
        for proxy in proxies:  # a test that failed mid-cut: brokers still stop cleanly (controlled shutdown)
            proxy.pass_through()
        hung: list[int] = []
        for node_id, broker in self.brokers.items():
            if broker.alive():
                try:
                    broker.stop(timeout=60)
                except subprocess.TimeoutExpired:  # stop the others anyway, then say so
                    hung.append(node_id)
                    broker.kill()
        if self._zk is not None:
            self._zk.close()
            self._zk = None
        for proxy in proxies:
            proxy.close()
        self._links.clear()
        self._zk_links.clear()
        if hung:
            raise AssertionError(f"brokers {hung} did not stop within 60 s of SIGTERM (killed); see their logs")

    def __enter__(self) -> StromCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def kill(self, node_id: int) -> None:
        self.brokers[node_id].kill()

    def terminate(self, node_id: int) -> int:
        """SIGTERM (a controlled shutdown); the exit code."""
        return self.brokers[node_id].stop(signal.SIGTERM, timeout=60)

    def pause(self, node_id: int) -> None:
        process = self.brokers[node_id].process
        assert process is not None
        process.send_signal(signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        process = self.brokers[node_id].process
        assert process is not None
        process.send_signal(signal.SIGCONT)

    def restart(self, node_id: int, timeout: float = 60.0) -> None:
        """Start a stopped or killed broker again on its port and data."""
        broker = self.brokers[node_id]
        if broker.alive():
            broker.stop(timeout=60)
        broker.start(timeout)

    # -- what a client sees ---------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.alive())

    def live(self) -> list[int]:
        return [node_id for node_id, broker in self.brokers.items() if broker.alive()]

    def metadata(self, topics: list[str] | None = None, via: int | None = None) -> MetadataResponse:
        """Metadata (v12) from broker ``via`` (default: the first live one)."""
        broker = self.brokers[via if via is not None else self.live()[0]]
        request = MetadataRequest(
            topics=None if topics is None else tuple(MetadataRequestTopic(name=t) for t in topics),
            allow_auto_topic_creation=False)
        frame = encode_request(request, METADATA_VERSION, correlation_id=1, client_id="cluster-test")
        answer = raw_request(broker, frame)
        assert answer is not None, f"broker {via} closed the connection on Metadata"
        _, response = decode_response(answer, MetadataRequest.API_KEY, METADATA_VERSION)
        assert isinstance(response, MetadataResponse)
        return response

    def leaders(self, topic: str, via: int | None = None) -> dict[int, int]:
        """Partition -> leader id (-1: none) as broker ``via`` reports them."""
        response = self.metadata([topic], via)
        (found,) = response.topics
        return {p.partition_index: p.leader_id for p in found.partitions}

    def find_coordinator(self, group: str, via: int | None = None) -> int:
        """The group's coordinator as broker ``via`` names it (FindCoordinator v3); -1 if none."""
        broker = self.brokers[via if via is not None else self.live()[0]]
        frame = encode_request(FindCoordinatorRequest(key=group, key_type=0), 3, correlation_id=2,
                               client_id="cluster-test")
        answer = raw_request(broker, frame)
        assert answer is not None
        _, response = decode_response(answer, FindCoordinatorRequest.API_KEY, 3)
        assert isinstance(response, FindCoordinatorResponse)
        return response.node_id if response.error_code == 0 else -1

    @property
    def zk(self) -> KafkaZkClient:
        """A ZooKeeper session of the test's own (reads: who is controller, partition states)."""
        if self._zk is None:
            self._zk = KafkaZkClient(self.zookeeper_connect)
            self._zk.connect()
        return self._zk

    def controller_id(self) -> int:
        self.zk.sync()
        controller = self.zk.get_controller_id()
        return -1 if controller is None else controller

    def controller_epoch(self) -> int:
        self.zk.sync()
        epoch = self.zk.get_controller_epoch()
        return -1 if epoch is None else epoch[0]

    @staticmethod
    def wait_until(condition: Callable[[], T], timeout: float = 60.0, what: str = "the condition") -> T:
        """Poll ``condition`` (errors count as not yet) until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                value = condition()
            except Exception as exc:  # a broker restarting, a connection refused: not yet
                last = exc
            else:
                if value:
                    return value
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last error: {last!r})")
