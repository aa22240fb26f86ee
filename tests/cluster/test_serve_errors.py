"""``strom serve`` in cluster mode refuses what it cannot do with one clear line and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from tests.support.broker_process import BrokerProcess
from tests.support.zookeeper import zookeeper as zookeeper


def _serve(data_dir: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "strom", "serve", "--data-dir", str(data_dir),
               "--listeners", "PLAINTEXT://127.0.0.1:0", "--log-level", "error"]
    for override in overrides:
        command += ["--override", override]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_an_unreachable_zookeeper_is_one_line_and_exit_1(tmp_path: Path) -> None:
    result = _serve(tmp_path / "data", "zookeeper.connect=127.0.0.1:1/strom", "zookeeper.connection.timeout.ms=2000")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "strom serve: cannot reach ZooKeeper at 127.0.0.1:1/strom: could not connect to ZooKeeper at "
        "127.0.0.1:1/strom within 2 s (zookeeper.connection.timeout.ms)"]


def test_a_data_directory_of_another_cluster_is_refused(tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> None:
    data_dir = tmp_path / "data"
    first = BrokerProcess(data_dir, {"zookeeper.connect": f"{zookeeper.connect_string}/first", "node.id": "1"})
    data_dir.mkdir()
    first.start()
    first.stop()
    result = _serve(data_dir, f"zookeeper.connect={zookeeper.connect_string}/second", "node.id=1")
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"strom serve: the data directory {data_dir} belongs to cluster ")
    assert line.endswith("wrong zookeeper.connect?")


def test_a_listener_port_in_use_is_one_line_and_exit_1(tmp_path: Path) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "strom", "serve", "--data-dir", str(tmp_path / "data"),
                   "--listeners", f"PLAINTEXT://127.0.0.1:{port}", "--log-level", "error"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"strom serve: cannot listen on 127.0.0.1:{port}: Address already in use")
