"""Strom and Apache Kafka side by side: one of each per test session.

Both run with the shared reference settings (tools/kafka-reference/server.properties);
Strom gets those it knows (it refuses unknown names, and the replication factors of
internal topics mean nothing to a single node).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from strom.broker.config import PROPERTY_NAMES
from tests.support.broker_process import BrokerProcess
from tests.support.reference_broker import kafka4, kafka39, shared_settings

__all__ = ["kafka4", "kafka39", "strom_broker"]


@pytest.fixture(scope="session")
def strom_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = {name: value for name, value in shared_settings().items() if name in PROPERTY_NAMES}
    broker = BrokerProcess(tmp_path_factory.mktemp("strom") / "data", settings).start()
    yield broker
    if broker.alive():
        broker.stop()
