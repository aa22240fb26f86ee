"""Reading a topic into Spark: the ``strom`` data source against the common alternative.

    .venv/bin/python benchmarks/spark.py [--records 10000000] [--size 100] [--partitions 4]
                                         [--rounds 2] [--master local[2]]

One ``strom serve`` (``tests/support/broker_process.py``, default settings, a fresh data
dir), one topic of ``--partitions`` partitions filled with ``--records`` records of
``--size`` B (values cycled from 1,024 random ones, 8-byte keys) by confluent-kafka. One
local SparkSession (``--master``, Arrow enabled for pandas conversions). Then, each
round, in this order:

* ``strom count``: ``spark.read.format("strom")...load().count()``. Every record crosses
  from the executors' Python workers to the JVM as Arrow.
* ``strom load``: ``strom.spark.loader.load`` into a fresh directory: the same read plus
  the date column, Parquet (snappy) partitioned by topic and date, and the commit.
* ``confluent → pandas → count``: the usual way without a connector: one
  confluent-kafka consumer (``fetch.queue.backoff.ms=10``, all partitions assigned)
  reads every record on the driver into column lists, ``pandas.DataFrame``, then
  ``spark.createDataFrame(pdf).count()``.
* ``confluent → pandas → Parquet``: the same frame written by Spark as the loader writes
  (Parquet, snappy, partitioned by topic and the same UTC date column).
* ``kafka count`` and ``kafka -> Parquet``: Spark's own Kafka connector
  (``format("kafka")``, spark-sql-kafka-0-10 on ``spark.jars``, from
  ``tests/spark/kafka-connector/fetch``) on the same Strom topic: the count, and the
  loader's layout written from it. Left out, with a note, when the jars are not fetched.

Records/s and MB/s (value bytes) per workload; the goal is strom >= 3x the pandas
alternative, and strom >= 1.0x Spark's Kafka connector.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import confluent_kafka
from pyspark.sql import DataFrameReader, SparkSession
from pyspark.sql import functions as F

from benchmarks._fill import fill_topic
from strom.client.admin_types import NewTopic
from strom.client.sync import Admin
from strom.spark import register
from strom.spark.loader import DATE_UTC, load
from tests.support.broker_process import BrokerProcess
from tests.support.spark import kafka_connector_jars


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    rng = random.Random(1)
    values = [rng.randbytes(size) for _ in range(1024)]
    fill_topic(bootstrap, topic, records, value=lambda i: values[i & 1023],
               key=lambda i: i.to_bytes(8, "big"), partition=lambda i: i % partitions)


def confluent_frame(bootstrap: str, topic: str, records: int, partitions: int) -> object:
    import pandas as pd

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    keys, values, parts, offsets, stamps, kinds = [], [], [], [], [], []
    while len(values) < records:  # (the warm-up asks for fewer than a partition holds)
        for m in consumer.consume(num_messages=10000, timeout=1.0):
            if m.error():
                raise RuntimeError(m.error())
            kind, stamp = m.timestamp()
            keys.append(m.key())
            values.append(m.value())
            parts.append(m.partition())
            offsets.append(m.offset())
            stamps.append(stamp)
            kinds.append(kind - 1)
    consumer.close()
    return pd.DataFrame({"key": keys, "value": values, "topic": topic, "partition": parts,
                         "offset": offsets, "timestamp": pd.to_datetime(stamps, unit="ms", utc=True),
                         "timestampType": kinds})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    mb = args.records * args.size / 1e6
    jars = kafka_connector_jars()
    if not jars:
        print("note: Spark's Kafka connector is not fetched (tests/spark/kafka-connector/fetch): "
              "format(\"kafka\") is left out", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        broker = BrokerProcess(Path(scratch) / "data").start()
        try:
            topic = "bench"
            with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
                admin.create_topics([NewTopic(topic, args.partitions, 1)])
            began = time.monotonic()
            fill(broker.bootstrap, topic, args.records, args.size, args.partitions)
            print(f"filled {args.records:,} records of {args.size} B in {time.monotonic() - began:.1f} s",
                  flush=True)
            spark = (SparkSession.builder.master(args.master).config("spark.ui.enabled", "false")
                     .config("spark.driver.memory", "8g").config("spark.jars", ",".join(jars))
                     .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            register(spark)
            results: dict[str, list[float]] = {}

            def timed(name: str, work: object) -> None:
                start = time.monotonic()
                count = work()  # type: ignore[operator]
                seconds = time.monotonic() - start
                if count != args.records:
                    raise RuntimeError(f"{name}: {count} records, expected {args.records}")
                results.setdefault(name, []).append(seconds)
                print(f"  {name}: {seconds:.1f} s, {args.records / seconds / 1e3:,.0f}k rec/s, "
                      f"{mb / seconds:.1f} MB/s", flush=True)

            # Warm the JVM (class loading, code generation) on both paths before timing.
            spark.read.format("strom").option("kafka.bootstrap.servers", broker.bootstrap).option(
                "subscribe", topic).option("endingOffsets", json.dumps(
                    {topic: {str(p): 1000 for p in range(args.partitions)}})).load().count()
            spark.createDataFrame(confluent_frame(broker.bootstrap, topic, 1000, args.partitions)).count()
            if jars:
                spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option(
                    "subscribe", topic).option("endingOffsets", json.dumps(
                        {topic: {str(p): 1000 for p in range(args.partitions)}})).load().count()
            for number in range(args.rounds):
                print(f"round {number + 1}", flush=True)
                reader = (spark.read.format("strom").option("kafka.bootstrap.servers", broker.bootstrap)
                          .option("subscribe", topic))
                timed("strom count", lambda reader=reader: reader.load().count())
                out = Path(scratch) / f"strom-{number}"
                timed("strom load (Parquet)", lambda out=out: sum(
                    t.records for t in load(spark, broker.bootstrap, [topic], out, progress=None).topics))
                timed("confluent -> pandas -> count",
                      lambda: spark.createDataFrame(confluent_frame(
                          broker.bootstrap, topic, args.records, args.partitions)).count())
                target = str(Path(scratch) / f"pandas-{number}")

                def pandas_parquet(target: str = target) -> int:
                    frame = spark.createDataFrame(confluent_frame(broker.bootstrap, topic, args.records,
                                                                  args.partitions))
                    # The loader's layout: the same date column, the same partitioning.
                    frame = frame.withColumn("date", F.expr(DATE_UTC))
                    frame.write.partitionBy("topic", "date").parquet(target)
                    return int(spark.read.parquet(target).count())

                timed("confluent -> pandas -> Parquet", pandas_parquet)
                if not jars:
                    continue
                kafka = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                         .option("subscribe", topic))
                timed("kafka count", lambda kafka=kafka: kafka.load().count())

                def kafka_parquet(target: str = str(Path(scratch) / f"kafka-{number}"),
                                  kafka: DataFrameReader = kafka) -> int:
                    frame = kafka.load().withColumn("date", F.expr(DATE_UTC))
                    frame.write.partitionBy("topic", "date").parquet(target)
                    return int(spark.read.parquet(target).count())

                timed("kafka -> Parquet", kafka_parquet)
            spark.stop()
        finally:
            broker.stop()
    print(f"\n{args.records:,} records of {args.size} B, {args.partitions} partitions, master {args.master}")
    print("| workload | best rec/s | median rec/s | median MB/s |")
    print("| --- | --- | --- | --- |")
    for name, seconds in results.items():
        best, median = min(seconds), statistics.median(seconds)
        print(f"| {name} | {args.records / best / 1e3:,.0f}k | {args.records / median / 1e3:,.0f}k "
              f"| {mb / median:.1f} |")
    for ours, theirs, goal in (("strom count", "confluent -> pandas -> count", 3.0),
                               ("strom load (Parquet)", "confluent -> pandas -> Parquet", 3.0),
                               ("strom count", "kafka count", 1.0),
                               ("strom load (Parquet)", "kafka -> Parquet", 1.0)):
        if theirs not in results:
            continue
        ratio = statistics.median(results[theirs]) / statistics.median(results[ours])
        print(f"{ours} vs {theirs}: {ratio:.1f}x (goal >= {goal:g}x: {'met' if ratio >= goal else 'MISSED'})")


if __name__ == "__main__":
    main()
