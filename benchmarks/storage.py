"""Storage benchmark: Strom's log append vs a raw os.write, small appends, reads, recovery.

    .venv/bin/python benchmarks/storage.py [--size 1GiB] [--dir /path]

One run measures, on the same disk:
1. raw: ``os.write`` of ``--size`` bytes in 1 MiB chunks to a fresh file, then one
   fdatasync — the limit on this machine;
2. append: ``Log.append`` of the same bytes as 1 MiB v2 batches (default config:
   1 GiB segments, no flush policy), then ``flush()`` — goal >= 0.8x raw;
3. appends of 1 KiB batches one at a time (``--small-count``);
4. random reads by offset over the 1 KiB-batch log: ``Log.read`` latency p50/p99
   (what the fetch path needs before ``os.sendfile``);
5. recovery: reopen the big log as after an unclean stop with no recovery point
   (every batch re-validated: length, magic, CRC) — goal < 5 s for 1 GiB.
Page cache is not dropped, so 5 measures CPU-bound validation over cached pages.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

from strom.protocol.records import build_record_batch
from strom.storage import FileSystem, Log, LogConfig, LogLoader

MiB = 1 << 20


def parse_size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.lower().removesuffix("ib").removesuffix("b")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def make_batch(total_bytes: int, record_bytes: int) -> bytearray:
    count = max(1, total_bytes // (record_bytes + 20))
    value = os.urandom(record_bytes)
    return build_record_batch([(None, value, (), 1_700_000_000_000 + i) for i in range(count)])


def open_log(directory: str, *, clean: bool = True) -> Log:
    return LogLoader(FileSystem(), directory, "bench", 0, LogConfig(), clean_shutdown=clean,
                     recovery_point=0, log_start_offset=0,
                     clock=lambda: time.time_ns() // 1_000_000).load()


def bench_raw(path: str, chunk: bytes, count: int) -> float:
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(count):
        os.write(fd, chunk)
    os.fdatasync(fd)
    os.close(fd)
    return time.perf_counter() - start


def bench_append(log: Log, template: bytearray, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        log.append(template)  # a bytearray is rewritten in place: no copy, as from a socket
    log.flush()
    return time.perf_counter() - start


def bench_small(log: Log, count: int) -> float:
    template = make_batch(1024, 100)
    start = time.perf_counter()
    for _ in range(count):
        log.append(template)
    return time.perf_counter() - start


def bench_reads(log: Log, count: int) -> tuple[float, float]:
    rng = random.Random(1)
    latencies = []
    for _ in range(count):
        offset = rng.randrange(log.log_start_offset, log.log_end_offset)
        start = time.perf_counter()
        log.read(offset, MiB)
        latencies.append(time.perf_counter() - start)
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1GiB", help="bytes to append (e.g. 64MiB, 1GiB)")
    parser.add_argument("--small-count", type=int, default=100_000)
    parser.add_argument("--reads", type=int, default=10_000)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    size = parse_size(args.size)
    root = tempfile.mkdtemp(prefix="strom-bench-", dir=args.dir)
    try:
        run(root, size, args.small_count, args.reads)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(root: str, size: int, small_count: int, reads: int) -> None:
    template = make_batch(MiB, 1000)
    count = max(1, size // len(template))
    total = count * len(template)
    print(f"data: {count} batches of {len(template)} bytes = {total / MiB:.0f} MiB in {root}")
    raw_path = os.path.join(root, "raw.bin")
    raw_first = bench_raw(raw_path, bytes(template), count)
    os.unlink(raw_path)
    big = os.path.join(root, "bench-0")
    log = open_log(big)
    append = bench_append(log, template, count)
    raw_second = bench_raw(raw_path, bytes(template), count)  # order effects: measure twice
    os.unlink(raw_path)
    raw = min(raw_first, raw_second)
    print(f"raw os.write + fdatasync : {total / MiB / raw:8.1f} MiB/s ({raw:.2f} s; before "
          f"the log {raw_first:.2f} s, after it {raw_second:.2f} s; the faster is used)")
    print(f"Log.append 1 MiB + flush : {total / MiB / append:8.1f} MiB/s ({append:.2f} s)"
          f"  = {raw / append:.2f}x raw (goal >= 0.8x)")
    # an unclean stop: no close, so no trimmed indexes and no clean-shutdown marker
    for segment in log.segments:
        segment.close()
    start = time.perf_counter()
    recovered = open_log(big, clean=False)
    recovery = time.perf_counter() - start
    assert recovered.log_end_offset == log.log_end_offset
    print(f"recovery of {total / MiB:.0f} MiB (unclean, from offset 0): {recovery:.2f} s "
          f"(goal < 5 s per GiB; {recovery * (1 << 30) / total:.2f} s/GiB)")
    recovered.close()
    small = open_log(os.path.join(root, "bench-1"))
    elapsed = bench_small(small, small_count)
    print(f"Log.append 1 KiB batches : {small_count / elapsed:8.0f} appends/s "
          f"({small_count * 1024 / MiB / elapsed:.1f} MiB/s)")
    p50, p99 = bench_reads(small, reads)
    print(f"Log.read random offsets  : p50 {p50 * 1e6:.1f} us, p99 {p99 * 1e6:.1f} us "
          f"({reads} reads over {small.log_end_offset} offsets)")
    small.close()


if __name__ == "__main__":
    main()
