"""Producer accumulator throughput: records/s through ``append`` + ``drain``, no network.

Rows: Strom's ``RecordAccumulator`` with no per-record future (the fast path), with a
``FutureRecordMetadata`` per record (all awaited at the end), with a callback per
record, and with lz4; as the peer, confluent-kafka's ``Producer.produce`` into a
producer with no reachable broker (librdkafka's partitioner and queue, the C client's
per-record cost seen from Python; its batching happens later, in its own threads).

    .venv/bin/python -m benchmarks.accumulator [--records 1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable

import confluent_kafka

from strom.client.accumulator import RecordAccumulator
from strom.client.producer_batch import FutureRecordMetadata, RecordMetadata
from strom.protocol.compression import CompressionType

VALUE = b"v" * 100
PARTITIONS = 8
DRAIN_EVERY = 4096  # records between the "sender's" drains


async def strom(
    records: int, *, futures: bool, callback: bool, compression: CompressionType
) -> float:
    accumulator = RecordAccumulator(linger_ms=0, compression=compression)
    delivered = 0

    def on_delivery(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        nonlocal delivered
        delivered += 1

    pending: list[FutureRecordMetadata] = []
    offsets = [0] * PARTITIONS

    def send_ready() -> None:
        """A sender that is never the bottleneck: every sendable batch, answered at once."""
        while True:
            ready, _ = accumulator.ready()
            drained = accumulator.drain(ready, 1 << 30)
            if not drained:
                return
            for (_, partition), batch in drained.items():
                batch.complete(offsets[partition])
                offsets[partition] += batch.record_count

    append = accumulator.append
    start = time.perf_counter()
    for i in range(records):
        future = await append(
            "bench", i % PARTITIONS, None, VALUE,
            callback=on_delivery if callback else None, want_future=futures,
        )
        if future is not None:
            pending.append(future)
        if i % DRAIN_EVERY == 0:
            send_ready()
    accumulator.begin_flush()
    while accumulator.has_undrained():
        send_ready()
    await accumulator.await_flush_completion()
    if pending:
        for future in pending:
            await future
        assert pending[-1].result().offset == offsets[(records - 1) % PARTITIONS] - 1
    elapsed = time.perf_counter() - start
    assert sum(offsets) == records and (not callback or delivered == records)
    return records / elapsed


def confluent(records: int) -> float:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": "127.0.0.1:1",  # nothing listens: records stay queued
        "queue.buffering.max.messages": records + 1,
        "queue.buffering.max.kbytes": 2_000_000,
        "message.timeout.ms": 600_000,
        "log_level": 0,
    })
    produce = producer.produce
    start = time.perf_counter()
    for i in range(records):
        produce("bench", VALUE, partition=i % PARTITIONS)
    elapsed = time.perf_counter() - start
    producer.purge()
    producer.flush(0)
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    records = args.records
    none, lz4 = CompressionType.NONE, CompressionType.LZ4
    cases: list[tuple[str, Callable[[], float]]] = [
        ("strom append+drain, no per-record future",
         lambda: asyncio.run(strom(records, futures=False, callback=False, compression=none))),
        ("strom append+drain, a future per record",
         lambda: asyncio.run(strom(records, futures=True, callback=False, compression=none))),
        ("strom append+drain, a callback per record",
         lambda: asyncio.run(strom(records, futures=False, callback=True, compression=none))),
        ("strom append+drain, lz4, no future",
         lambda: asyncio.run(strom(records, futures=False, callback=False, compression=lz4))),
        ("confluent-kafka produce() (queue only, peer)", lambda: confluent(records)),
    ]
    print(f"{records:,} records of {len(VALUE)} bytes, {PARTITIONS} partitions, "
          f"best of {args.repeats}")
    for label, measure in cases:
        rate = max(measure() for _ in range(args.repeats))
        print(f"  {label:<48} {rate:>12,.0f} records/s")


if __name__ == "__main__":
    main()
