"""Reading a topic into Spark: the ``strom`` data source against the common alternative.

    .venv/bin/python benchmarks/spark.py [--records 10000000] [--size 100] [--partitions 4]
                                         [--rounds 2] [--master local[2]]
                                         [--paths strom,pandas,kafka,kafka39]

One ``strom serve`` (``tests/support/broker_process.py``, default settings, a fresh data
dir) and, for ``kafka39``, Apache Kafka 3.9 with its ZooKeeper
(``tests/support/reference_broker.py``: the shared reference settings, ``-Xmx1g``, a fresh
data dir), both running through the whole benchmark. On each, one topic of
``--partitions`` partitions filled with the same ``--records`` records of ``--size`` B
(values cycled from 1,024 random ones, 8-byte keys) by confluent-kafka. One local
SparkSession (``--master``, Arrow enabled for pandas conversions). Every path is warmed up
once (a read of 1,000 records per partition, and a small partitioned Parquet write), then
each round runs, in this order, the workloads of the ``--paths`` chosen:

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
* ``kafka count`` and ``kafka -> Parquet`` (path ``kafka``): Spark's own Kafka connector
  (``format("kafka")``, spark-sql-kafka-0-10 on ``spark.jars``, from
  ``tests/spark/kafka-connector/fetch``) on the same Strom topic: the count, and the
  loader's layout written from it (``includeHeaders``, the date column, Parquet partitioned
  by topic and date).
* ``kafka count on Kafka 3.9`` and ``kafka -> Parquet on Kafka 3.9`` (path ``kafka39``):
  the same two on Apache Kafka 3.9's topic: what Spark users run today.

The ``kafka`` paths are left out, with a note, when the jars are not fetched. Where Parquet
is written, the check that every record arrived (a count of the files written) runs after
the clock stops, for every path alike.

Records/s and MB/s (value bytes) per workload; the goals are strom >= 3x the pandas
alternative, and ``format("strom")`` on Strom >= 1.0x ``format("kafka")`` on Kafka 3.9
(the same connector on Strom is shown too).
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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import confluent_kafka
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F

from benchmarks._fill import fill_topic
from strom.client.admin_types import NewTopic
from strom.client.sync import Admin
from strom.spark import register
from strom.spark.loader import DATE_UTC, load
from tests.support.broker_process import BrokerProcess
from tests.support.reference_broker import start_reference_broker
from tests.support.spark import kafka_connector_jars

PATHS = ("strom", "pandas", "kafka", "kafka39")


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


@contextmanager
def strom_broker(scratch: Path) -> Iterator[str]:
    broker = BrokerProcess(scratch / "strom-data").start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@contextmanager
def kafka39_broker(scratch: Path) -> Iterator[str]:
    with start_reference_broker("39", scratch) as broker:
        print(f"Apache Kafka {broker.kafka_version} (ZooKeeper mode) on {broker.bootstrap}", flush=True)
        yield broker.bootstrap


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """The benchmark's topic, through Strom's admin client on either broker."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def parse_paths(text: str) -> list[str]:
    paths = [path.strip() for path in text.split(",") if path.strip()]
    unknown = [path for path in paths if path not in PATHS]
    if unknown or not paths:
        raise SystemExit(f"spark.py: --paths takes a comma-separated list of {', '.join(PATHS)}; "
                         f"got {text!r}")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--paths", default=",".join(PATHS),
                        help=f"which workloads to run, comma-separated (default: {','.join(PATHS)})")
    args = parser.parse_args()
    paths = parse_paths(args.paths)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    mb = args.records * args.size / 1e6
    jars = kafka_connector_jars()
    if not jars and {"kafka", "kafka39"} & set(paths):
        print("note: Spark's Kafka connector is not fetched (tests/spark/kafka-connector/fetch): "
              "format(\"kafka\") is left out", flush=True)
        paths = [path for path in paths if path not in ("kafka", "kafka39")]
    topic = "bench"
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch_name, ExitStack() as brokers:
        scratch = Path(scratch_name)
        strom = brokers.enter_context(strom_broker(scratch))
        kafka39 = brokers.enter_context(kafka39_broker(scratch)) if "kafka39" in paths else None
        for name, bootstrap in (("Strom", strom), ("Kafka 3.9", kafka39)):
            if bootstrap is None:
                continue
            create_topic(bootstrap, topic, args.partitions)
            began = time.monotonic()
            fill(bootstrap, topic, args.records, args.size, args.partitions)
            print(f"{name}: filled {args.records:,} records of {args.size} B in {time.monotonic() - began:.1f} s",
                  flush=True)
        spark = (SparkSession.builder.master(args.master).config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "8g").config("spark.jars", ",".join(jars))
                 .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)

        def timed(name: str, work: Callable[[], int | None], count: Callable[[], int] | None = None) -> None:
            """Time ``work``; then check it delivered every record (its own count, or
            ``count`` run after the clock stops)."""
            start = time.monotonic()
            delivered = work()
            seconds = time.monotonic() - start
            if count is not None:
                delivered = count()
            if delivered != args.records:
                raise RuntimeError(f"{name}: {delivered} records, expected {args.records}")
            results.setdefault(name, []).append(seconds)
            print(f"  {name}: {seconds:.1f} s, {args.records / seconds / 1e3:,.0f}k rec/s, "
                  f"{mb / seconds:.1f} MB/s", flush=True)

        def reader(source: str, bootstrap: str, warm_up: bool = False) -> DataFrameReader:
            read = (spark.read.format(source).option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic))
            if warm_up:  # (less than a partition holds, whatever --records is)
                ending = {topic: {str(p): min(1000, args.records // args.partitions)
                                  for p in range(args.partitions)}}
                read = read.option("endingOffsets", json.dumps(ending))
            return read

        def parquet_count(target: Path) -> Callable[[], int]:
            return lambda: int(spark.read.parquet(str(target)).count())

        def write_parquet(read: DataFrameReader, target: Path) -> None:
            """The loader's layout: the same columns (headers too), date column and partitioning."""
            frame = read.option("includeHeaders", "true").load().withColumn("date", F.expr(DATE_UTC))
            frame.write.partitionBy("topic", "date").parquet(str(target))

        # Warm the JVM (class loading, code generation) on every path before timing, the
        # Parquet writer included (else the first round's first write pays for it).
        reader("strom", strom, warm_up=True).load().count()
        write_parquet(reader("strom", strom, warm_up=True), scratch / "warm-up")
        if "pandas" in paths:
            spark.createDataFrame(confluent_frame(strom, topic, 1000, args.partitions)).count()
        for bootstrap in (strom if "kafka" in paths else None, kafka39):
            if bootstrap is not None:
                reader("kafka", bootstrap, warm_up=True).load().count()

        def count(read: DataFrameReader) -> int:
            return read.load().count()  # planning (the offsets asked for) timed too

        def strom_load(target: Path) -> int:
            return sum(t.records for t in load(spark, strom, [topic], target, progress=None).topics)

        def pandas_frame() -> DataFrame:
            return spark.createDataFrame(confluent_frame(strom, topic, args.records, args.partitions))

        def pandas_parquet(target: Path) -> None:
            pandas_frame().withColumn("date", F.expr(DATE_UTC)).write.partitionBy("topic", "date").parquet(
                str(target))

        for number in range(args.rounds):
            print(f"round {number + 1}", flush=True)
            if "strom" in paths:
                timed("strom count", partial(count, reader("strom", strom)))
                timed("strom load (Parquet)", partial(strom_load, scratch / f"strom-{number}"))
            if "pandas" in paths:
                timed("confluent -> pandas -> count", lambda: pandas_frame().count())
                target = scratch / f"pandas-{number}"
                timed("confluent -> pandas -> Parquet", partial(pandas_parquet, target), parquet_count(target))
            for path, bootstrap, where in (("kafka", strom, ""), ("kafka39", kafka39, " on Kafka 3.9")):
                if path not in paths or bootstrap is None:
                    continue
                timed(f"kafka count{where}", partial(count, reader("kafka", bootstrap)))
                target = scratch / f"parquet-{path}-{number}"
                timed(f"kafka -> Parquet{where}", partial(write_parquet, reader("kafka", bootstrap), target),
                      parquet_count(target))
        spark.stop()
    report(args, mb, results)


def report(args: argparse.Namespace, mb: float, results: dict[str, list[float]]) -> None:
    print(f"\n{args.records:,} records of {args.size} B, {args.partitions} partitions, master {args.master}")
    print("| workload | best rec/s | median rec/s | median MB/s |")
    print("| --- | --- | --- | --- |")
    for name, seconds in results.items():
        best, median = min(seconds), statistics.median(seconds)
        print(f"| {name} | {args.records / best / 1e3:,.0f}k | {args.records / median / 1e3:,.0f}k "
              f"| {mb / median:.1f} |")
    for ours, theirs, goal in (("strom count", "confluent -> pandas -> count", 3.0),
                               ("strom load (Parquet)", "confluent -> pandas -> Parquet", 3.0),
                               ("strom count", "kafka count on Kafka 3.9", 1.0),
                               ("strom load (Parquet)", "kafka -> Parquet on Kafka 3.9", 1.0),
                               ("strom count", "kafka count", None),
                               ("strom load (Parquet)", "kafka -> Parquet", None)):
        if ours not in results or theirs not in results:
            continue
        ratio = statistics.median(results[theirs]) / statistics.median(results[ours])
        judged = "" if goal is None else f" (goal >= {goal:g}x: {'met' if ratio >= goal else 'MISSED'})"
        print(f"{ours} vs {theirs}: {ratio:.2f}x{judged}")


if __name__ == "__main__":
    main()
