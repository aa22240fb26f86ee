"""Every client test runs twice: against Strom's broker and against Tansu, an independent
Kafka implementation in Rust, so a bug Strom's clients share with Strom's broker shows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.clients import Kafka
from tests.support.tansu import TansuProcess


@pytest.fixture(scope="module", params=["strom", "tansu"])
def kafka(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    directory: Path = tmp_path_factory.mktemp(request.param)
    if request.param == "strom":
        broker = BrokerProcess(directory / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
        try:
            yield Kafka("strom", broker.bootstrap, broker)
        finally:
            if broker.alive():
                broker.stop()
    else:
        tansu = TansuProcess(directory / "tansu.log").start()
        try:
            yield Kafka("tansu", tansu.bootstrap)
        finally:
            tansu.stop()


@pytest.fixture
def strom_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A Strom broker of the test's own, for tests that restart it."""
    broker = BrokerProcess(tmp_path / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
    yield broker
    if broker.alive():
        broker.stop()
