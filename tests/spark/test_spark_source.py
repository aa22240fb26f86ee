"""The ``strom`` data source on a real local SparkSession against a real Strom broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from tests.support.broker_process import BrokerProcess
from tests.support.spark import create_topic, options, produce, topic_name

BASE_TS = 1_700_000_000_000


def _records(topic: str, partitions: int, per_partition: int) -> list[dict[str, object]]:
    out = []
    for p in range(partitions):
        for i in range(per_partition):
            out.append({"topic": topic, "partition": p, "key": f"k{p}-{i}".encode(),
                        "value": f"v{p}-{i}".encode() * (1 + i % 3),
                        "headers": [("h", f"{i}".encode()), ("n", None)] if i % 2 else [],
                        "timestamp_ms": BASE_TS + i})
    return out


def test_batch_read_three_partitions_with_headers(spark: SparkSession, broker: BrokerProcess) -> None:
    topic = topic_name()
    create_topic(broker.bootstrap, topic, 3)
    produced = _records(topic, 3, 200)
    produce(broker.bootstrap, produced)
    df = spark.read.format("strom").options(**options(broker, subscribe=topic, includeHeaders="true")).load()
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>")
    rows = df.collect()
    got = sorted((r.partition, r.offset, r.key, r.value, r.topic, r.timestampType,
                  int(r.timestamp.timestamp() * 1000), [(h.key, h.value) for h in r.headers])
                 for r in rows)
    want = sorted((r["partition"], i % 200, r["key"], r["value"], topic, 0, r["timestamp_ms"],
                   list(r["headers"]))  # type: ignore[call-overload]
                  for i, r in enumerate(produced))
    assert got == want


def test_batch_offset_ranges_and_min_partitions(spark: SparkSession, broker: BrokerProcess) -> None:
    topic = topic_name()
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, _records(topic, 3, 100))
    df = spark.read.format("strom").options(**options(broker, subscribe=topic, minPartitions=10)).load()
    assert df.rdd.getNumPartitions() >= 10
    assert df.count() == 300
    assert df.select("partition", "offset").distinct().count() == 300

    starting = json.dumps({topic: {"0": 10, "1": -2, "2": 99}})
    ending = json.dumps({topic: {"0": 20, "1": 5, "2": -1}})
    df = spark.read.format("strom").options(**options(
        broker, subscribe=topic, startingOffsets=starting, endingOffsets=ending)).load()
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)] + [(2, 99)]


def test_assign_and_pattern(spark: SparkSession, broker: BrokerProcess) -> None:
    prefix = topic_name("pat")
    for suffix in ("a", "b"):
        create_topic(broker.bootstrap, f"{prefix}-{suffix}", 2)
        produce(broker.bootstrap, _records(f"{prefix}-{suffix}", 2, 10))
    df = spark.read.format("strom").options(**options(broker, subscribePattern=f"{prefix}-.*")).load()
    assert df.count() == 40
    df = spark.read.format("strom").options(**options(
        broker, assign=json.dumps({f"{prefix}-a": [1]}))).load()
    assert {(r.topic, r.partition) for r in df.collect()} == {(f"{prefix}-a", 1)}


def test_starting_timestamp(spark: SparkSession, broker: BrokerProcess) -> None:
    topic = topic_name()
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, _records(topic, 2, 50))
    df = spark.read.format("strom").options(**options(
        broker, subscribe=topic, startingTimestamp=BASE_TS + 40)).load()
    assert sorted(r.offset for r in df.collect()) == sorted(list(range(40, 50)) * 2)


@pytest.mark.parametrize(("extra", "message"), [
    ({"subscribe": "x", "subscribePattern": "y"}, "exactly one of"),
    ({"subscribe": "x", "startingOffsets": "latest"}, "not valid in a batch query"),
    ({"subscribe": "x", "startingOfsets": "earliest"}, "unknown option 'startingofsets'"),
    ({"subscribe": "x", "kafka.auto.offset.reset": "earliest"}, "set startingOffsets instead"),
    ({"subscribe": "x", "kafka.linger.mss": "1"}, "invalid kafka.* option"),
    ({"subscribe": "x", "startingOffsets": "{bad"}, "not valid JSON"),
    ({"subscribe": "x", "startingTimestamp": "1", "startingOffsets": "earliest"}, "conflict"),
])
def test_bad_options_fail_before_any_job(spark: SparkSession, broker: BrokerProcess,
                                         extra: dict[str, str], message: str) -> None:
    with pytest.raises(PySparkException, match=message.replace("*", r"\*")):
        spark.read.format("strom").options(**options(broker, **extra)).load().collect()


def test_fail_on_data_loss_after_delete_records(spark: SparkSession, broker: BrokerProcess) -> None:
    from strom.client import Admin
    from strom.client.admin_types import TopicPartition

    topic = topic_name()
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, _records(topic, 1, 30))
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.delete_records({TopicPartition(topic, 0): 12})
    starting = json.dumps({topic: {"0": 0}})
    with pytest.raises(PySparkException, match="failOnDataLoss=false"):
        spark.read.format("strom").options(**options(
            broker, subscribe=topic, startingOffsets=starting)).load().collect()
    df = spark.read.format("strom").options(**options(
        broker, subscribe=topic, startingOffsets=starting, failOnDataLoss="false")).load()
    assert sorted(r.offset for r in df.collect()) == list(range(12, 30))


def test_write_then_read_back(spark: SparkSession, broker: BrokerProcess) -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )
    topic = topic_name()
    create_topic(broker.bootstrap, topic, 2)
    header = StructType([StructField("key", StringType(), False), StructField("value", BinaryType(), True)])
    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                         StructField("partition", IntegerType()),
                         StructField("headers", ArrayType(header))])
    rows = [(f"k{i}" if i % 5 else None, f"value-{i}".encode(), i % 2,
             [("a", f"{i}".encode())] if i % 3 else []) for i in range(500)]
    spark.createDataFrame(rows, schema).repartition(3).write.format("strom").mode("append").options(
        **options(broker, topic=topic)).save()
    back = spark.read.format("strom").options(**options(broker, subscribe=topic, includeHeaders="true")).load()
    def order(t: tuple[object, ...]) -> tuple[object, ...]:
        return (t[0] is None, t[0] or "", t[1])
    got = sorted(((r.key.decode() if r.key is not None else None, bytes(r.value), r.partition,
                   [(h.key, bytes(h.value)) for h in r.headers]) for r in back.collect()), key=order)
    assert got == sorted(rows, key=order)


def test_write_refuses_a_frame_without_value(spark: SparkSession, broker: BrokerProcess) -> None:
    df = spark.createDataFrame([("a",)], "key string")
    with pytest.raises(PySparkException, match="'value' column"):
        df.write.format("strom").mode("append").options(**options(broker, topic="x")).save()


def test_stream_with_max_offsets_per_trigger_and_restart(spark: SparkSession, broker: BrokerProcess,
                                                        tmp_path: Path) -> None:
    topic = topic_name()
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, _records(topic, 3, 100))
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run() -> list[int]:
        stream = spark.readStream.format("strom").options(**options(
            broker, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=70)).load()
        query = (stream.select("partition", "offset", "value").writeStream.format("parquet")
                 .option("path", out).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    sizes = run()
    assert sum(sizes) == 300 and max(sizes) <= 70 and len(sizes) >= 5
    produce(broker.bootstrap, [r for r in _records(topic, 3, 120) if r["value"]][:360])
    sizes = run()
    assert sum(sizes) == 360 and max(sizes) <= 70
    got = sorted((r.partition, r.offset) for r in spark.read.parquet(out).collect())
    assert got == sorted((p, o) for p in range(3) for o in range(220))


def test_stream_fail_on_data_loss(spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    from strom.client import Admin
    from strom.client.admin_types import TopicPartition

    topic = topic_name()
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, _records(topic, 1, 30))
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run(fail: bool) -> BaseException | None:
        stream = spark.readStream.format("strom").options(**options(
            broker, subscribe=topic, startingOffsets="earliest", failOnDataLoss=str(fail).lower())).load()
        query = (stream.select("offset").writeStream.format("parquet").option("path", out)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        try:
            query.awaitTermination(120)
        except PySparkException as e:
            return e
        return query.exception()

    assert run(True) is None
    produce(broker.bootstrap, _records(topic, 1, 30))
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.delete_records({TopicPartition(topic, 0): 50})
    error = run(True)
    assert error is not None and "failOnDataLoss=false" in str(error)
    assert run(False) is None
    assert sorted(r.offset for r in spark.read.parquet(out).collect()) == list(range(30)) + list(range(50, 60))


def test_write_stream_copies_a_topic(spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    source, target = topic_name(), topic_name()
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, target, 2)
    produced = _records(source, 2, 150)
    produce(broker.bootstrap, produced)
    stream = spark.readStream.format("strom").options(**options(
        broker, subscribe=source, startingOffsets="earliest", maxOffsetsPerTrigger=100)).load()
    query = (stream.select("key", "value", "partition").writeStream.format("strom")
             .options(**options(broker, topic=target)).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    back = spark.read.format("strom").options(**options(broker, subscribe=target)).load().collect()
    assert sorted((r.partition, r.key, r.value) for r in back) == sorted(
        (r["partition"], r["key"], r["value"]) for r in produced)  # type: ignore[misc]


def test_stream_picks_up_new_partitions(spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    from strom.client import Admin

    topic = topic_name()
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, _records(topic, 1, 20))
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run() -> None:
        stream = spark.readStream.format("strom").options(**options(
            broker, subscribe=topic, startingOffsets="earliest")).load()
        query = (stream.select("partition", "offset").writeStream.format("parquet").option("path", out)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None

    run()
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_partitions({topic: 3})
    produce(broker.bootstrap, [r for p in (1, 2) for r in _records(topic, 3, 7) if r["partition"] == p])
    run()
    got = sorted((r.partition, r.offset) for r in spark.read.parquet(out).collect())
    assert got == [(0, o) for o in range(20)] + [(p, o) for p in (1, 2) for o in range(7)]


def test_starting_offsets_by_timestamp(spark: SparkSession, broker: BrokerProcess) -> None:
    topic = topic_name()
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, _records(topic, 2, 30))
    by_ts = json.dumps({topic: {"0": BASE_TS + 10, "1": BASE_TS + 25}})
    df = spark.read.format("strom").options(**options(
        broker, subscribe=topic, startingOffsetsByTimestamp=by_ts)).load()
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(0, o) for o in range(10, 30)] + [(1, o) for o in range(25, 30)]
    late = json.dumps({topic: {"0": BASE_TS + 10, "1": BASE_TS + 10_000}})
    with pytest.raises(PySparkException, match="startingOffsetsByTimestampStrategy"):
        spark.read.format("strom").options(**options(
            broker, subscribe=topic, startingOffsetsByTimestamp=late)).load().collect()
