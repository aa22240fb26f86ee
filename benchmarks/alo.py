"""The concurrent at-least-once consumer (``strom.alo``): speed-up on slow records, and
its CPU cost per record.

    .venv/bin/python benchmarks/alo.py [--records 800] [--overhead-records 100000] [--quick]
                                       [--profile]

One ``strom serve`` (``tests/support/broker_process.py``, a fresh data dir). A topic of 8
partitions holds the records (1,000 distinct keys, 100 B values); each consumer reads it
from the start in a group of its own and commits what it processed.

* **Slow records**: each record costs 10 ms of simulated I/O (``time.sleep`` on worker
  threads, ``asyncio.sleep`` for async handlers). Timed from ``start`` until the last
  record is done, so the group join and first fetch are included.
  - *sequential*: ``AsyncConsumer.poll``, handle each record in turn, ``commit`` per poll;
  - *batch pool*: the common hand-made pattern, one poll's records spread over a
    ``ThreadPoolExecutor`` of 8, wait for all, commit (a slow record holds up the batch);
  - ``ParallelConsumer`` with 8 and 64 workers, threads and async, ``key`` ordering.
  Timed from the first record reaching a handler until the last one is done (the group
  join, the same for all, is left out). The goal: 8 workers >= 7x sequential.
* **Overhead**: a no-op handler over ``--overhead-records`` records; CPU seconds of the
  process (``time.process_time``: the broker runs in its own process and is not
  counted) per record, for ``ParallelConsumer`` (threads and async) and for a bare
  ``AsyncConsumer.poll`` loop over the same records. The goal: <= 20 µs per record.

``--profile`` adds a cProfile'd pass of the async no-op run.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import cProfile
import io
import pstats
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from strom.alo import ParallelConsumer
from strom.client.admin import AsyncAdmin
from strom.client.admin_types import NewTopic
from strom.client.consumer import AsyncConsumer
from strom.client.fetcher import ConsumerRecord
from strom.client.producer import AsyncProducer
from tests.support.broker_process import BrokerProcess

PARTITIONS = 8
IO_SECONDS = 0.010
_groups = iter(range(1_000_000))


async def make_topic(bootstrap: str, name: str, records: int) -> None:
    async with AsyncAdmin({"bootstrap.servers": bootstrap}) as admin:
        await admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    value = b"x" * 100
    async with AsyncProducer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(records):
            await producer.produce(name, value, f"key-{i % 1000}".encode())
        await producer.flush()


def consumer_config(bootstrap: str, **extra: object) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "group.id": f"bench-{next(_groups)}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra}


async def sequential(bootstrap: str, topic: str, records: int) -> tuple[float, float]:
    async with AsyncConsumer(consumer_config(bootstrap)) as consumer:
        consumer.subscribe([topic])
        start, cpu = 0.0, 0.0
        done = 0
        while done < records:
            batch = await consumer.poll(timeout_ms=100)
            if batch and not done:
                start, cpu = time.perf_counter(), time.process_time()
            for _ in batch[:records - done]:  # the topic holds more: stop at ``records``
                time.sleep(IO_SECONDS)
            done += len(batch)
            if batch:
                await consumer.commit()
        return time.perf_counter() - start, time.process_time() - cpu


async def batch_pool(bootstrap: str, topic: str, records: int, workers: int = 8) -> tuple[float, float]:
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        async with AsyncConsumer(consumer_config(bootstrap)) as consumer:
            consumer.subscribe([topic])
            start, cpu = 0.0, 0.0
            done = 0
            loop = asyncio.get_running_loop()
            while done < records:
                batch = await consumer.poll(timeout_ms=100)
                if batch and not done:
                    start, cpu = time.perf_counter(), time.process_time()
                await asyncio.gather(*(loop.run_in_executor(pool, time.sleep, IO_SECONDS) for _ in batch))
                done += len(batch)
                if batch:
                    await consumer.commit()
            return time.perf_counter() - start, time.process_time() - cpu


async def parallel(bootstrap: str, topic: str, records: int, workers: int,
                   handler: Callable[[ConsumerRecord], Any], ordering: str = "key") -> tuple[float, float]:
    consumer = ParallelConsumer(consumer_config(bootstrap), handler, ordering=ordering,
                                max_concurrency=workers, max_buffered_records_per_partition=5_000)
    async with consumer:
        consumer.subscribe([topic])
        await consumer.start()
        while not consumer.metrics().in_flight:  # the join, the first fetch
            await asyncio.sleep(0.0005)
        start, cpu = time.perf_counter(), time.process_time()
        while consumer.metrics().completed < records:
            await asyncio.sleep(0.002)
        elapsed, used = time.perf_counter() - start, time.process_time() - cpu
        await consumer.commit()
    return elapsed, used


async def bare_poll(bootstrap: str, topic: str, records: int) -> tuple[float, float]:
    async with AsyncConsumer(consumer_config(bootstrap)) as consumer:
        consumer.subscribe([topic])
        done = len(await consumer.poll(timeout_ms=10_000))  # the join, the first fetch
        start, cpu = time.perf_counter(), time.process_time()
        while done < records:
            done += len(await consumer.poll(timeout_ms=100))
        return time.perf_counter() - start, time.process_time() - cpu


def blocking_io(record: ConsumerRecord) -> None:
    time.sleep(IO_SECONDS)


async def async_io(record: ConsumerRecord) -> None:
    await asyncio.sleep(IO_SECONDS)


def blocking_noop(record: ConsumerRecord) -> None:
    pass


async def async_noop(record: ConsumerRecord) -> None:
    pass


def best(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return min(runs, key=lambda r: r[0])


async def measure(rounds: int, label: str, make: Callable[[], Awaitable[tuple[float, float]]]) -> tuple[float, float]:
    results = [await make() for _ in range(rounds)]
    return best(results)


async def run(args: argparse.Namespace, bootstrap: str) -> int:
    slow, fast = "alo-slow", "alo-fast"
    await make_topic(bootstrap, slow, args.records)
    await make_topic(bootstrap, fast, args.overhead_records)
    n, m = args.sequential_records, args.records
    await sequential(bootstrap, slow, 1)  # warm-up: the broker creates __consumer_offsets
    print(f"Slow records: {IO_SECONDS * 1000:.0f} ms of simulated I/O each; {PARTITIONS} partitions, key ordering")
    print(f"{'consumer':38} {'records':>8} {'seconds':>8} {'records/s':>10} {'speed-up':>9}")
    seq_time, _ = await measure(1, "sequential", lambda: sequential(bootstrap, slow, n))
    seq_rate = n / seq_time
    print(f"{'sequential (poll, handle, commit)':38} {n:>8} {seq_time:>8.2f} {seq_rate:>10.0f} {1.0:>8.1f}x")
    rows: list[tuple[str, int, Callable[[], Awaitable[tuple[float, float]]]]] = [
        ("batch pool, 8 threads (peer pattern)", m, lambda: batch_pool(bootstrap, slow, m)),
        ("ParallelConsumer, 8 threads", m, lambda: parallel(bootstrap, slow, m, 8, blocking_io)),
        ("ParallelConsumer, 8 async tasks", m, lambda: parallel(bootstrap, slow, m, 8, async_io)),
        ("ParallelConsumer, 64 threads", m, lambda: parallel(bootstrap, slow, m, 64, blocking_io)),
        ("ParallelConsumer, 64 async tasks", m, lambda: parallel(bootstrap, slow, m, 64, async_io)),
    ]
    speedups: dict[str, float] = {}
    for label, count, make in rows:
        elapsed, _ = await measure(args.rounds, label, make)
        rate = count / elapsed
        speedups[label] = rate / seq_rate
        print(f"{label:38} {count:>8} {elapsed:>8.2f} {rate:>10.0f} {rate / seq_rate:>8.1f}x")

    k = args.overhead_records
    print(f"\nOverhead: no-op handler, {k} records; CPU of this process (the broker is another)")
    print(f"{'consumer':38} {'seconds':>8} {'records/s':>10} {'CPU µs/rec':>11}")
    overhead: dict[str, float] = {}
    for label, make in [
        ("bare AsyncConsumer.poll loop", lambda: bare_poll(bootstrap, fast, k)),
        ("ParallelConsumer, 8 threads, no-op", lambda: parallel(bootstrap, fast, k, 8, blocking_noop)),
        ("ParallelConsumer, 8 async, no-op", lambda: parallel(bootstrap, fast, k, 8, async_noop)),
        ("ParallelConsumer, 8 async, unordered", lambda: parallel(bootstrap, fast, k, 8, async_noop, "unordered")),
    ]:
        elapsed, cpu = await measure(args.rounds, label, make)
        overhead[label] = cpu / k * 1e6
        print(f"{label:38} {elapsed:>8.2f} {k / elapsed:>10.0f} {cpu / k * 1e6:>11.1f}")
    base = overhead["bare AsyncConsumer.poll loop"]
    print("\nGoals")
    eight = min(speedups["ParallelConsumer, 8 threads"], speedups["ParallelConsumer, 8 async tasks"])
    print(f"  8 workers >= 7x sequential: {eight:.1f}x  {'met' if eight >= 7 else 'MISSED'}")
    worst = max(v for name, v in overhead.items() if name.startswith("ParallelConsumer"))
    print(f"  overhead <= 20 µs/record: {worst:.1f} µs in all (poll included), {worst - base:.1f} µs "
          f"above a bare poll loop  {'met' if worst <= 20 else 'MISSED'}")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        await parallel(bootstrap, fast, k, 8, async_noop)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.profile_top)
        print(out.getvalue())
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_600, help="slow records per parallel run")
    parser.add_argument("--sequential-records", type=int, default=200, help="slow records for the sequential run")
    parser.add_argument("--overhead-records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3, help="runs per figure; the best is shown")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few records, one round")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-top", type=int, default=25)
    args = parser.parse_args()
    if args.quick:
        args.records, args.sequential_records, args.overhead_records, args.rounds = 200, 20, 2_000, 1
    with tempfile.TemporaryDirectory() as work:
        broker = BrokerProcess(Path(work) / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
        try:
            return asyncio.run(run(args, broker.bootstrap))
        finally:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
