"""Spark's own Kafka connector (``spark-sql-kafka-0-10``, ``format("kafka")``) against a real
Strom broker, unchanged: what users who already run Spark on Kafka would point at Strom.

Records go in and come out through a second, independent client (confluent-kafka, i.e.
librdkafka) so that neither side is checked only against Strom's own clients. The jars come
from ``tests/spark/kafka-connector/fetch`` and sit on the shared session's ``spark.jars``."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tests.support.broker_process import BrokerProcess
from tests.support.spark import create_topic, kafka_connector_jars, topic_name

BASE_TS = 1_700_000_000_000
TIMEOUT_S = 60.0

# (partition, offset, key, value, timestamp ms, timestamp type, headers)
Row = tuple[int, int, bytes | None, bytes | None, int, int, list[tuple[str, bytes | None]]]


@pytest.fixture(autouse=True)
def _connector_present() -> None:
    if not kafka_connector_jars():
        pytest.fail("Spark's Kafka connector is not fetched: run tests/spark/kafka-connector/fetch")


def _produce(bootstrap: str, topic: str, partitions: int, per_partition: int, first: int = 0) -> list[Row]:
    """Produces with confluent-kafka and returns what each record should read back as, offsets
    from the delivery reports: null keys and values, empty and null-valued headers included."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    delivered: list[Row] = []
    errors: list[object] = []

    def report(err: object, msg: Any, timestamp: int, headers: list[tuple[str, bytes | None]]) -> None:
        if err is not None:
            errors.append(err)
            return
        delivered.append((msg.partition(), msg.offset(), msg.key(), msg.value(), timestamp, 0, headers))

    for p in range(partitions):
        for i in range(first, first + per_partition):
            key = None if i % 7 == 3 else f"k{p}-{i}".encode()
            value = None if i % 11 == 5 else f"v{p}-{i}".encode() * (1 + i % 3)
            headers: list[tuple[str, bytes | None]] = [("h", f"{i}".encode()), ("n", None)] if i % 2 else []
            sent: list[tuple[str, str | bytes | None]] = list(headers)
            producer.produce(topic, value=value, key=key, partition=p, headers=sent or None,
                             timestamp=BASE_TS + i,
                             on_delivery=partial(report, timestamp=BASE_TS + i, headers=headers))
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []
    return sorted(delivered, key=lambda r: (r[0], r[1]))


def _rows(df: DataFrame) -> list[Row]:
    collected = df.select("partition", "offset", "key", "value", F.unix_millis("timestamp").alias("ts"),
                          "timestampType", "headers").collect()
    return sorted(((r.partition, r.offset, None if r.key is None else bytes(r.key),
                    None if r.value is None else bytes(r.value), r.ts, r.timestampType,
                    [(h.key, None if h.value is None else bytes(h.value)) for h in (r.headers or [])])
                   for r in collected), key=lambda r: (r[0], r[1]))


def _consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Any]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check",
                                         "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(partitions)])
        out: list[Any] = []
        for _ in range(int(TIMEOUT_S * 2)):
            if len(out) >= expected:
                break
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                out.append(msg)
        return out
    finally:
        consumer.close()


def test_batch_read(spark: SparkSession, broker: BrokerProcess) -> None:
    topic = topic_name("kafka-read")
    create_topic(broker.bootstrap, topic, 3)
    produced = _produce(broker.bootstrap, topic, 3, 60)
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic).option("includeHeaders", "true").load())
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>")
    assert _rows(df) == produced
    assert {r.topic for r in df.select("topic").distinct().collect()} == {topic}

    # Explicit offset ranges per partition (JSON, -2 earliest, -1 latest), as with Kafka.
    ranged = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("assign", f'{{"{topic}":[0,2]}}').option("includeHeaders", "true")
              .option("startingOffsets", f'{{"{topic}":{{"0":10,"2":-2}}}}')
              .option("endingOffsets", f'{{"{topic}":{{"0":25,"2":5}}}}').load())
    assert _rows(ranged) == [r for r in produced if (r[0] == 0 and 10 <= r[1] < 25) or (r[0] == 2 and r[1] < 5)]

    # Offsets by timestamp (ListOffsets with a time: the first offset at or after it); an
    # ending timestamp past the last record means the end of the partition.
    ends = {0: BASE_TS + 40, 1: BASE_TS + 52, 2: BASE_TS + 10_000}
    by_time = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
               .option("subscribe", topic).option("includeHeaders", "true")
               .option("startingTimestamp", str(BASE_TS + 30))
               .option("endingOffsetsByTimestamp",
                       json.dumps({topic: {str(p): ts for p, ts in ends.items()}})).load())
    assert _rows(by_time) == [r for r in produced if BASE_TS + 30 <= r[4] < ends[r[0]]]


