"""Filling a topic fast for a benchmark's setup: confluent-kafka with large batches.

Setup is not what the benchmarks measure, so it uses the fastest producer at hand.
"""

from __future__ import annotations

from collections.abc import Callable

import confluent_kafka


def fill_topic(bootstrap: str, topic: str, records: int, *, value: Callable[[int], bytes],
               key: Callable[[int], bytes | None], partition: Callable[[int], int]) -> None:
    """Produce record ``i`` = (``key(i)``, ``value(i)``) to ``partition(i)``, for every i < ``records``."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                                         "batch.size": 262144, "queue.buffering.max.messages": 500000})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value(i), key(i), partition=partition(i))
                break
            except BufferError:
                producer.poll(0.01)
        if i % 50000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"filling {topic}: records left undelivered after 120 s")
