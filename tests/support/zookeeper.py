"""Real ZooKeeper for the tests (Debian's 3.8, through strom.cluster.zookeeper_server).

    from tests.support.zookeeper import zookeeper as zookeeper, zk_connect as zk_connect

``zookeeper``: one standalone server per test module (it starts in well under a second, but
a JVM per test would add up). ``zk_connect``: a connect string with a chroot of the test's
own (``127.0.0.1:port/t-<n>``), so tests sharing the server never see each other's znodes.
``zookeeper_ensemble``: a factory for N-node ensembles (3 for quorum tests), each stopped
when the test ends.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strom.cluster.zookeeper_server import ZooKeeperEnsemble

_chroots = itertools.count(1)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(tmp_path_factory.mktemp("zookeeper"), size=1) as server:
        yield server


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperEnsemble) -> str:
    return f"{zookeeper.connect_string}/t-{next(_chroots)}"


@pytest.fixture
def zookeeper_ensemble(tmp_path: Path) -> Iterator[Callable[[int], ZooKeeperEnsemble]]:
    started: list[ZooKeeperEnsemble] = []

    def start(size: int = 3) -> ZooKeeperEnsemble:
        ensemble = ZooKeeperEnsemble(tmp_path / f"ensemble{len(started)}", size=size)
        started.append(ensemble)
        return ensemble.start()

    yield start
    for ensemble in started:
        ensemble.stop()
