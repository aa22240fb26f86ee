"""A real local SparkSession (one per test session: start-up takes seconds) and a real
Strom broker for the data-source and loader tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from itertools import count
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.compat.broker_process import BrokerProcess

_names = count()


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
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    from strom.spark import register
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("strom") / "data").start()
    yield process
    if process.alive():
        process.stop()


def topic_name(prefix: str = "spark") -> str:
    return f"{prefix}-{next(_names)}"


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    from strom.client import Admin
    from strom.client.admin_types import NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, configs=configs or {})])


def produce(bootstrap: str, records: list[dict[str, Any]]) -> None:
    """Records as dicts of ``send`` arguments (topic, value, key, partition, headers, timestamp_ms)."""
    from strom.client import Producer

    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for r in records:
            producer.send(**r)
        producer.flush()


def options(broker: BrokerProcess, **extra: object) -> dict[str, str]:
    return {"kafka.bootstrap.servers": broker.bootstrap, **{k: str(v) for k, v in extra.items()}}
