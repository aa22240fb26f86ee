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
   (every batch re-validated: length, magic, CRC) — goal < 5 s for 1 GiB;
6. segment preallocation (``--prealloc-rounds``, 0 skips it): ``Log.append`` of
   ``--size`` in 1 MiB batches into a fresh segment of ``segment.bytes`` = the size,
   then ``flush()``, in interleaved rounds, for: a plain new file (today's code);
   ``posix_fallocate`` of the whole segment at creation (Kafka's ``preallocate``);
   ``fallocate(FALLOC_FL_KEEP_SIZE)`` (blocks reserved, file size unchanged); and a
   reused file — the previous round's segment renamed to the new name, as if a
   deleted segment were recycled (its blocks and page-cache pages already exist) —
   and ``reuse-cold``, the same after ``POSIX_FADV_DONTNEED`` drops its cached pages, as
   for a retention-deleted segment written days ago.
   Variants are injected through the ``FileSystem`` seam; best and median per variant.
Page cache is not dropped, so 5 measures CPU-bound validation over cached pages.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
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


def open_log(directory: str, *, clean: bool = True, fs: FileSystem | None = None,
             config: LogConfig | None = None) -> Log:
    return LogLoader(fs or FileSystem(), directory, "bench", 0, config or LogConfig(),
                     clean_shutdown=clean, recovery_point=0, log_start_offset=0,
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


class PreallocatingFileSystem(FileSystem):
    """Prepares each new ``.log`` the way ``mode`` says when the log empties it at creation.

    ``Log`` creates a segment by opening ``<base>.log`` and truncating it to 0; this
    seam turns that truncate into the variant under test.
    """

    _FALLOC_FL_KEEP_SIZE = 1

    def __init__(self, mode: str, segment_bytes: int, spare: str | None = None) -> None:
        self.mode = mode
        self.segment_bytes = segment_bytes
        self.spare = spare
        self._new_logs: set[int] = set()
        self._libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self._libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                                         ctypes.c_long]

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fresh = path.endswith(".log") and not os.path.exists(path)
        if fresh and self.mode.startswith("reuse") and self.spare and os.path.exists(self.spare):
            os.rename(self.spare, path)
        fd = super().open(path, flags, mode)
        if fresh:
            self._new_logs.add(fd)
        return fd

    def ftruncate(self, fd: int, size: int) -> None:
        if size != 0 or fd not in self._new_logs:
            return super().ftruncate(fd, size)
        self._new_logs.discard(fd)
        if self.mode.startswith("reuse"):
            return None  # keep the recycled file's blocks; its stale bytes lie past ``size``
        super().ftruncate(fd, 0)
        if self.mode == "fallocate":
            os.posix_fallocate(fd, 0, self.segment_bytes)
        elif self.mode == "keep-size" and self._libc.fallocate(
                fd, self._FALLOC_FL_KEEP_SIZE, 0, self.segment_bytes):
                raise OSError(ctypes.get_errno(), "fallocate(FALLOC_FL_KEEP_SIZE) failed")
        return None


PREALLOCATION_MODES = ("plain", "fallocate", "keep-size", "reuse", "reuse-cold")


def bench_preallocation(root: str, template: bytearray, count: int,
                        rounds: int) -> dict[str, list[float]]:
    """Interleaved rounds (order rotated each round) of one 1-segment log per variant."""
    segment_bytes = count * len(template) + MiB
    config = LogConfig(segment_bytes=min(segment_bytes, 2**31 - 1))
    spare = os.path.join(root, "spare.log")
    times: dict[str, list[float]] = {mode: [] for mode in PREALLOCATION_MODES}
    for number in range(rounds + 1):  # round 0 warms up and leaves a spare file
        turn = number % len(PREALLOCATION_MODES)
        for mode in PREALLOCATION_MODES[turn:] + PREALLOCATION_MODES[:turn]:
            if mode == "reuse-cold" and os.path.exists(spare):
                drop_cached_pages(spare)
            directory = os.path.join(root, f"prealloc-{mode}")
            fs = PreallocatingFileSystem(mode, config.segment_bytes, spare)
            os.sync()  # let the previous round's writeback and discards settle first
            start = time.perf_counter()
            log = open_log(directory, fs=fs, config=config)  # creates (+ prepares) the segment
            bench_append(log, template, count)
            elapsed = time.perf_counter() - start
            log.close()
            if number:
                times[mode].append(elapsed)
            segment = os.path.join(directory, log.segments.active.log_path)
            if mode.startswith("reuse") or not os.path.exists(spare):
                os.rename(segment, spare)  # "deleted" segment kept for recycling
            shutil.rmtree(directory)
    return times


def drop_cached_pages(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def report_preallocation(times: dict[str, list[float]], total: int) -> None:
    plain = min(times["plain"])
    for mode in PREALLOCATION_MODES:
        best, median = min(times[mode]), statistics.median(times[mode])
        print(f"  {mode:<10} best {total / MiB / best:7.1f} MiB/s ({best:.2f} s, "
              f"{plain / best:.2f}x plain)  median {total / MiB / median:7.1f} MiB/s "
              f"({median:.2f} s)  rounds {' '.join(f'{t:.2f}' for t in times[mode])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1GiB", help="bytes to append (e.g. 64MiB, 1GiB)")
    parser.add_argument("--small-count", type=int, default=100_000)
    parser.add_argument("--reads", type=int, default=10_000)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--prealloc-rounds", type=int, default=5,
                        help="interleaved rounds of the preallocation comparison (0: skip)")
    args = parser.parse_args()
    size = parse_size(args.size)
    root = tempfile.mkdtemp(prefix="strom-bench-", dir=args.dir)
    try:
        run(root, size, args.small_count, args.reads)
        if args.prealloc_rounds > 0:
            template = make_batch(MiB, 1000)
            count = max(1, size // len(template))
            print(f"segment preallocation, Log.append 1 MiB + flush, {args.prealloc_rounds} "
                  f"interleaved rounds of {count * len(template) / MiB:.0f} MiB:")
            times = bench_preallocation(root, template, count, args.prealloc_rounds)
            report_preallocation(times, count * len(template))
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
