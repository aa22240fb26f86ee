"""A real local SparkSession (one per test session: start-up takes seconds) and a real
Strom broker for the data-source and loader tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.support.broker_process import BrokerProcess
from tests.support.spark import kafka_connector_jars


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (SparkSession.builder.master("local[2]").appName("strom-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               # Spark's own Kafka connector (test_kafka_connector.py): jars are taken only
               # at start-up, and one JVM for all the Spark tests keeps the suite fast.
               .config("spark.jars", ",".join(kafka_connector_jars()))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    from strom.spark import register
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # The records carry 2023 timestamps (dates in the output paths), so time retention
    # (7 days) would delete them at the first retention pass once their segments roll:
    # a slow run (past log.retention.check.interval.ms) lost a topic that way.
    process = BrokerProcess(tmp_path_factory.mktemp("strom") / "data", {"log.retention.ms": "-1"}).start()
    yield process
    if process.alive():
        process.stop()
