"""The ``spark`` fixture: one real local SparkSession for the whole test session (start-up
takes seconds), shared by tests/spark and any other test that reads with Spark (a test
module imports the fixture from here: tests never import a conftest)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.support.spark import kafka_connector_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # getOrCreate: modules that import this fixture share one JVM and one session.
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
