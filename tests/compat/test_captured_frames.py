"""Frames captured from real clients decode with Strom's codec.

librdkafka (through confluent-kafka) and kafka-python each talk to a socket recorder
(tests/compat/recorder.py) that answers as a one-broker cluster; every ApiVersions,
Metadata and Produce request they send must decode, and each Produce must carry a
record batch in the codec the producer was configured with, holding the sent value.
"""

from __future__ import annotations

import confluent_kafka
import kafka
import pytest

from strom.protocol.compression import CompressionType
from strom.protocol.messages import ApiVersionsRequest, MetadataRequest, ProduceRequest
from strom.protocol.records import decode_records, iter_batches
from tests.compat.recorder import PRODUCER_ID, Recorder, recording

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _produce_requests(recorder: Recorder, topic: str) -> list[ProduceRequest]:
    found = []
    for request in recorder.requests:
        body = request.body
        if isinstance(body, ProduceRequest) and any(t.name == topic for t in body.topic_data):
            found.append(body)
    return found


def _check_capture(recorder: Recorder, topic: str, codec: str, value: bytes) -> None:
    assert recorder.errors == []
    kinds = {type(r.body) for r in recorder.requests}
    assert {ApiVersionsRequest, MetadataRequest, ProduceRequest} <= kinds
    produced = _produce_requests(recorder, topic)
    assert produced, "the client sent no Produce request"
    values = []
    for body in produced:
        for topic_data in body.topic_data:
            for partition in topic_data.partition_data:
                records = partition.records
                assert records is not None
                for _, header in iter_batches(records):
                    assert header.magic == 2
                    assert header.compression == CompressionType[codec.upper()]
                values += [bytes(r.value) for r in decode_records(records) if r.value is not None]
    assert value in values


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_frames(codec: str) -> None:
    with recording() as recorder:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": recorder.bootstrap,
                "compression.type": codec,
                "linger.ms": 0,
                "message.timeout.ms": 10000,
            }
        )
        value = f"hello from librdkafka, {codec}".encode() * 200
        producer.produce("captured", value=value, key=b"k")
        assert producer.flush(15) == 0
        _check_capture(recorder, "captured", codec, value)
        versions = {r.api_version for r in recorder.requests if isinstance(r.body, ProduceRequest)}
        assert max(versions) >= 7  # a modern client negotiates a flexible-era Produce


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_frames(codec: str) -> None:
    with recording() as recorder:
        producer = kafka.KafkaProducer(
            bootstrap_servers=recorder.bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=0,
            request_timeout_ms=10000,
        )
        value = f"hello from kafka-python, {codec}".encode() * 200
        producer.send("captured", value=value, key=b"k").get(timeout=15)
        producer.flush(15)
        producer.close(5)
        _check_capture(recorder, "captured", codec, value)
        # kafka-python is idempotent by default: its batches carry the id it was given.
        batches = [
            header
            for body in _produce_requests(recorder, "captured")
            for topic in body.topic_data
            for partition in topic.partition_data
            for _, header in iter_batches(partition.records or b"")
        ]
        assert batches and all(h.producer_id == PRODUCER_ID for h in batches)
