"""Helpers of the Spark tests: unique topic names, topic set-up and records written with
Strom's own clients, and the data source's options for a broker."""

from __future__ import annotations

import subprocess
from itertools import count
from pathlib import Path
from typing import Any

from tests.support.broker_process import BrokerProcess

_names = count()

_CONNECTOR_FETCH = Path(__file__).resolve().parents[1] / "spark" / "kafka-connector" / "fetch"


def kafka_connector_jars() -> list[str]:
    """Spark's own Kafka connector and what it needs beyond PySpark's jars, from the cache
    ``tests/spark/kafka-connector/fetch`` fills (``scripts/test`` runs it). Empty when not
    fetched: the session still starts, and only ``format("kafka")`` fails, naming the source."""
    result = subprocess.run([str(_CONNECTOR_FETCH), "dir"], capture_output=True, text=True, check=True)
    directory = Path(result.stdout.strip())
    if not (directory / ".complete").is_file():
        return []
    return sorted(str(jar) for jar in directory.glob("*.jar"))


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
