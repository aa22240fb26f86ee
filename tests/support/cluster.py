"""A real Strom cluster for tests: Debian's ZooKeeper and ``strom serve`` processes.

    cluster = StromCluster(tmp_path, zookeeper.connect_string + "/c1", brokers=3).start()
    cluster.wait_until(lambda: len(cluster.metadata().brokers) == 3)
    cluster.kill(cluster.controller_id())

Brokers are separate processes (``tests.support.broker_process.BrokerProcess``) with
consecutive node ids, listening on free loopback ports that survive restarts, and a
ZooKeeper session timeout short enough for failover tests to run in seconds. Everything a
test learns about the cluster it learns as a client would: over the wire (Metadata via
Strom's codec) or from ZooKeeper (kazoo), never from a broker's insides.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from strom.cluster.zk_client import KafkaZkClient
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from strom.protocol.messages.metadata_response import MetadataResponse
from tests.support.broker_process import BrokerProcess, raw_request

SESSION_TIMEOUT_MS = 6000  # brokers' zookeeper.session.timeout.ms here (Kafka's default is 18 s)
METADATA_VERSION = 12
T = TypeVar("T")


class StromCluster:
    def __init__(self, directory: Path, zookeeper_connect: str, brokers: int = 3,
                 overrides: dict[str, str] | None = None) -> None:
        self.directory = directory
        self.zookeeper_connect = zookeeper_connect
        settings = {
            "zookeeper.connect": zookeeper_connect,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "6",
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        self.brokers: dict[int, BrokerProcess] = {
            node_id: BrokerProcess(directory / f"broker-{node_id}", {**settings, "node.id": str(node_id)})
            for node_id in range(1, brokers + 1)
        }
        self._zk: KafkaZkClient | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> StromCluster:
        for broker in self.brokers.values():
            broker.data_dir.mkdir(parents=True, exist_ok=True)
            broker.start(timeout)
        self.wait_until(lambda: len(self.metadata().brokers) == len(self.brokers), timeout,
                        "every broker known to the cluster's metadata")
        return self

    def stop(self) -> None:
        for broker in self.brokers.values():
            if broker.alive():
                broker.stop(timeout=60)
        if self._zk is not None:
            self._zk.close()
            self._zk = None

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
