"""The synchronous facade: the same clients driven from plain threads."""

from __future__ import annotations

import threading
import time

import pytest

from strom.client.errors import KafkaError
from strom.client.sync import Consumer, Producer
from tests.support.clients import Kafka, create_topic


def test_sync_producer_and_consumer_round_trip(kafka: Kafka) -> None:
    topic = kafka.topic("sync")
    create_topic(kafka, topic, 2)
    delivered: list[int] = []
    lock = threading.Lock()

    def on_delivery(metadata: object, error: BaseException | None) -> None:
        assert error is None
        with lock:
            delivered.append(1)

    with Producer({"bootstrap.servers": kafka.bootstrap}) as producer:
        for i in range(20_000):
            producer.send(topic, f"{i}".encode(), partition=i % 2, callback=on_delivery)
        producer.flush()
        assert len(delivered) == 20_000
        last = producer.send_and_wait(topic, b"last", partition=0)
        assert last.offset == 10_000

    with Consumer({"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(topic, 0), (topic, 1)])
        values: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while len(values) < 20_001 and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(500)]
        assert sorted(int(v or b"-1") for v in values if v != b"last") == list(range(20_000))
        assert consumer.position((topic, 0)) == 10_001
        batch = consumer.poll_arrow(200)
        assert batch.num_rows == 0
        consumer.seek((topic, 1), 9_990)
        assert [r.offset for r in consumer.poll(2000)] == list(range(9_990, 10_000))


def test_sync_producer_reports_errors_on_flush(kafka: Kafka) -> None:
    with Producer({"bootstrap.servers": kafka.bootstrap, "allow.auto.create.topics": False,
                   "max.block.ms": 500}) as producer:
        producer.send("no-such-topic-" + kafka.topic(), b"x")
        with pytest.raises(KafkaError, match="no-such-topic"):
            producer.flush()
        producer.flush()  # the error was reported once
