"""The parts of zookeeper_server that need no JVM: set-up errors and port allocation."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.cluster import zookeeper_server
from strom.cluster.zookeeper_server import ZooKeeperEnsemble, ZooKeeperError


def test_missing_java_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(ZooKeeperError, match=r"^no java on PATH: .*default-jre") as error:
        zookeeper_server.check_installation()
    assert "\n" not in str(error.value)


def test_missing_zookeeper_jar_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(zookeeper_server, "ZOOKEEPER_JAR", tmp_path / "zookeeper.jar")
    with pytest.raises(ZooKeeperError, match=r"zookeeper.jar is missing: install Debian's ZooKeeper"):
        ZooKeeperEnsemble(tmp_path).start()


def test_ensemble_ports_are_distinct_loopback_ports(tmp_path: Path) -> None:
    ensemble = ZooKeeperEnsemble(tmp_path, size=3)
    ports = [port for node in ensemble.nodes.values() for port in (node.client_port, node.quorum_port, node.election_port)]
    assert len(set(ports)) == 9
    assert ensemble.connect_string == ",".join(f"127.0.0.1:{node.client_port}" for node in ensemble.nodes.values())
    with pytest.raises(ValueError):
        ZooKeeperEnsemble(tmp_path, size=0)
