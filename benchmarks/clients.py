"""Strom's Python clients against confluent-kafka and aiokafka: same broker, same run.

    .venv/bin/python benchmarks/clients.py [--rounds 3] [--records 1000000] [--size 100]
                                           [--quick] [--profile]

One ``strom serve`` (``tests/support/broker_process.py``, default settings, a fresh data
dir under a temp dir). Every round, each producer writes ``--records`` records of
``--size`` B (values cycled from 1,024 random ones, null keys) to a topic of its own with
4 partitions; then every consumer reads back the topic Strom's ``AsyncProducer.produce``
wrote that round, all 4 partitions assigned (no group), from the earliest offset.

* Producers, acks=all, linger 5 ms, no compression, each client's default batch size
  (Strom and aiokafka: 16 KiB, Kafka's ``batch.size``; librdkafka: its own 1 MB
  ``batch.size``, 10,000 ``batch.num.messages``) and default idempotence (Strom: on;
  librdkafka and aiokafka: off). Timed from the first send (client started, topic
  metadata known) until ``flush`` returns: Strom ``AsyncProducer.produce`` (the
  per-record API the goal is judged on), ``produce_many`` (its batch API: the whole list
  in one call) and ``send`` (a future per record, all checked after), Strom's sync
  ``Producer.send``, confluent-kafka ``produce`` (``poll(0)`` every 10,000 and on
  ``BufferError``), aiokafka ``send`` (the future it returns is collected) and aiokafka
  ``create_batch``/``send_batch`` (its batch API, round robin over partitions). Since the
  default batch sizes differ 60-fold, two like-for-like lines swap them: Strom
  ``produce`` with librdkafka's 1 MB and confluent-kafka with Kafka's 16 KiB.
* Consumers, timed from the first poll (client started, partitions assigned) until the
  last record: Strom ``AsyncConsumer.poll`` (``max.poll.records`` 10,000) and
  ``poll_arrow``, confluent-kafka ``consume(num_messages=10000)`` with defaults and with
  ``fetch.queue.backoff.ms=10``, aiokafka ``getmany(max_records=10000)``. Each touches every
  value (``len``; for Arrow, the sum of the value column's lengths).

Rounds interleave all clients, in a rotated order, and each figure is given as best and
median, since single runs on this 2-core VM swing by ±40 %. MB/s counts value bytes.
``--profile`` adds one cProfile'd pass of Strom's produce, poll and poll_arrow.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiokafka  # type: ignore[import-untyped]
import confluent_kafka
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from strom.client.admin import AsyncAdmin
from strom.client.admin_types import NewTopic, TopicPartition
from strom.client.consumer import AsyncConsumer
from strom.client.producer import AsyncProducer
from strom.client.sync import Producer
from tests.support.broker_process import BrokerProcess

PARTITIONS = 4
LINGER_MS = 5
BATCH_RECORDS = 10_000  # per poll / consume / getmany call
TIMEOUT_S = 10.0


@dataclass
class Load:
    bootstrap: str
    values: list[bytes]
    topics: int = 0

    @property
    def records(self) -> int:
        return len(self.values)

    @property
    def payload(self) -> int:
        return sum(map(len, self.values))

    def topic(self) -> str:
        self.topics += 1
        return f"bench-{self.topics}"


def _values(count: int, size: int) -> list[bytes]:
    rng = random.Random(7)
    pool = [rng.randbytes(size) for _ in range(1024)]
    return [pool[index & 1023] for index in range(count)]


# -- producers: each returns the seconds from first send to flushed -----------------------
async def strom_produce(load: Load, topic: str, batch_size: int | None = None) -> float:
    config: dict[str, object] = {"bootstrap.servers": load.bootstrap, "linger.ms": LINGER_MS}
    if batch_size is not None:
        config["batch.size"] = batch_size
    async with AsyncProducer(config) as producer:
        await producer.partitions_for(topic)
        produce = producer.produce
        start = time.perf_counter()
        for value in load.values:
            await produce(topic, value)
        await producer.flush()
        return time.perf_counter() - start


async def strom_produce_many(load: Load, topic: str) -> float:
    async with AsyncProducer({"bootstrap.servers": load.bootstrap, "linger.ms": LINGER_MS}) as producer:
        await producer.partitions_for(topic)
        start = time.perf_counter()
        await producer.produce_many(topic, load.values)
        await producer.flush()
        return time.perf_counter() - start


async def strom_send(load: Load, topic: str) -> float:
    async with AsyncProducer({"bootstrap.servers": load.bootstrap, "linger.ms": LINGER_MS}) as producer:
        await producer.partitions_for(topic)
        send = producer.send
        start = time.perf_counter()
        futures = [await send(topic, value) for value in load.values]
        await producer.flush()
        seconds = time.perf_counter() - start
        failed = sum(1 for future in futures if not future.done() or future.exception() is not None)
        if failed:
            raise RuntimeError(f"Strom send: {failed} records not delivered")
        return seconds


def strom_sync(load: Load, topic: str) -> float:
    with Producer({"bootstrap.servers": load.bootstrap, "linger.ms": LINGER_MS}) as producer:
        producer.partitions_for(topic)
        send = producer.send
        start = time.perf_counter()
        for value in load.values:
            send(topic, value)
        producer.flush()
        return time.perf_counter() - start


def confluent_produce(load: Load, topic: str, batch_size: int | None = None) -> float:
    config: dict[str, object] = {"bootstrap.servers": load.bootstrap, "acks": "all", "linger.ms": LINGER_MS,
                                 "log.connection.close": False}
    if batch_size is not None:
        config["batch.size"] = batch_size
    producer = confluent_kafka.Producer(config)
    producer.list_topics(topic, timeout=TIMEOUT_S)
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for index, value in enumerate(load.values):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:  # queue.buffering.max.messages (100,000) reached
                poll(0.001)
        if index % 10_000 == 0:
            poll(0)
    left = producer.flush(120)
    seconds = time.perf_counter() - start
    if left:
        raise RuntimeError(f"confluent-kafka: {left} records not delivered")
    return seconds


def _aiokafka_producer(load: Load) -> aiokafka.AIOKafkaProducer:
    return aiokafka.AIOKafkaProducer(bootstrap_servers=load.bootstrap, acks="all", linger_ms=LINGER_MS)


async def aiokafka_send(load: Load, topic: str) -> float:
    producer = _aiokafka_producer(load)
    await producer.start()
    try:
        await producer.partitions_for(topic)
        send = producer.send
        start = time.perf_counter()
        futures = [await send(topic, value) for value in load.values]
        await producer.flush()
        await asyncio.gather(*futures)
        return time.perf_counter() - start
    finally:
        await producer.stop()


async def aiokafka_batch(load: Load, topic: str) -> float:
    producer = _aiokafka_producer(load)
    await producer.start()
    try:
        partitions = sorted(await producer.partitions_for(topic))
        start = time.perf_counter()
        futures: list[asyncio.Future[Any]] = []
        batch = producer.create_batch()
        for value in load.values:
            if batch.append(key=None, value=value, timestamp=None) is None:
                batch.close()
                partition = partitions[len(futures) % len(partitions)]
                futures.append(await producer.send_batch(batch, topic, partition=partition))
                batch = producer.create_batch()
                batch.append(key=None, value=value, timestamp=None)
        batch.close()
        futures.append(await producer.send_batch(batch, topic, partition=partitions[len(futures) % len(partitions)]))
        await producer.flush()
        await asyncio.gather(*futures)
        return time.perf_counter() - start
    finally:
        await producer.stop()


# -- consumers: each returns (seconds from first poll to last record, value bytes seen) ---
def _stalled(client: str, seen: int, load: Load) -> RuntimeError:
    return RuntimeError(f"{client} stalled at {seen} of {load.records} records")


async def strom_poll(load: Load, topic: str) -> tuple[float, int]:
    async with AsyncConsumer({"bootstrap.servers": load.bootstrap, "auto.offset.reset": "earliest",
                              "max.poll.records": BATCH_RECORDS}) as consumer:
        consumer.assign([(topic, partition) for partition in range(PARTITIONS)])
        seen = size = 0
        start = time.perf_counter()
        while seen < load.records:
            records = await consumer.poll(timeout_ms=int(TIMEOUT_S * 1000))
            if not records:
                raise _stalled("Strom poll", seen, load)
            for record in records:
                size += len(record.value or b"")
            seen += len(records)
        return time.perf_counter() - start, size


async def strom_arrow(load: Load, topic: str) -> tuple[float, int]:
    async with AsyncConsumer({"bootstrap.servers": load.bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(topic, partition) for partition in range(PARTITIONS)])
        seen = size = 0
        start = time.perf_counter()
        while seen < load.records:
            batch = await consumer.poll_arrow(timeout_ms=int(TIMEOUT_S * 1000))
            if not batch.num_rows:
                raise _stalled("Strom poll_arrow", seen, load)
            size += pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0
            seen += batch.num_rows
        return time.perf_counter() - start, size


def _confluent_consume(load: Load, topic: str, tuned: bool) -> tuple[float, int]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": load.bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "log.connection.close": False,
        **({"fetch.queue.backoff.ms": 10} if tuned else {}),
    })
    try:
        consumer.list_topics(topic, timeout=TIMEOUT_S)  # connected, like the others' start()
        consumer.assign([confluent_kafka.TopicPartition(topic, partition, confluent_kafka.OFFSET_BEGINNING)
                         for partition in range(PARTITIONS)])
        consume = consumer.consume
        seen = size = 0
        start = time.perf_counter()
        while seen < load.records:
            messages = consume(num_messages=BATCH_RECORDS, timeout=TIMEOUT_S)
            if not messages:
                raise _stalled("confluent-kafka", seen, load)
            for message in messages:
                size += len(message.value() or b"")
            seen += len(messages)
        return time.perf_counter() - start, size
    finally:
        consumer.close()


def confluent_default(load: Load, topic: str) -> tuple[float, int]:
    return _confluent_consume(load, topic, tuned=False)


def confluent_tuned(load: Load, topic: str) -> tuple[float, int]:
    return _confluent_consume(load, topic, tuned=True)


async def aiokafka_getmany(load: Load, topic: str) -> tuple[float, int]:
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=load.bootstrap, auto_offset_reset="earliest",
                                         enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([aiokafka.TopicPartition(topic, partition) for partition in range(PARTITIONS)])
        seen = size = 0
        start = time.perf_counter()
        while seen < load.records:
            batches = await consumer.getmany(timeout_ms=int(TIMEOUT_S * 1000), max_records=BATCH_RECORDS)
            if not batches:
                raise _stalled("aiokafka", seen, load)
            for records in batches.values():
                for record in records:
                    size += len(record.value or b"")
                seen += len(records)
        return time.perf_counter() - start, size
    finally:
        await consumer.stop()


JAVA_BATCH_SIZE = 16_384  # Kafka's (and Strom's) default batch.size
LIBRDKAFKA_BATCH_SIZE = 1_000_000  # librdkafka's default batch.size
Workload = Callable[[Load, str], object]  # returns seconds, (seconds, bytes), or a coroutine of either
PRODUCERS: dict[str, Workload] = {
    "Strom AsyncProducer.produce + flush": strom_produce,
    "Strom AsyncProducer.produce_many (batch API) + flush": strom_produce_many,
    "Strom AsyncProducer.send (futures) + flush": strom_send,
    "Strom sync Producer.send + flush": strom_sync,
    "confluent-kafka produce + poll(0) + flush": confluent_produce,
    # Like for like: each client's default batch.size differs (Java/Strom 16 KiB,
    # librdkafka 1 MB), so each also runs with the other's.
    f"Strom AsyncProducer.produce, batch.size {LIBRDKAFKA_BATCH_SIZE}": lambda load, topic: strom_produce(
        load, topic, LIBRDKAFKA_BATCH_SIZE),
    f"confluent-kafka produce, batch.size {JAVA_BATCH_SIZE}": lambda load, topic: confluent_produce(
        load, topic, JAVA_BATCH_SIZE),
    "aiokafka send (futures) + flush": aiokafka_send,
    "aiokafka create_batch/send_batch + flush": aiokafka_batch,
}
CONSUMERS: dict[str, Workload] = {
    "Strom AsyncConsumer.poll": strom_poll,
    "Strom AsyncConsumer.poll_arrow": strom_arrow,
    "confluent-kafka consume, defaults": confluent_default,
    "confluent-kafka consume, fetch.queue.backoff.ms=10": confluent_tuned,
    "aiokafka getmany": aiokafka_getmany,
}


def _run(workload: Workload, load: Load, topic: str) -> object:
    result = workload(load, topic)
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    return result


async def _create(load: Load, topics: list[str]) -> None:
    async with AsyncAdmin({"bootstrap.servers": load.bootstrap}) as admin:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1) for topic in topics])


async def _end_offsets(load: Load, topic: str) -> int:
    async with AsyncAdmin({"bootstrap.servers": load.bootstrap}) as admin:
        found = await admin.list_offsets({TopicPartition(topic, partition): "latest" for partition in range(PARTITIONS)})
        return sum(result.offset for result in found.values())


@dataclass
class Results:
    seconds: dict[str, list[float]] = field(default_factory=dict)

    def add(self, label: str, seconds: float) -> None:
        self.seconds.setdefault(label, []).append(seconds)

    def rate(self, label: str, records: int, how: Callable[[list[float]], float]) -> float:
        return records / how(self.seconds[label]) if label in self.seconds else float("nan")


def one_round(load: Load, results: Results, number: int, verbose: bool = True) -> None:
    """Every producer, then every consumer on the topic ``AsyncProducer.produce`` wrote."""
    names = {label: load.topic() for label in PRODUCERS}
    asyncio.run(_create(load, list(names.values())))
    for group in (PRODUCERS, CONSUMERS):
        labels = list(group)
        labels = labels[number % len(labels):] + labels[:number % len(labels)]
        for label in labels:
            topic = names.get(label, names["Strom AsyncProducer.produce + flush"])
            result = _run(group[label], load, topic)
            if isinstance(result, tuple):
                seconds, size = result
                if size != load.payload:
                    raise RuntimeError(f"{label}: {size} value bytes, expected {load.payload}")
            else:
                assert isinstance(result, float)
                seconds = result
                written = asyncio.run(_end_offsets(load, topic))
                if written != load.records:
                    raise RuntimeError(f"{label}: {written} records in {topic}, expected {load.records}")
            results.add(label, seconds)
            if verbose:
                print(f"  round {number + 1}: {label:<52} {load.records / seconds:>12,.0f} records/s", flush=True)


def report(load: Load, results: Results) -> None:
    mb = load.payload / load.records / 1e6
    print(f"\n{load.records:,} records of {load.payload // load.records} B, {PARTITIONS} partitions, "
          f"{len(next(iter(results.seconds.values())))} rounds")
    print(f"{'client / workload':<54} {'best rec/s':>12} {'median rec/s':>13} {'best MB/s':>10} {'median MB/s':>12}")
    for title, group in (("produce", PRODUCERS), ("consume", CONSUMERS)):
        print(f"-- {title}")
        for label in group:
            best, median = (results.rate(label, load.records, how) for how in (min, statistics.median))
            print(f"{label:<54} {best:>12,.0f} {median:>13,.0f} {best * mb:>10.1f} {median * mb:>12.1f}")

    def ratio(mine: str, theirs: str) -> str:
        best, median = (results.rate(mine, 1, how) / results.rate(theirs, 1, how) for how in (min, statistics.median))
        return f"{best:.2f}x best, {median:.2f}x median"

    strom = "Strom AsyncProducer.produce + flush"
    arrow = "Strom AsyncConsumer.poll_arrow"
    print("\nGoals (medians decide):")
    for text, mine, theirs, goal in (
        ("Strom producer >= 0.5x confluent-kafka", strom, "confluent-kafka produce + poll(0) + flush", 0.5),
        ("Strom producer >= 2x aiokafka send (per-record API)", strom, "aiokafka send (futures) + flush", 2.0),
        ("Strom producer >= 2x aiokafka send_batch (batch API)", strom, "aiokafka create_batch/send_batch + flush",
         2.0),
        ("same batch.size, 1 MB: Strom producer >= 0.5x confluent-kafka",
         f"Strom AsyncProducer.produce, batch.size {LIBRDKAFKA_BATCH_SIZE}", "confluent-kafka produce + poll(0) + flush",
         0.5),
        ("same batch.size, 16 KiB: Strom producer >= 0.5x confluent-kafka", strom,
         f"confluent-kafka produce, batch.size {JAVA_BATCH_SIZE}", 0.5),
        ("Strom produce_many (batch API) >= 0.5x confluent-kafka", "Strom AsyncProducer.produce_many (batch API) + flush",
         "confluent-kafka produce + poll(0) + flush", 0.5),
        ("poll_arrow >= confluent-kafka consume (fetch.queue.backoff.ms=10)", arrow,
         "confluent-kafka consume, fetch.queue.backoff.ms=10", 1.0),
        ("poll_arrow >= confluent-kafka consume (defaults)", arrow, "confluent-kafka consume, defaults", 1.0),
    ):
        median = results.rate(mine, 1, statistics.median) / results.rate(theirs, 1, statistics.median)
        print(f"  {text}: {ratio(mine, theirs)}: {'met' if median >= goal else 'MISSED'}")


def profile(load: Load, top: int) -> None:
    """One cProfile'd pass of Strom's produce, poll and poll_arrow (this thread only)."""
    topic = load.topic()
    asyncio.run(_create(load, [topic]))
    for label, workload in (("AsyncProducer.produce", strom_produce), ("AsyncConsumer.poll", strom_poll),
                            ("AsyncConsumer.poll_arrow", strom_arrow)):
        profiler = cProfile.Profile()
        profiler.enable()
        _run(workload, load, topic)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
        print(f"\n== cProfile: Strom {label}, {load.records:,} records (top {top} by cumtime)\n{out.getvalue()}")


def _confluent_version() -> str:
    """``version()`` is a string in confluent-kafka 2.16 (a (string, int) pair before)."""
    version: Any = confluent_kafka.version()
    return version if isinstance(version, str) else str(version[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--quick", action="store_true", help="20,000 records: a smoke run")
    parser.add_argument("--profile", action="store_true", help="add a cProfile'd pass of the Strom side")
    parser.add_argument("--profile-top", type=int, default=30)
    args = parser.parse_args()
    records = 20_000 if args.quick else args.records
    print(f"{time.strftime('%Y-%m-%d %H:%M')}  Python {sys.version.split()[0]}, confluent-kafka "
          f"{_confluent_version()} (librdkafka {confluent_kafka.libversion()[0]}), "
          f"aiokafka {aiokafka.__version__}", flush=True)
    with tempfile.TemporaryDirectory(prefix="strom-clients-bench-") as work:
        broker = BrokerProcess(Path(work) / "data").start()
        try:
            load = Load(broker.bootstrap, _values(records, args.size))
            print(f"broker on {broker.bootstrap}; {records:,} records of {args.size} B, "
                  f"{PARTITIONS} partitions, null keys", flush=True)
            results = Results()
            for number in range(args.rounds):
                one_round(load, results, number)
            if results.seconds:
                report(load, results)
            if args.profile:
                profile(load, args.profile_top)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
