"""Log compaction: keys deduplicated per 128 MiB pass, cleaning MB/s, peak RSS.

Workload (the issue's): ``--records`` (20 M) records over ``--keys`` (10 M) distinct
16-byte keys, 100-byte values, uncompressed batches of 500 records, written through
``Log.append`` into 1 GiB segments; the key of record ``i`` is ``i * 7919 mod keys``,
so every key appears ``records / keys`` times, spread over the whole log. Then the
log is rolled and compacted with ``Cleaner`` and an ``OffsetMap`` of ``--map-mib``
(128) MiB until nothing is left to clean, in a child process so its peak RSS is the
cleaner's alone (base = RSS after imports and opening the log, before the map).

Peers: Kafka's SkimpyOffsetMap stores a 16-byte MD5 and an 8-byte offset per entry
at ``log.cleaner.io.buffer.load.factor`` 0.9, i.e. 5.03 M keys per 128 MiB; WarpStream
publishes "more than 5 million keys" in 128 MiB. Neither runs here (no JVM, no
WarpStream), so their published figures are printed next to Strom's measured ones.

    .venv/bin/python benchmarks/compaction.py                 # the issue's workload
    .venv/bin/python benchmarks/compaction.py --records 2000000 --keys 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

KAFKA_KEYS_PER_128_MIB = int((128 << 20) / 24 * 0.9)  # MD5 + int64 at load 0.9
WARPSTREAM_KEYS_PER_128_MIB = 5_000_000  # "more than 5 million keys"


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def build(directory: str, records: int, keys: int, segment_bytes: int) -> None:
    from strom.protocol.records import RecordBatchBuilder
    from strom.storage import FileSystem, LogConfig, LogLoader

    log = LogLoader(FileSystem(), directory, "bench", 0, LogConfig(segment_bytes=segment_bytes),
                    clean_shutdown=True, recovery_point=0, log_start_offset=0,
                    clock=lambda: int(time.time() * 1000)).load()
    value = b"v" * 100
    started = time.perf_counter()
    for first in range(0, records, 500):
        builder = RecordBatchBuilder()
        for number in range(first, min(first + 500, records)):
            builder.append(b"key-%012d" % (number * 7919 % keys), value, (), 1_700_000_000_000)
        log.append(builder.build())
    log.roll()
    log.close()
    print(f"built {records:,} records over {keys:,} keys: {log.size_in_bytes / 1e6:,.0f} MB "
          f"in {time.perf_counter() - started:.0f} s", flush=True)


def clean(directory: str, map_mib: float, segment_bytes: int) -> None:
    """The child: compact the log until done; print one JSON line of figures."""
    from strom.compaction.cleaner import Cleaner
    from strom.compaction.offset_map import OffsetMap
    from strom.storage import FileSystem, LogConfig, LogLoader

    log = LogLoader(FileSystem(), directory, "bench", 0, LogConfig(segment_bytes=segment_bytes),
                    clean_shutdown=True, recovery_point=0, log_start_offset=0,
                    clock=lambda: int(time.time() * 1000)).load()
    size_before = log.size_in_bytes
    base_rss = rss_mib()
    cleaner = Cleaner(OffsetMap(int(map_mib * 2**20)))
    passes = []
    first_dirty: int | None = None
    started = time.perf_counter()
    while True:
        pass_started = time.perf_counter()
        end, stats = cleaner.clean(log, first_dirty)
        if end == first_dirty or stats.map_bytes_read == 0:
            break
        seconds = time.perf_counter() - pass_started
        passes.append({"end": end, "keys": stats.keys_mapped, "mapped": stats.records_mapped,
                       "map_read_mb": stats.map_bytes_read / 1e6,
                       "clean_read_mb": stats.bytes_read / 1e6,
                       "written_mb": stats.bytes_written / 1e6,
                       "kept": stats.records_kept, "records": stats.records_read,
                       "segments": [stats.segments_cleaned, stats.segments_unchanged,
                                    stats.segments_skipped],
                       "map_s": stats.map_seconds, "copy_s": stats.copy_seconds,
                       "seconds": seconds})
        first_dirty = end
    total = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"passes": passes, "seconds": total, "size_before_mb": size_before / 1e6,
                      "size_after_mb": log.size_in_bytes / 1e6, "base_rss_mib": base_rss,
                      "peak_rss_mib": peak, "map_mib": cleaner.map.memory_bytes / 2**20,
                      "map_capacity": cleaner.map.max_entries}))
    log.close()


def report(figures: dict[str, Any], map_mib: float) -> None:
    passes = figures["passes"]
    for number, item in enumerate(passes, 1):
        cleaned, unchanged, skipped = item["segments"]
        print(f"pass {number}: {item['keys']:>11,} keys mapped from {item['mapped']:,} records "
              f"({item['map_read_mb']:,.0f} MB read, {item['map_s']:.1f} s); cleaning read "
              f"{item['clean_read_mb']:,.0f} MB, kept {item['kept']:,} of {item['records']:,} "
              f"records, wrote {item['written_mb']:,.0f} MB ({item['copy_s']:.1f} s); segments "
              f"rewritten {cleaned}, read but unchanged {unchanged}, skipped {skipped}")
    seconds = float(figures["seconds"])
    before = float(figures["size_before_mb"])
    cleaned_mb = sum(item["clean_read_mb"] for item in passes)
    read_mb = cleaned_mb + sum(item["map_read_mb"] for item in passes)
    written_mb = sum(item["written_mb"] for item in passes)
    print(f"log {before:,.0f} MB -> {figures['size_after_mb']:,.0f} MB in {len(passes)} passes, "
          f"{seconds:.1f} s; {read_mb:,.0f} MB read ({read_mb / seconds:,.0f} MB/s), "
          f"{written_mb:,.0f} MB written")
    print(f"cleaned: {cleaned_mb:,.0f} MB of log through the cleaning passes in {seconds:.1f} s = "
          f"{cleaned_mb / seconds:,.0f} MB/s (Kafka's \"MB of log processed\"; goal >= 100, "
          f"one core)")
    print(f"whole job: log size / total time = {before / seconds:,.0f} MB/s")
    print(f"peak RSS {figures['peak_rss_mib']:,.0f} MiB = base {figures['base_rss_mib']:,.0f} MiB "
          f"+ {float(figures['peak_rss_mib']) - float(figures['base_rss_mib']):,.0f} MiB "
          f"(map {figures['map_mib']:,.1f} MiB; goal <= 1.2 x {map_mib} MiB + base)")
    scale = 128 / map_mib
    capacity = int(figures["map_capacity"])
    print(f"keys per 128 MiB pass: Strom {capacity * scale:,.0f} (capacity; first pass mapped "
          f"{passes[0]['keys'] * scale:,.0f}), Kafka {KAFKA_KEYS_PER_128_MIB:,} (published "
          f"layout), WarpStream > {WARPSTREAM_KEYS_PER_128_MIB:,} (published)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20_000_000)
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--map-mib", type=float, default=128)
    parser.add_argument("--segment-mib", type=int, default=1024, help="segment.bytes in MiB")
    parser.add_argument("--dir", default=None, help="keep the log here (default: a temp dir)")
    parser.add_argument("--clean-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.clean_only:
        clean(args.dir, args.map_mib, args.segment_mib << 20)
        return
    directory = args.dir or tempfile.mkdtemp(prefix="strom-compaction-")
    try:
        log_dir = os.path.join(directory, "bench-0")
        build(log_dir, args.records, args.keys, args.segment_mib << 20)
        child = subprocess.run(
            [sys.executable, __file__, "--clean-only", "--dir", log_dir,
             "--map-mib", str(args.map_mib), "--segment-mib", str(args.segment_mib)],
            check=True, capture_output=True, text=True)
        report(json.loads(child.stdout.strip().splitlines()[-1]), args.map_mib)
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
