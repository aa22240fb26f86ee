"""The Spark tests' fixtures: a real local SparkSession (``spark``, from
tests/support/spark_session.py, one per test session) and a real Strom broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.spark_session import spark as spark  # the fixture, shared


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # The records carry 2023 timestamps (dates in the output paths), so time retention
    # (7 days) would delete them at the first retention pass once their segments roll:
    # a slow run (past log.retention.check.interval.ms) lost a topic that way.
    process = BrokerProcess(tmp_path_factory.mktemp("strom") / "data", {"log.retention.ms": "-1"}).start()
    yield process
    if process.alive():
        process.stop()