def test_batch_write(spark: SparkSession, broker: BrokerProcess) -> None:
    topic = topic_name("kafka-write")
    create_topic(broker.bootstrap, topic, 2)
    n = 200
    source = spark.createDataFrame(
        [(None if i % 9 == 4 else f"k{i}".encode(), f"value-{i}".encode(), i % 2,
          [("i", str(i).encode())] if i % 3 else [])
         for i in range(n)],
        "key binary, value binary, partition int, headers array<struct<key:string,value:binary>>")
    (source.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", topic).save())

    got = _consume(broker.bootstrap, topic, 2, n)
    assert len(got) == n
    by_value = {m.value(): m for m in got}
    assert len(by_value) == n
    for i in range(n):
        m = by_value[f"value-{i}".encode()]
        assert m.partition() == i % 2
        assert m.key() == (None if i % 9 == 4 else f"k{i}".encode())
        assert (m.headers() or []) == ([("i", str(i).encode())] if i % 3 else [])
    # Each partition's offsets are dense from 0, in the order Spark wrote them.
    for p in range(2):
        offsets = sorted(m.offset() for m in got if m.partition() == p)
        assert offsets == list(range(n // 2))

    # And Spark reads back what it wrote (the written timestamp is the producer's create time).
    back = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic).load())
    assert sorted(bytes(r.value) for r in back.select("value").collect()) == sorted(by_value)
    assert {r.timestampType for r in back.select("timestampType").distinct().collect()} == {0}


def test_streaming_read_resumes_from_checkpoint(spark: SparkSession, broker: BrokerProcess,
                                               tmp_path: Path) -> None:
    topic = topic_name("kafka-stream")
    create_topic(broker.bootstrap, topic, 2)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run() -> int:
        """One availableNow run into Parquet; returns how many records it read."""
        stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("includeHeaders", "true").option("maxOffsetsPerTrigger", "50").load())
        query = (stream.writeStream.format("parquet").option("path", str(output))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(300), "availableNow query did not finish"
            assert query.exception() is None
            return sum(int(p["numInputRows"]) for p in query.recentProgress)
        finally:
            query.stop()

    first = _produce(broker.bootstrap, topic, 2, 70)
    assert run() == len(first)
    assert _rows(spark.read.parquet(str(output))) == first

    second = _produce(broker.bootstrap, topic, 2, 40, first=70)
    assert run() == len(second)  # only the new records: the checkpoint holds the offsets
    assert _rows(spark.read.parquet(str(output))) == sorted(first + second, key=lambda r: (r[0], r[1]))


def test_streaming_read_after_records_deleted(spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    """Records deleted under a checkpoint (DeleteRecords, as retention would): the connector's
    fetch gets OFFSET_OUT_OF_RANGE, so failOnDataLoss=true fails the query and false skips on
    to the new log start offset, as on Kafka."""
    topic = topic_name("kafka-loss")
    create_topic(broker.bootstrap, topic, 1)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run(fail_on_data_loss: bool) -> None:
        stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("failOnDataLoss", str(fail_on_data_loss).lower()).load())
        query = (stream.select("offset").writeStream.format("parquet").option("path", str(output))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(300), "availableNow query did not finish"
        finally:
            query.stop()

    def offsets() -> list[int]:
        return sorted(r.offset for r in spark.read.parquet(str(output)).collect())

    _produce(broker.bootstrap, topic, 1, 100)
    run(True)
    assert offsets() == list(range(100))
    _produce(broker.bootstrap, topic, 1, 100, first=100)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_records([confluent_kafka.TopicPartition(topic, 0, 150)]).values():
        assert future.result(TIMEOUT_S).low_watermark == 150

    with pytest.raises(StreamingQueryException, match="failOnDataLoss"):
        run(True)
    assert offsets() == list(range(100))
    run(False)
    assert offsets() == list(range(100)) + list(range(150, 200))
