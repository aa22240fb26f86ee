"""Strom and Apache Kafka side by side: one of each per test session.

Both run with the shared reference settings (tools/kafka-reference/server.properties);
Strom gets those it knows (it refuses unknown names, and the replication factors of
internal topics mean nothing to a single node).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from strom.broker.config import PROPERTY_NAMES
from tests.differential.wire import PAIRS_COMPARED, Pair, make_side
from tests.support.broker_process import BrokerProcess
from tests.support.reference_broker import ReferenceBroker, kafka4, kafka39, shared_settings

__all__ = ["kafka4", "kafka39", "pair", "strom_broker"]


@pytest.fixture(scope="session")
def strom_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = {name: value for name, value in shared_settings().items() if name in PROPERTY_NAMES}
    broker = BrokerProcess(tmp_path_factory.mktemp("strom") / "data", settings).start()
    yield broker
    if broker.alive():
        broker.stop()


@pytest.fixture(scope="module")
def pair(strom_broker: BrokerProcess, kafka39: ReferenceBroker) -> Iterator[Pair]:
    """A connection to each broker, shared by a module's tests."""
    both = Pair(make_side(strom_broker.bootstrap), make_side(kafka39.bootstrap))
    yield both
    both.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if PAIRS_COMPARED[0]:
        terminalreporter.write_line(f"differential: {PAIRS_COMPARED[0]} request/response pairs sent to Strom and Kafka 3.9")
