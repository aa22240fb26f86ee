"""The process the exactly-once crash test kills: a ParallelConsumer writing value -> f(value).

Reads INPUT, writes ``b"f:" + value`` with the same key to the same partition of OUTPUT.
Mode ``eos`` uses ``ExactlyOnceParallelConsumer`` (outputs and offsets in one
transaction, a stable ``transactional.id``); mode ``alo`` is the at-least-once
``ParallelConsumer`` with a plain producer — the control that shows the test can see
duplicates. Every processing is appended to SINK as ``P run partition offset`` and every
acknowledged commit as ``C run``, one ``write`` each on an O_APPEND descriptor.
SIGTERM closes gracefully.

Run as ``python -m tests.client.alo_exactly_once_driver BOOTSTRAP INPUT OUTPUT GROUP SINK RUN MODE``.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import time
from collections.abc import Mapping

from strom.alo import ParallelConsumer
from strom.alo.exactly_once import ExactlyOnceParallelConsumer, OutputRecord
from strom.client.fetcher import ConsumerRecord
from strom.client.producer import AsyncProducer

WORKERS = 6


def main(bootstrap: str, source: str, output: str, group: str, sink: str, run: int, mode: str) -> None:
    fd = os.open(sink, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    rng = random.Random(os.getpid())

    def transform(record: ConsumerRecord) -> OutputRecord:
        time.sleep(0.01 + rng.random() * 0.01)  # simulated work, finishing out of order across partitions
        os.write(fd, f"P {run} {record.partition} {record.offset}\n".encode())
        return OutputRecord(output, b"f:" + (record.value or b""), record.key, partition=record.partition)

    def committed(points: Mapping[tuple[str, int], tuple[int, str]]) -> None:
        os.write(fd, f"C {run}\n".encode())

    async def serve() -> None:
        consumer_config = {
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "group.instance.id": "eos-member", "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500,
        }
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        settings = {"ordering": "partition", "max_concurrency": WORKERS, "commit_interval_ms": 100,
                    "retry_backoff_ms": 10}
        if mode == "eos":
            def handle(record: ConsumerRecord) -> list[OutputRecord]:
                return [transform(record)]
            consumer: ParallelConsumer = ExactlyOnceParallelConsumer(
                consumer_config, handle, settings, transactional_id="eos-driver", on_commit=committed)
            producer = None
        else:
            producer = await AsyncProducer({"bootstrap.servers": bootstrap}).start()

            def handle_alo(record: ConsumerRecord) -> None:
                out = transform(record)
                asyncio.run_coroutine_threadsafe(
                    producer.send_and_wait(out.topic, out.value, out.key, partition=out.partition), loop).result()
            consumer = ParallelConsumer(consumer_config, handle_alo, settings, on_commit=committed)
        async with consumer:
            consumer.subscribe([source])
            await consumer.start()
            print("started", flush=True)
            await stop.wait()
        if producer is not None:
            await producer.close()

    asyncio.run(serve())
    os.close(fd)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), sys.argv[7])
