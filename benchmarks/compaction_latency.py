"""Does the log cleaner slow produce down? Produce latency with the cleaner working vs off.

    .venv/bin/python benchmarks/compaction_latency.py [--records 6000000] [--keys 2000000]
                                                       [--seconds 10] [--rate 500]

The cleaner runs in threads of the broker process and shares its GIL with the event
loop, so "never blocks produce or fetch" (no lock is shared) is not the whole story:
its Python parts take turns with the request path. This measures what a client sees.

Two runs of ``strom serve`` (fresh data dirs), identical but for ``log.cleaner.enable``:

1. fill a compacted topic (64 MiB segments, ``min.cleanable.dirty.ratio=1.0``, so it is
   never cleanable yet) with ``--records`` keyed records over ``--keys`` keys (100 B
   values) with confluent-kafka;
2. set its ``min.cleanable.dirty.ratio`` to 0.01 (IncrementalAlterConfigs): with the
   cleaner on, cleaning starts within ``log.cleaner.backoff.ms`` (100 ms here);
3. at once, for ``--seconds``, a second confluent-kafka producer sends one 100 B record
   every ``1/--rate`` s to another (delete-policy) topic with ``acks=1``, ``linger.ms=0``,
   and records each delivery latency (send to delivery callback);
4. the broker's log says what the cleaner did and when.

Prints p50/p99/p99.9/max per run. No peer: Kafka's cleaner runs in JVM threads without a
global lock, and no Kafka broker is available on this machine.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import confluent_kafka
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from benchmarks._fill import fill_topic
from tests.support.broker_process import BrokerProcess


def fill(bootstrap: str, topic: str, records: int, keys: int) -> None:
    rng = random.Random(2)
    values = [rng.randbytes(100) for _ in range(256)]
    fill_topic(bootstrap, topic, records, value=lambda i: values[i & 255],
               key=lambda i: (i % keys).to_bytes(8, "big"), partition=lambda i: 0)


def probe(bootstrap: str, topic: str, seconds: float, rate: float) -> list[tuple[float, float]]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1,
                                         "enable.idempotence": False})
    latencies: list[tuple[float, float]] = []  # (wall-clock send time, seconds to delivery)
    offset = time.time() - time.perf_counter()

    def delivered(error: object, _: object, sent: float) -> None:
        if error is None:
            latencies.append((sent + offset, time.perf_counter() - sent))

    producer.produce(topic, b"warm-up")
    producer.flush()
    interval = 1 / rate
    start = time.perf_counter()
    next_at = start
    while time.perf_counter() - start < seconds:
        sent = time.perf_counter()
        producer.produce(topic, b"x" * 100, on_delivery=lambda e, m, s=sent: delivered(e, m, s))
        next_at += interval
        while (wait := next_at - time.perf_counter()) > 0:
            producer.poll(wait)
    producer.flush()
    return latencies


def run(cleaner: bool, args: argparse.Namespace) -> tuple[list[float], str]:
    with tempfile.TemporaryDirectory() as scratch:
        broker = BrokerProcess(Path(scratch) / "data", {
            "log.cleaner.enable": str(cleaner).lower(), "log.cleaner.backoff.ms": "100"}).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for future in admin.create_topics([
                NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact", "segment.bytes": str(64 << 20),
                                                    "min.cleanable.dirty.ratio": "1.0"}),
                NewTopic("probe", 1, 1),
            ]).values():
                future.result()
            began = time.monotonic()
            fill(broker.bootstrap, "compacted", args.records, args.keys)
            print(f"  filled {args.records:,} records in {time.monotonic() - began:.1f} s", flush=True)
            time.sleep(1)
            # Now make the log cleanable (it was filled at a dirty ratio it never reaches):
            # in the run with the cleaner on, cleaning starts within log.cleaner.backoff.ms.
            resource = ConfigResource(ResourceType.TOPIC, "compacted", incremental_configs=[
                ConfigEntry("min.cleanable.dirty.ratio", "0.01",
                            incremental_operation=AlterConfigOpType.SET)])
            for future in admin.incremental_alter_configs([resource]).values():
                future.result()
            latencies = probe(broker.bootstrap, "probe", args.seconds, args.rate)
        finally:
            broker.stop()
        cleaned = [line.strip() for line in broker.log_path.read_text().splitlines() if "compacted Log(" in line]
        return latencies, cleaned


def cleaning_windows(lines: list[str]) -> list[tuple[float, float]]:
    """(start, end) wall-clock times of each cleaning, from the cleaner's log lines."""
    windows = []
    for line in lines:
        stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        seconds = float(re.search(r"; ([0-9.]+) s \(", line).group(1))  # type: ignore[union-attr]
        windows.append((stamp - seconds, stamp))
    return windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=6_000_000)
    parser.add_argument("--keys", type=int, default=2_000_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=500.0)
    args = parser.parse_args()
    rows = []

    def row(name: str, latencies: list[float]) -> None:
        ms = sorted(x * 1000 for x in latencies)
        if not ms:
            rows.append((name, 0, 0.0, 0.0, 0.0, 0.0))
            return

        def q(p: float) -> float:
            return ms[min(len(ms) - 1, int(p * len(ms)))]
        rows.append((name, len(ms), statistics.median(ms), q(0.99), q(0.999), ms[-1]))

    for cleaner in (False, True):
        print(f"cleaner {'on' if cleaner else 'off'}:", flush=True)
        latencies, lines = run(cleaner, args)
        for line in lines:
            print(f"    {line}", flush=True)
        row(f"cleaner {'on' if cleaner else 'off'}, whole window", [x for _, x in latencies])
        if cleaner:
            windows = [w for w in cleaning_windows(lines) if w[1] >= latencies[0][0]] if latencies else []
            row("cleaner on, sends while it cleaned",
                [x for t, x in latencies if any(a <= t <= b for a, b in windows)])
    print("\n| run | deliveries | p50 ms | p99 ms | p99.9 ms | max ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, n, p50, p99, p999, top in rows:
        print(f"| {name} | {n:,} | {p50:.2f} | {p99:.2f} | {p999:.2f} | {top:.2f} |")


if __name__ == "__main__":
    main()
