"""``strom dev-cluster`` as a user runs it: ZooKeeper and brokers up, a bootstrap line, a clean Ctrl-C."""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from strom.protocol.messages.metadata_request import MetadataRequest
from strom.protocol.messages.metadata_response import MetadataResponse
from tests.support.broker_process import BrokerProcess, raw_request

pytestmark = pytest.mark.zookeeper


def _two_free_ports_below_the_ephemeral_range() -> int:
    """A base port with base and base + 1 free, below Linux's ephemeral range (32768+): the
    ports ZooKeeper and the kernel hand out (bind to port 0) come from that range, often
    next to each other, so a base taken from it can see base + 1 taken a moment later."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32000)
        try:
            with socket.create_server(("127.0.0.1", base)), socket.create_server(("127.0.0.1", base + 1)):
                return base
        except OSError:
            continue
    raise AssertionError("no two consecutive free ports in 20000-32000")


def test_dev_cluster_starts_serves_and_stops_cleanly(tmp_path: Path) -> None:
    base = _two_free_ports_below_the_ephemeral_range()
    command = [sys.executable, "-m", "strom", "dev-cluster", "--brokers", "2", "--data-dir", str(tmp_path),
               "--base-port", str(base)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        bootstrap = ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not bootstrap:
            line = process.stdout.readline()
            if line.startswith("bootstrap.servers="):
                bootstrap = line.strip().split("=", 1)[1]
            elif not line and process.poll() is not None:
                break
        assert bootstrap == f"127.0.0.1:{base},127.0.0.1:{base + 1}", process.stderr.read() if process.stderr else ""
        probe = BrokerProcess(tmp_path / "unused")
        probe.bootstrap = f"127.0.0.1:{base + 1}"
        frame = encode_request(MetadataRequest(topics=None), 12, correlation_id=1, client_id="dev-cluster-test")
        deadline = time.monotonic() + 60
        brokers: list[int] = []
        while time.monotonic() < deadline and len(brokers) < 2:
            answer = raw_request(probe, frame)
            assert answer is not None
            _, response = decode_response(answer, MetadataRequest.API_KEY, 12)
            assert isinstance(response, MetadataResponse)
            brokers = sorted(b.node_id for b in response.brokers)
            time.sleep(0.1)
        assert brokers == [1, 2]
        # The offsets topic can be created with two brokers (its factor follows the cluster's
        # size up to Kafka's 3): a group finds its coordinator.
        find = encode_request(FindCoordinatorRequest(key="g", key_type=0), 3, correlation_id=2, client_id="dev")
        coordinator = -1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and coordinator < 0:
            answer = raw_request(probe, find)
            assert answer is not None
            _, found = decode_response(answer, FindCoordinatorRequest.API_KEY, 3)
            assert isinstance(found, FindCoordinatorResponse)
            coordinator = found.node_id if found.error_code == 0 else -1
            time.sleep(0.1)
        assert coordinator in (1, 2)
        process.send_signal(signal.SIGINT)
        assert process.wait(120) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    for node_id in (1, 2):
        log = (tmp_path / f"broker-{node_id}.log").read_text()
        assert "stopped cleanly" in log
    java = subprocess.run(["pgrep", "-f", str(tmp_path / "zookeeper")], capture_output=True, text=True)
    assert java.stdout.strip() == ""  # ZooKeeper stopped too
