"""The broker's CPU cost per small Produce request, measured in-process.

    .venv/bin/python benchmarks/produce_request.py [--requests 50000] [--runs 5] [--profile]

A ``Broker`` on a temporary data dir (no sockets) answers captured-style Produce frames
through ``Broker.handle(frame)``: decode, ``Log.append`` (CRC, offsets, producer state,
pwrite) and the encoded answer. Each frame carries one v2 batch of one 100-byte record,
acks=-1, as librdkafka sends at linger 0. Four workloads: Produce v9 (flexible) and v7,
each from a plain and from an idempotent producer (increasing sequences, so every
request goes through duplicate detection and sequence validation).

Frames are built before the clock starts. The runs of the workloads are interleaved
(run 1 of each, then run 2 …) so that a slow spell of the machine hits all of them;
each figure is µs per request, best and median of the runs. ``--profile`` adds a
cProfile top-20 (by own time) of one more run of each workload.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from strom.broker.broker import Broker
from strom.broker.config import BrokerConfig
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from strom.protocol.messages.produce_response import ProduceResponse
from strom.protocol.primitives import Records
from strom.protocol.records.v2 import RecordBatchBuilder

TOPIC = "bench"
VALUE = bytes(range(100))
PRODUCER_EPOCH = 0
CHUNK = 500  # frames made at a time, just before they are timed


@dataclass(frozen=True)
class Workload:
    name: str
    api_version: int
    idempotent: bool


WORKLOADS = (
    Workload("v9 plain", 9, False),
    Workload("v9 idempotent", 9, True),
    Workload("v7 plain", 7, False),
    Workload("v7 idempotent", 7, True),
)


def produce_frame(api_version: int, producer_id: int, sequence: int, correlation_id: int) -> bytes:
    """One Produce request frame, size prefix stripped (as the server hands it over)."""
    builder = RecordBatchBuilder(
        producer_id=producer_id,
        producer_epoch=PRODUCER_EPOCH if producer_id >= 0 else -1,
        base_sequence=sequence,
    )
    builder.append(None, VALUE)
    request = ProduceRequest(
        acks=-1, timeout_ms=30_000,
        topic_data=(TopicProduceData(TOPIC, (PartitionProduceData(0, bytes(builder.build())),)),),
    )
    return encode_request(request, api_version, correlation_id, "rdkafka")[4:]


class Frames:
    """Frames for a workload, made in chunks just before they are answered.

    A server answers a frame it has just copied out of its receive buffer, so the
    bytes are in the CPU's cache; a chunk of ``CHUNK`` frames made just before it is
    timed is too, where 50,000 frames made up front would not be. Idempotent runs use
    a fresh producer id each, with sequences from 0.
    """

    def __init__(self) -> None:
        self._next_producer_id = 1000

    def chunks(self, workload: Workload, count: int) -> Iterator[list[bytes]]:
        producer_id, sequence = -1, -1
        if workload.idempotent:
            producer_id, sequence = self._next_producer_id, 0
            self._next_producer_id += 1
        template = produce_frame(workload.api_version, -1, -1, 1)
        for start in range(0, count, CHUNK):
            size = min(CHUNK, count - start)
            if not workload.idempotent:  # distinct objects, as the server's are
                yield [bytes(bytearray(template)) for _ in range(size)]
                continue
            yield [produce_frame(workload.api_version, producer_id, sequence + number, number)
                   for number in range(size)]
            sequence += size


async def run_once(broker: Broker, frames: Frames, workload: Workload, count: int,
                   profiler: cProfile.Profile | None = None) -> float:
    """Seconds per request for answering ``count`` frames of ``workload`` in turn;
    ``profiler`` (if given) runs while the frames are answered, not while they are made."""
    handle = broker.handle
    elapsed = 0.0
    for chunk in frames.chunks(workload, count):
        if profiler is not None:
            profiler.enable()
        start = time.perf_counter()
        for frame in chunk:
            await handle(frame)
        elapsed += time.perf_counter() - start
        if profiler is not None:
            profiler.disable()
    return elapsed / count


def check_answer(response: list[Records] | None, api_version: int) -> None:
    """The benchmark must time successful appends: error code 0 in every answer."""
    assert response is not None
    frame = b"".join(bytes(chunk) for chunk in response)[4:]  # type: ignore[arg-type]
    _, body = decode_response(frame, ProduceRequest.API_KEY or 0, api_version)
    assert isinstance(body, ProduceResponse)
    for topic in body.responses:
        for partition in topic.partition_responses:
            if partition.error_code != 0:
                raise SystemExit(f"produce failed: {partition}")


async def measure(args: argparse.Namespace, data_dir: str) -> None:
    config = replace(BrokerConfig(), log_dirs=data_dir)
    broker = Broker(config)
    broker.startup()
    broker.admin_manager.create_topic(TOPIC, 1)
    frames = Frames()
    try:
        for workload in WORKLOADS:  # warm up, and check that appends succeed
            for chunk in frames.chunks(workload, 3):
                for frame in chunk:
                    check_answer(await broker.handle(frame), workload.api_version)
        timings: dict[str, list[float]] = {workload.name: [] for workload in WORKLOADS}
        for _ in range(args.runs):
            for workload in WORKLOADS:
                timings[workload.name].append(
                    await run_once(broker, frames, workload, args.requests))
        print(f"Produce request, 1 record of {len(VALUE)} B, acks=-1, Broker.handle in-process: "
              f"{args.requests} requests x {args.runs} runs")
        print(f"{'workload':<16} {'best µs':>8} {'median µs':>10}")
        for workload in WORKLOADS:
            values = timings[workload.name]
            print(f"{workload.name:<16} {min(values) * 1e6:8.1f} {statistics.median(values) * 1e6:10.1f}")
        if args.profile:
            await profile(broker, frames, args.requests)
    finally:
        await broker.shutdown()


async def profile(broker: Broker, frames: Frames, count: int) -> None:
    for workload in WORKLOADS:
        profiler = cProfile.Profile()
        await run_once(broker, frames, workload, count, profiler)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(os.environ.get("PROFILE_SORT", "tottime")).print_stats(int(os.environ.get("PROFILE_ROWS", "20")))
        print(f"\n--- cProfile, {workload.name}, {count} requests, by own time ---")
        print(_trim(out.getvalue()))


def _trim(report: str) -> str:
    """Drop pstats' preamble lines up to the table."""
    lines = report.splitlines()
    for number, line in enumerate(lines):
        if line.lstrip().startswith("ncalls"):
            return "\n".join(lines[number - 2 :])
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=50_000, help="requests per run")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="add a cProfile top-20")
    parser.add_argument("--dir", help="parent of the temporary data dir (default: the system's)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="strom-produce-bench-", dir=args.dir) as data_dir:
        asyncio.run(measure(args, data_dir))


if __name__ == "__main__":
    main()
