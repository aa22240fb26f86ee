"""Strom's partitioner places keys where librdkafka's ``murmur2_random`` (the Java
client's rule) does: records produced through a real broker by confluent-kafka, each
key's partition read from the delivery reports, compared with ours."""

from __future__ import annotations

import random

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from strom.client.partitioner import DefaultPartitioner, murmur2
from tests.support.broker_process import BrokerProcess

PARTITIONS = 7
TIMEOUT = 30


def _keys(count: int) -> list[bytes]:
    rng = random.Random(480)
    keys = [b"21", b"foobar", b"abc", b"a-little-bit-long-string"]
    keys += [f"user-{i}".encode() for i in range(100)]
    while len(keys) < count:  # every tail length and word count, binary bytes included
        keys.append(rng.randbytes(rng.randint(1, 64)))
    return keys


def test_keys_land_where_librdkafka_murmur2_puts_them(broker: BrokerProcess) -> None:
    topic = "placement"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT)
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap,
        "partitioner": "murmur2_random",
        "linger.ms": 5,
    })
    placed: dict[bytes, int] = {}
    errors: list[object] = []

    def on_delivery(error: object, message: confluent_kafka.Message) -> None:
        if error is not None:
            errors.append(error)
            return
        key, offset, partition = message.key(), message.offset(), message.partition()
        assert isinstance(key, bytes) and offset is not None and partition is not None
        assert offset >= 0
        placed[key] = partition

    keys = _keys(500)
    for key in keys:
        producer.produce(topic, key=key, value=b"v", on_delivery=on_delivery)
    assert producer.flush(TIMEOUT) == 0
    assert errors == []
    assert len(placed) == len(set(keys))
    assert len(set(placed.values())) == PARTITIONS  # the keys really spread out

    partitioner = DefaultPartitioner()
    mismatches = {
        key: (partition, partitioner.partition(topic, key, PARTITIONS))
        for key, partition in placed.items()
        if partitioner.partition(topic, key, PARTITIONS) != partition
    }
    assert mismatches == {}
    # The Java vector's partition, spelled out: toPositive(-973932308) % 7.
    assert placed[b"21"] == (murmur2(b"21") & 0x7FFFFFFF) % PARTITIONS == 1173551340 % 7
