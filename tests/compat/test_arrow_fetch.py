"""records_to_arrow on what a real broker returns: confluent-kafka produces, Strom's codec
fetches the raw record bytes, and the Arrow batch must equal what confluent-kafka consumed."""

from __future__ import annotations

import random
from typing import Any

import confluent_kafka
import pyarrow as pa
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from strom.client.arrow import records_to_arrow
from strom.protocol.compression import CompressionType
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from strom.protocol.messages.fetch_response import FetchResponse
from strom.protocol.records import iter_batches
from tests.support.broker_process import BrokerProcess, raw_request

TOPIC = "arrow"
VERSION = 12
Row = tuple[Any, ...]


def _produce(broker: BrokerProcess, codec: str, count: int, rng: random.Random) -> None:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 20,
        "batch.size": 16384,
    })
    for index in range(count):
        key = None if index % 5 == 0 else f"key-{index}".encode()
        # Compressible values: librdkafka sends a batch uncompressed when that is smaller.
        value = None if index % 97 == 0 else b"%d-" % index * rng.randint(0, 40)
        headers: list[tuple[str, str | bytes | None]] | None = (
            [("h", f"{index}".encode()), ("n", None)] if index % 3 == 0 else None
        )
        producer.produce(TOPIC, value=value, key=key, headers=headers, partition=0)
        if index % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _consumed(broker: BrokerProcess, count: int) -> list[Row]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "arrow-check",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    rows: list[Row] = []
    try:
        for _ in range(200):
            for message in consumer.consume(num_messages=1000, timeout=1.0):
                assert message.error() is None
                kind, timestamp = message.timestamp()
                headers = [(k, v) for k, v in message.headers() or []]  # type: ignore[str-unpack]
                spark_kind = {confluent_kafka.TIMESTAMP_CREATE_TIME: 0,
                              confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: 1}[kind]
                rows.append((message.key(), message.value(), message.offset(), timestamp,
                             spark_kind, headers))
            if len(rows) >= count:
                return rows
    finally:
        consumer.close()
    raise AssertionError(f"confluent-kafka consumed {len(rows)} of {count} records")


def _fetch(broker: BrokerProcess, offset: int) -> memoryview:
    request = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
        topics=(FetchTopic(TOPIC, partitions=(
            # A small limit: answers end in a partial batch, as fetches often do.
            FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=50_000),
        )),),
    )
    answer = raw_request(broker, encode_request(request, VERSION, 1, "arrow-test"))
    assert answer is not None
    _, response = decode_response(answer, 1, VERSION)
    assert isinstance(response, FetchResponse)
    partition = response.responses[0].partitions[0]
    assert partition.error_code == 0 and isinstance(partition.records, memoryview)
    return partition.records


def _rows(batch: pa.RecordBatch) -> list[Row]:
    columns = batch.to_pydict()
    assert set(columns["topic"]) == {TOPIC} and set(columns["partition"]) == {0}
    millis = [value // 1000 for value in batch.column("timestamp").cast(pa.int64()).to_pylist()]
    headers = [[(h["key"], h["value"]) for h in hs] for hs in columns["headers"]]
    return list(zip(columns["key"], columns["value"], columns["offset"], millis,
                    columns["timestampType"], headers, strict=True))


def test_fetched_lz4_and_zstd_batches_decode_as_confluent_kafka_consumes_them(
    broker: BrokerProcess,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
    rng = random.Random(7)
    _produce(broker, "lz4", 2500, rng)
    _produce(broker, "zstd", 2500, rng)
    expected = _consumed(broker, 5000)

    decoded: list[Row] = []
    offset = 0
    partial_tails = 0
    codecs: set[CompressionType] = set()
    while offset < 5000:
        records = _fetch(broker, offset)
        batch = records_to_arrow(TOPIC, 0, records, start_offset=offset, include_headers=True)
        assert batch.num_rows > 0
        decoded += _rows(batch)
        offset = decoded[-1][2] + 1
        batch_codecs, partial = _layout(records)
        codecs |= batch_codecs
        partial_tails += partial
    assert decoded == expected
    assert {CompressionType.LZ4, CompressionType.ZSTD} <= codecs
    assert partial_tails > 0  # the truncated-tail path was exercised

    # A fetch from the middle of a batch starts at the fetch offset, not the batch's base.
    middle = records_to_arrow(TOPIC, 0, _fetch(broker, 1234), start_offset=1234,
                              include_headers=True)
    assert _rows(middle) == expected[1234 : 1234 + middle.num_rows]


def _layout(records: memoryview) -> tuple[set[CompressionType], bool]:
    """The codecs of the fetched batches, and whether a partial batch ends the answer."""
    end = 0
    codecs = set()
    for pos, header in iter_batches(records):
        codecs.add(header.compression)
        end = pos + header.size
    return codecs, end < len(records)
