"""What the client tests share: the Kafka they run against (Strom or Tansu) and topic set-up
done with librdkafka, an independent client, so a bug in Strom's own admin cannot hide."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count

from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess

_names = count()


@dataclass
class Kafka:
    kind: str  # "strom" or "tansu"
    bootstrap: str
    strom: BrokerProcess | None = None  # for restarts; None for Tansu

    def topic(self, prefix: str = "t") -> str:
        """A topic name no other test in the session uses."""
        return f"{prefix}-{next(_names)}"


def create_topic(kafka: Kafka, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
