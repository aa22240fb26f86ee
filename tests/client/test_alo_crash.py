"""Crash test of the concurrent at-least-once consumer against a running Strom broker.

A consumer process (8 worker threads, ``key`` ordering, offset maps on, a commit every
50 ms) is SIGKILLed at random moments — during start-up and the group join, and while
records are being processed — and restarted, 20 times; a last run finishes the topic
and closes gracefully. Checked from the sink the process wrote:

* every record was processed at least once (nothing lost across 20 crashes);
* within each run, each key's records were processed in offset order;
* a record processed again after a crash was never covered by a commit of an earlier run
  (below its committed offset, or in its offset map): duplicates are limited to records
  in flight — not yet committed as done — when the process died. Without the offset map,
  every finished record past a partition's oldest unfinished one would come back; the
  test checks that such records existed, so the property is not met vacuously.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from strom.alo.metadata_codec import decode_offset_map
from strom.client.admin import AsyncAdmin
from strom.client.admin_types import NewTopic
from strom.client.consumer import AsyncConsumer
from strom.client.producer import AsyncProducer
from tests.support.broker_process import BrokerProcess

RECORDS = 4_000
PARTITIONS = 4
KEYS = 40
TRIALS = 20
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Sink:
    """What the consumer processes wrote, parsed."""

    processed: list[tuple[int, int, int, str]] = field(default_factory=list)  # (run, partition, offset, key)
    commits: list[tuple[int, int, int, str]] = field(default_factory=list)  # (run, partition, offset, metadata)

    @classmethod
    def read(cls, path: Path) -> Sink:
        sink = cls()
        if not path.exists():
            return sink
        for line in path.read_text().splitlines():
            kind, run, partition, offset, rest = line.split(" ", 4)
            row = (int(run), int(partition), int(offset), rest)
            (sink.processed if kind == "P" else sink.commits).append(row)
        return sink


def count_processed(path: Path) -> int:
    try:
        with path.open("rb") as file:
            return sum(1 for line in file if line.startswith(b"P "))
    except FileNotFoundError:
        return 0


def spawn(bootstrap: str, topic: str, group: str, sink: Path, run: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.client.alo_crash_consumer", bootstrap, topic, group, "key", str(sink), str(run)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=(sink.parent / f"run{run}.log").open("wb"),
        env={**os.environ, "PYTHONPATH": str(ROOT)})


async def prepare(bootstrap: str, topic: str) -> dict[int, int]:
    async with AsyncAdmin({"bootstrap.servers": bootstrap}) as admin:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    async with AsyncProducer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(RECORDS):
            await producer.produce(topic, f"v{i}".encode(), f"key{i % KEYS}".encode())
        await producer.flush()
    async with AsyncConsumer({"bootstrap.servers": bootstrap}) as consumer:
        ends = await consumer.end_offsets([(topic, p) for p in range(PARTITIONS)])
    return {tp[1]: offset for tp, offset in ends.items()}


async def committed_offsets(bootstrap: str, group: str) -> dict[int, int]:
    async with AsyncAdmin({"bootstrap.servers": bootstrap}) as admin:
        found = await admin.list_consumer_group_offsets(group)
    return {tp[1]: committed.offset for tp, committed in found.items()}


def covered_before(sink: Sink) -> dict[int, tuple[dict[int, int], dict[int, frozenset[int]]]]:
    """Per run: what the commits logged by earlier runs covered, per partition (the newest
    commit wins: commits only grow)."""
    runs = sorted({run for run, *_ in sink.processed} | {run for run, *_ in sink.commits})
    by_run: dict[int, tuple[dict[int, int], dict[int, frozenset[int]]]] = {}
    offsets: dict[int, int] = {}
    maps: dict[int, frozenset[int]] = {}
    commits = defaultdict(list)
    for run, partition, offset, metadata in sink.commits:
        commits[run].append((partition, offset, metadata))
    for run in runs:
        by_run[run] = (dict(offsets), dict(maps))
        for partition, offset, metadata in commits[run]:
            assert offset >= offsets.get(partition, 0), "a commit moved a partition's offset back"
            offsets[partition] = offset
            maps[partition] = decode_offset_map(offset, "" if metadata == "-" else metadata)
    return by_run


def test_sigkilled_consumer_processes_every_record_at_least_once_in_key_order(
        strom_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap, topic, group = strom_broker.bootstrap, "alo-crash", "alo-crash-group"
    ends = asyncio.run(prepare(bootstrap, topic))
    assert sum(ends.values()) == RECORDS
    sink = tmp_path / "sink.txt"
    rng = random.Random(int(os.environ.get("ALO_CRASH_SEED", "0")) or None)
    started = time.monotonic()
    for run in range(TRIALS):
        process = spawn(bootstrap, topic, group, sink, run)
        if rng.random() < 0.25:  # during start-up, the join, the first fetch
            time.sleep(rng.uniform(0.05, 0.8))
        else:  # while records are being processed
            target = count_processed(sink) + rng.randint(1, 250)
            deadline = time.monotonic() + 15
            while count_processed(sink) < target and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0, 0.02))
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    before_last = len({(p, o) for _, p, o, _ in Sink.read(sink).processed})
    # The last run finishes the topic, then stops gracefully.
    process = spawn(bootstrap, topic, group, sink, TRIALS)
    assert process.stdout is not None and process.stdout.readline() == b"started\n"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = {(p, o) for run, p, o, _ in Sink.read(sink).processed}
        if len(done) >= RECORDS:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    elapsed = time.monotonic() - started

    result = Sink.read(sink)
    # 1. At least once: every offset of every partition.
    done = {(p, o) for _, p, o, _ in result.processed}
    missing = {(p, o) for p, end in ends.items() for o in range(end)} - done
    assert not missing, f"{len(missing)} records never processed, e.g. {sorted(missing)[:5]}"
    keys: dict[tuple[int, int], str] = {}
    for _, p, o, key in result.processed:
        assert keys.setdefault((p, o), key) == key
    # 2. Key order within each run.
    last: dict[tuple[int, str], int] = {}
    for run, _, o, key in result.processed:
        previous = last.get((run, key), -1)
        assert o > previous, f"run {run}: key {key} processed {o} after {previous}"
        last[(run, key)] = o
    # 3. Duplicates only of records no earlier commit covered.
    coverage = covered_before(result)
    first_run: dict[tuple[int, int], int] = {}
    duplicates = 0
    seen_in_run: set[tuple[int, int, int]] = set()
    for run, p, o, _ in result.processed:
        assert (run, p, o) not in seen_in_run, f"run {run} processed {p}@{o} twice"
        seen_in_run.add((run, p, o))
        first = first_run.setdefault((p, o), run)
        if first == run:
            continue
        duplicates += 1
        offsets, maps = coverage[run]
        assert o >= offsets.get(p, 0) and o not in maps.get(p, frozenset()), (
            f"run {run} processed {p}@{o} again though an earlier commit covered it")
    # Records a restarted run found in its offset map: without the map they would have
    # been processed again. Some must exist, or the check above proved nothing.
    saved = {(p, o) for _, maps in coverage.values() for p, m in maps.items() for o in m}
    assert saved, "no run started with an offset map: the duplicate check proved nothing"
    # The graceful close committed everything.
    assert asyncio.run(committed_offsets(bootstrap, group)) == ends
    print(f"\n{TRIALS} kills in {elapsed:.1f} s: {len(result.processed)} processings of {RECORDS} records, "
          f"{duplicates} repeats, {before_last} done before the last run; {len(result.commits)} commits; {len(saved)} records not redone thanks to offset maps")
