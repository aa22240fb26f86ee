"""The consumer process the ALO crash test kills: a ParallelConsumer with 8 worker threads.

Each processed record is appended to a sink file as ``P incarnation partition offset key``
(one ``write`` on an O_APPEND descriptor: a line is whole or absent after a SIGKILL), and
each commit the broker acknowledged as ``C incarnation partition offset metadata``, so the
test can tell which records a commit covered when the process died. SIGTERM closes the
consumer gracefully (commit what is done, leave).

Run as ``python -m tests.client.alo_crash_consumer BOOTSTRAP TOPIC GROUP ORDERING SINK INCARNATION``.
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
from strom.client.fetcher import ConsumerRecord

WORKERS = 8


def main(bootstrap: str, topic: str, group: str, ordering: str, sink: str, incarnation: int) -> None:
    fd = os.open(sink, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    rng = random.Random(os.getpid())

    def handle(record: ConsumerRecord) -> None:
        time.sleep(rng.random() * 0.003)  # simulated I/O, finishing out of order
        key = (record.key or b"-").decode()
        os.write(fd, f"P {incarnation} {record.partition} {record.offset} {key}\n".encode())

    def committed(points: Mapping[tuple[str, int], tuple[int, str]]) -> None:
        lines = "".join(f"C {incarnation} {tp[1]} {offset} {metadata or '-'}\n"
                        for tp, (offset, metadata) in points.items())
        os.write(fd, lines.encode())

    async def run() -> None:
        consumer_config = {
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "group.instance.id": "alo-crash-member",
            "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500,
        }
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        async with ParallelConsumer(consumer_config, handle, ordering=ordering, max_concurrency=WORKERS,
                                    commit_interval_ms=50, on_commit=committed) as consumer:
            consumer.subscribe([topic])
            await consumer.start()
            print("started", flush=True)
            await stop.wait()

    asyncio.run(run())
    os.close(fd)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))
