"""The ``strom`` sink with ``transactional=true`` (issue 19), against a real Strom broker:
a batch write through a real SparkSession, a streaming query whose last batch Spark
re-runs after a simulated driver crash, and the task path itself for a failing, a
retried, a re-run and a fenced attempt. Output is read back ``read_committed``."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from strom.client import Admin, Consumer
from strom.client.admin_types import TopicPartition
from strom.client.errors import KafkaError
from strom.spark.options import SinkOptions, parse_sink_options
from strom.spark.writing import WriteTask, write_batches
from tests.support.broker_process import BrokerProcess
from tests.support.spark import create_topic, options, produce, topic_name

Row = tuple[int, bytes | None, bytes | None]  # partition, key, value


def _read(broker: BrokerProcess, topic: str, partitions: int, isolation: str) -> list[Row]:
    """Every data record of ``topic`` a consumer reading ``isolation`` returns, in log order."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    rows: list[Row] = []
    with Consumer({"bootstrap.servers": broker.bootstrap, "isolation.level": isolation}) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)  # the last stable offset under read_committed
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"did not reach {ends}"
            rows += [(r.partition, r.key, r.value) for r in consumer.poll(timeout_ms=500)]
    return rows


def _sink(broker: BrokerProcess, topic: str, prefix: str) -> SinkOptions:
    return parse_sink_options(options(broker, topic=topic, transactional="true", transactionalIdPrefix=prefix))


def _batch(values: range) -> pa.RecordBatch:
    return pa.record_batch({"key": pa.array([f"k{i}".encode() for i in values], pa.binary()),
                            "value": pa.array([f"v{i}".encode() for i in values], pa.binary())})


def _high_watermark(broker: BrokerProcess, topic: str) -> int:
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        return admin.list_offsets({TopicPartition(topic, 0): "latest"})[TopicPartition(topic, 0)].offset


def _until_on_the_log(broker: BrokerProcess, topic: str) -> Iterator[pa.RecordBatch]:
    """Small batches until some of this task's records are on the log: the producer sends
    while the writer produces the next batch."""
    deadline = time.monotonic() + 120
    for start in itertools.count(0, 100):
        if _high_watermark(broker, topic) > 0:
            return
        assert time.monotonic() < deadline, "no record reached the log"
        yield _batch(range(start, start + 100))


def _failing_midway(broker: BrokerProcess, topic: str) -> Iterator[pa.RecordBatch]:
    yield from _until_on_the_log(broker, topic)
    raise RuntimeError("the task fails midway")


def test_batch_write_lands_in_one_transaction_per_task(spark: SparkSession, broker: BrokerProcess) -> None:
    topic = topic_name("txn")
    create_topic(broker.bootstrap, topic, 2)
    rows = [(f"k{i}", f"value-{i}".encode(), i % 2) for i in range(600)]
    (spark.createDataFrame(rows, "key string, value binary, partition int").repartition(3)
     .write.format("strom").mode("append").options(**options(broker, topic=topic, transactional="true")).save())
    got = _read(broker, topic, 2, "read_committed")
    assert sorted((p, k, v) for p, k, v in got) == sorted((p, k.encode(), v) for k, v, p in rows)
    # Each of the 3 tasks wrote both partitions in one transaction: one commit marker per
    # partition per task on top of the 600 records.
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        ends = admin.list_offsets({TopicPartition(topic, p): "latest" for p in range(2)})
    assert sum(end.offset for end in ends.values()) == 600 + 3 * 2


