"""Metrics benchmark (issue 21): what ``metrics.listener`` costs a broker, and what a scrape costs.

    .venv/bin/python benchmarks/metrics.py [--rounds 3] [--requests 20000] [--records 200000] [--partitions 1000]

1. In-process: one ``Broker`` answers Produce frames (one 100 B record each, v9, acks=-1, as
   benchmarks/produce_request.py makes them) through ``Broker.handle``, alternately with
   ``broker.metrics`` set and None, runs interleaved: µs per request, best and median.
2. Produce with metrics on and off, two ``strom serve`` processes side by side, rounds
   interleaved: ``--requests`` Produce requests of one 100 B record each (confluent-kafka,
   ``batch.num.messages=1``), whose broker CPU over their count is the cost per request, and
   ``--records`` 100 B records batched (linger 5 ms) for throughput. CPU is the broker's own
   (/proc/<pid>/stat), so other load on the shared machine moves it little; the wall-clock
   throughput is reported too, best and median.
3. A scrape of a broker hosting ``--partitions`` partitions (one topic), each with a record
   and a committed offset of one group (so a log-size and a lag series per partition):
   ``GET /metrics`` over HTTP, median and worst of 20, and the number of samples.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from produce_request import TOPIC, produce_frame  # noqa: E402  (benchmarks/, beside this file)

from strom.broker.broker import Broker  # noqa: E402
from strom.broker.config import BrokerConfig  # noqa: E402
from strom.metrics.broker_metrics import BrokerMetrics  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402

VALUE = b"v" * 100


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(root: Path, name: str, metrics: bool) -> BrokerProcess:
    overrides = {"metrics.listener": f"http://127.0.0.1:{free_port()}"} if metrics else {}
    return BrokerProcess(root / name, overrides).start()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


def produce(broker: BrokerProcess, topic: str, count: int, one_per_request: bool) -> tuple[float, float]:
    """(broker CPU seconds, wall seconds) for ``count`` records."""
    settings: dict[str, object] = {"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 5}
    if one_per_request:
        settings.update({"linger.ms": 0, "batch.num.messages": 1})
    producer = Producer(settings)
    producer.produce(topic, VALUE, partition=0)  # connected and warm before the clock starts
    producer.flush(30)
    assert broker.process is not None
    cpu, wall = cpu_seconds(broker.process.pid), time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return cpu_seconds(broker.process.pid) - cpu, time.perf_counter() - wall


def produce_rounds(root: Path, rounds: int, requests: int, records: int) -> None:
    brokers = {"off": start(root, "off", False), "on": start(root, "on", True)}
    try:
        for broker in brokers.values():
            create_topic(broker.bootstrap, "bench", 1)
        cpu_per_request: dict[str, list[float]] = {name: [] for name in brokers}
        rate: dict[str, list[float]] = {name: [] for name in brokers}
        cpu_per_record: dict[str, list[float]] = {name: [] for name in brokers}
        for round_index in range(rounds):
            order = list(brokers.items()) if round_index % 2 == 0 else list(reversed(brokers.items()))
            for name, broker in order:
                cpu, _ = produce(broker, "bench", requests, one_per_request=True)
                cpu_per_request[name].append(cpu / requests * 1e6)
                cpu, wall = produce(broker, "bench", records, one_per_request=False)
                rate[name].append(records / wall)
                cpu_per_record[name].append(cpu / records * 1e6)
        print(f"produce, {rounds} rounds interleaved (best / median):")
        for name in brokers:
            print(f"  metrics {name:3}: {min(cpu_per_request[name]):6.1f} / {statistics.median(cpu_per_request[name]):6.1f}"
                  f" µs broker CPU per one-record Produce; {max(rate[name]):9,.0f} / {statistics.median(rate[name]):9,.0f}"
                  f" records/s batched; {min(cpu_per_record[name]):5.2f} / {statistics.median(cpu_per_record[name]):5.2f}"
                  " µs broker CPU per batched record")
        off, on = statistics.median(cpu_per_request["off"]), statistics.median(cpu_per_request["on"])
        print(f"  per request: metrics on costs {on - off:+.1f} µs of broker CPU ({off / on:.3f}x the requests per CPU second)")
        off, on = statistics.median(cpu_per_record["off"]), statistics.median(cpu_per_record["on"])
        print(f"  batched: {off / on:.3f}x the records per broker CPU second; "
              f"{statistics.median(rate['on']) / statistics.median(rate['off']):.3f}x the wall-clock rate")
    finally:
        for broker in brokers.values():
            broker.stop()


def scrape_partitions(root: Path, partitions: int) -> None:
    broker = start(root, "scrape", True)
    try:
        create_topic(broker.bootstrap, "wide", partitions)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for index in range(partitions):
            producer.produce("wide", VALUE, partition=index)
        assert producer.flush(120) == 0
        del producer
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "scraped", "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("wide", index, 0) for index in range(partitions)], asynchronous=False)
        consumer.close()
        url = f"{broker.overrides['metrics.listener']}/metrics"
        assert broker.process is not None
        with urllib.request.urlopen(url, timeout=60) as response:  # the first builds the children's caches
            text = response.read()
        samples = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
        times, scrapes = [], 50
        cpu = cpu_seconds(broker.process.pid)
        for _ in range(scrapes):
            started = time.perf_counter()
            with urllib.request.urlopen(url, timeout=60) as response:
                response.read()
            times.append((time.perf_counter() - started) * 1000)
        cpu_ms = (cpu_seconds(broker.process.pid) - cpu) / scrapes * 1000
        print(f"scrape of {partitions} partitions ({samples} samples, {len(text) / 1024:.0f} KiB): broker CPU "
              f"{cpu_ms:.1f} ms per scrape; wall (HTTP GET to last byte) median {statistics.median(times):.1f} ms, "
              f"worst {max(times):.1f} ms of {scrapes}")
    finally:
        broker.stop()


async def in_process(root: Path, runs: int, requests: int) -> None:
    broker = Broker(BrokerConfig.from_properties({"log.dirs": str(root / "in-process")}))
    broker.startup()
    broker.admin_manager.create_topic(TOPIC, 1)
    metrics = BrokerMetrics()
    template = produce_frame(9, -1, -1, 1)
    timings: dict[str, list[float]] = {"off": [], "on": []}
    try:
        for run in range(runs * 2 + 2):  # the first two warm up
            name = "on" if run % 2 else "off"
            broker.metrics = metrics if name == "on" else None
            frames = [bytes(bytearray(template)) for _ in range(requests)]
            started = time.process_time()
            for frame in frames:
                await broker.handle(frame)
            if run >= 2:
                timings[name].append((time.process_time() - started) / requests * 1e6)
    finally:
        await broker.shutdown()
    print(f"Broker.handle, one-record Produce v9, {requests} requests x {runs} runs each (CPU µs, best / median):")
    for name, values in timings.items():
        print(f"  metrics {name:3}: {min(values):5.1f} / {statistics.median(values):5.1f}")
    off, on = statistics.median(timings["off"]), statistics.median(timings["on"])
    print(f"  metrics on: {on - off:+.1f} µs a request, {off / on:.3f}x the requests per CPU second")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--partitions", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="strom-metrics-bench-") as tmp:
        root = Path(tmp)
        asyncio.run(in_process(root, args.rounds * 2, args.requests))
        scrape_partitions(root, args.partitions)
        produce_rounds(root, args.rounds, args.requests, args.records)


if __name__ == "__main__":
    main()
