"""The same scenarios with every real client (issue 6): aiokafka, kafka-python, kafkajs, kcat.

Scenarios: (1) create topics, (2) produce with every codec and with idempotence, (3) consume
with a group and commit, (4) restart the broker and resume from the committed offset,
(5) two consumers in one group rebalance and together see every record once, (6) seek and
offsets-for-times, (7) headers and null keys/values, (8) a 5 MiB message with raised
limits, (9) delete a topic. confluent-kafka (librdkafka) runs them all in test_clients.py
and test_groups.py; the test_matrix_*.py files (one per client) fill in the other
clients, skipping cells another file already proves (kafka-python create topics:
test_admin.py; its group commit and resume: test_groups.py; kafkajs create, gzip, group
commit: test_kafkajs.py; kcat gzip produce, seek by offset: test_kcat.py). kcat's offsets-for-times is ``-o s@<ms>``, which librdkafka
answers with ListOffsets by timestamp.

Cells no client call can express:
- kcat, create and delete topics: kcat has no admin mode (-L only lists metadata).
- kafkajs, snappy/lz4/zstd: kafkajs ships only gzip; the others need codec packages
  (kafkajs-snappy, kafkajs-lz4, @kafkajs/zstd) that are not installed.
- kafka-python, a null header value: its producer refuses one (TypeError: headers must be
  (str, bytes) tuples); aiokafka and librdkafka send and read them.
"""


from __future__ import annotations

import hashlib
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess

GROUP_MS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}
FIVE_MIB = 5 * 1024 * 1024
SIX_MIB = 6 * 1024 * 1024
BASE_TIME = 1_700_000_000_000
JS = Path(__file__).parent / "js"


def _create(broker: BrokerProcess, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(15)


def _produce(broker: BrokerProcess, topic: str, values: list[str], partitions: int = 1) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for index, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=index % partitions)
    assert producer.flush(15) == 0


def _big_value() -> bytes:
    return b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(FIVE_MIB // 32))


def _read_all(broker: BrokerProcess, topic: str, partitions: int) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record as (partition, offset, key, value), read with librdkafka up to the high watermark."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "reader", "enable.partition.eof": True}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
    records: list[tuple[int, int, bytes | None, bytes | None]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 20
    while len(at_end) < partitions and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            assert message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, message.error()
            at_end.add(message.partition())
            continue
        records.append((message.partition(), message.offset(), message.key(), message.value()))
    consumer.close()
    assert len(at_end) == partitions
    return records


# --- aiokafka ---------------------------------------------------------------------------