def test_stream_batch_rerun_after_a_driver_crash_writes_once(spark: SparkSession, broker: BrokerProcess,
                                                             tmp_path: Path) -> None:
    source, target = topic_name("txn-in"), topic_name("txn-out")
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, target, 2)
    produced = [{"topic": source, "partition": p, "key": f"k{p}-{i}".encode(), "value": f"v{p}-{i}".encode()}
                for p in range(2) for i in range(150)]
    produce(broker.bootstrap, produced)
    checkpoint = tmp_path / "checkpoint"

    def run() -> tuple[str, dict[int, int]]:
        stream = spark.readStream.format("strom").options(**options(
            broker, subscribe=source, startingOffsets="earliest")).load()
        query = (stream.select("key", "value", "partition").writeStream.format("strom")
                 .options(**options(broker, topic=target, transactional="true"))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None
        return query.id, {p["batchId"]: p["numInputRows"] for p in query.recentProgress if p["numInputRows"]}

    query_id, batches = run()
    assert sum(batches.values()) == 300
    last = max(batches)
    # The driver "dies" after the last batch's tasks committed but before Spark logged the
    # batch's commit: on restart Spark runs that batch again, from the same offsets.
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    rerun_id, rerun = run()
    assert rerun_id == query_id and rerun == {last: batches[last]}
    got = _read(broker, target, 2, "read_committed")
    assert sorted(got) == sorted((r["partition"], r["key"], r["value"]) for r in produced)
    # What the tasks recorded: per Spark partition, the last batch committed, in its own group.
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        recorded = [admin.list_consumer_group_offsets(f"strom-spark-{query_id}-{p}") for p in range(2)]
    assert [sorted(c.offset for c in offsets.values()) for offsets in recorded] == [[last + 1], [last + 1]]


def test_failed_retried_and_rerun_attempts_of_a_micro_batch_task(broker: BrokerProcess) -> None:
    topic = topic_name("txn-task")
    create_topic(broker.bootstrap, topic, 1)
    sink = _sink(broker, topic, topic_name("prefix"))
    task = WriteTask(partition=0, query_id="query-a", batch_id=7)
    with pytest.raises(RuntimeError, match="fails midway"):
        write_batches(sink, _failing_midway(broker, topic), task)
    assert _read(broker, topic, 1, "read_committed") == []
    aborted = len(_read(broker, topic, 1, "read_uncommitted"))
    assert aborted > 0  # records of the failed attempt are on the log, aborted

    retried = write_batches(sink, iter([_batch(range(0, 300)), _batch(range(300, 500))]), task)
    assert (retried.records, retried.skipped) == (500, False)
    rerun = write_batches(sink, iter([_batch(range(0, 500))]), task)
    assert (rerun.records, rerun.skipped) == (0, True)
    earlier = write_batches(sink, iter([_batch(range(0, 500))]), WriteTask(0, "query-a", 6))
    assert earlier.skipped
    want = [(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(500)]
    assert _read(broker, topic, 1, "read_committed") == want
    # A new query (a new checkpoint) with the same prefix starts its batch ids again: not skipped.
    fresh = write_batches(sink, iter([_batch(range(500, 510))]), WriteTask(0, "query-b", 0))
    assert (fresh.records, fresh.skipped) == (10, False)
    assert len(_read(broker, topic, 1, "read_committed")) == 510


def test_a_zombie_attempt_is_fenced_by_the_next_one(broker: BrokerProcess) -> None:
    topic = topic_name("txn-zombie")
    create_topic(broker.bootstrap, topic, 1)
    sink = _sink(broker, topic, topic_name("prefix"))
    task = WriteTask(partition=3, query_id="query", batch_id=0)
    release = threading.Event()
    outcome: list[KafkaError] = []

    def zombie() -> None:
        # Writes some records, then hangs (a lost executor) until the next attempt has
        # committed, then goes on to commit its own transaction: it must be refused.
        def hung() -> Iterator[pa.RecordBatch]:
            yield from _until_on_the_log(broker, topic)
            assert release.wait(120)
        try:
            write_batches(sink, hung(), task)
        except KafkaError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=zombie)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while _high_watermark(broker, topic) == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        retried = write_batches(sink, iter([_batch(range(1000, 1200))]), task)
        assert (retried.records, retried.skipped) == (200, False)
    finally:
        release.set()
        thread.join(120)
    assert len(outcome) == 1, "the zombie's commit went through"
    assert outcome[0].error_code.name in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"), outcome[0]
    assert _read(broker, topic, 1, "read_committed") == [
        (0, f"k{i}".encode(), f"v{i}".encode()) for i in range(1000, 1200)]
