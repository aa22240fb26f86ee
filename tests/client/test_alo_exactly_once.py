"""ParallelConsumer's exactly-once mode against a real ``strom serve``.

Both tests read INPUT (records over 3 partitions) and write ``f(value) = b"f:" + value``
to the same partition of an output topic, then read the output with read_committed and
require exactly f(input), in the order the ordering mode promises:

* ``key`` ordering (records of a partition finish out of order, so the drain must fill
  the gaps below its cut) and a handler that raises once mid-way: the transaction holding the other records' outputs
  is aborted and replayed; the test checks records really were processed twice, so the
  "exactly once" in the output is not met vacuously;
* ``partition`` ordering (each partition's output in input order), the consumer's
  process SIGKILLed mid-transaction and restarted several times;
* a second member joining mid-stream: the first ends its transaction (cut, drain,
  commit) before its partitions go, and both commit outputs.

Run with the at-least-once ``ParallelConsumer`` (the driver's ``alo`` mode), the crash
test's output has duplicates: that is the failure these tests are there to catch.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.alo.exactly_once import ExactlyOnceParallelConsumer, OutputRecord
from strom.client.admin import AsyncAdmin
from strom.client.admin_types import NewTopic
from strom.client.consumer import AsyncConsumer
from strom.client.fetcher import ConsumerRecord
from strom.client.producer import AsyncProducer
from tests.support.broker_process import BrokerProcess

PARTITIONS = 3
RECORDS = 300
KILLS = 3
KEYS = 7
ROOT = Path(__file__).resolve().parents[2]

Partitions = dict[int, list[bytes]]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("eos") / "data",
                            {"group.initial.rebalance.delay.ms": "0"}).start()
    yield process
    process.stop()


def f(value: bytes) -> bytes:
    return b"f:" + value


async def prepare(bootstrap: str, source: str, output: str) -> Partitions:
    """Create both topics, fill the input; returns its values per partition, in order."""
    async with AsyncAdmin({"bootstrap.servers": bootstrap}) as admin:
        await admin.create_topics([NewTopic(source, PARTITIONS, 1), NewTopic(output, PARTITIONS, 1)])
    async with AsyncProducer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(RECORDS):
            await producer.produce(source, f"v{i}".encode(), f"k{i % KEYS}".encode(), partition=i % PARTITIONS)
        await producer.flush()
    return await read_all(bootstrap, source)


async def read_all(bootstrap: str, topic: str) -> Partitions:
    """Every committed record of ``topic`` up to its last stable offset, per partition."""
    async with AsyncConsumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
                              "auto.offset.reset": "earliest"}) as consumer:
        tps = [(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)  # read_committed: the last stable offsets
        values: Partitions = {p: [] for p in range(PARTITIONS)}
        async with asyncio.timeout(60):
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                    values[tp[1]].extend(r.value or b"" for r in records)
    return values


def expected(source: Partitions) -> Partitions:
    return {p: [f(v) for v in values] for p, values in source.items()}


async def group_offsets(bootstrap: str, group: str) -> dict[int, int]:
    async with AsyncAdmin({"bootstrap.servers": bootstrap}) as admin:
        found = await admin.list_consumer_group_offsets(group)
    return {tp[1]: committed.offset for tp, committed in found.items()}


def test_a_failing_record_aborts_the_transaction_and_the_output_is_exactly_once(broker: BrokerProcess) -> None:
    bootstrap, source, output, group = broker.bootstrap, "eos-fail-in", "eos-fail-out", "eos-fail"

    async def scenario() -> tuple[Partitions, Partitions, int, int, int]:
        source_values = await prepare(bootstrap, source, output)
        lock = threading.Lock()
        calls: list[int] = []
        injected: list[tuple[int, int]] = []

        def handle(record: ConsumerRecord) -> list[OutputRecord]:
            time.sleep(0.003 * (record.offset % 4))  # out of order: other keys overtake
            with lock:
                calls.append(record.offset)
                if record.partition == 1 and record.offset == 70 and not injected:
                    injected.append((record.partition, record.offset))
                    raise RuntimeError("injected failure")
            return [OutputRecord(output, f(record.value or b""), record.key, partition=record.partition)]

        consumer = ExactlyOnceParallelConsumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"},
            handle, {"ordering": "key", "max_concurrency": 6, "commit_interval_ms": 30,
                     "retry_backoff_ms": 10}, transactional_id="eos-fail-txn")
        async with consumer:
            consumer.subscribe([source])
            await consumer.start()
            async with asyncio.timeout(60):
                while sum((await group_offsets(bootstrap, group)).values()) < RECORDS:
                    await asyncio.sleep(0.1)
        return source_values, await read_all(bootstrap, output), len(calls), len(injected), consumer.aborts

    source_values, output_values, calls, injected, aborts = asyncio.run(scenario())
    assert injected == 1 and aborts >= 1
    # The aborted transaction held other records' outputs; they were processed again.
    assert calls > RECORDS + 1, "nothing was replayed: the abort proved nothing"
    want = expected(source_values)
    for partition, values in output_values.items():
        assert sorted(values) == sorted(want[partition]), f"partition {partition}: not f(input) exactly once"
        numbers = [int(value.removeprefix(b"f:v")) for value in values]
        for key in range(KEYS):  # ``key`` ordering keeps each key's order
            of_key = [n for n in numbers if n % KEYS == key]
            assert of_key == sorted(of_key), f"partition {partition}, key k{key} out of order"


def spawn(bootstrap: str, source: str, output: str, group: str, sink: Path, run: int,
          mode: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.client.alo_exactly_once_driver", bootstrap, source, output, group,
         str(sink), str(run), mode],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=(sink.parent / f"run{run}.log").open("wb"),
        env={**os.environ, "PYTHONPATH": str(ROOT)})


def sink_lines(sink: Path, kind: bytes) -> list[bytes]:
    try:
        return [line for line in sink.read_bytes().splitlines() if line.startswith(kind)]
    except FileNotFoundError:
        return []


def wait_for_lines(sink: Path, kind: bytes, count: int, process: subprocess.Popen[bytes] | None, what: str,
                   timeout: float = 60) -> None:
    """Until the sink holds ``count`` lines of ``kind`` (or the process exited)."""
    deadline = time.monotonic() + timeout
    while len(sink_lines(sink, kind)) < count and (process is None or process.poll() is None):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_sigkilled_exactly_once_consumer_writes_every_output_once(broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap, source, output, group = broker.bootstrap, "eos-kill-in", "eos-kill-out", "eos-kill"
    mode = os.environ.get("ALO_EOS_MODE", "eos")  # "alo": the control run, which must fail
    source_values = asyncio.run(prepare(bootstrap, source, output))
    sink = tmp_path / "sink.txt"
    killed_mid_transaction = 0
    for run in range(KILLS):
        process = spawn(bootstrap, source, output, group, sink, run, mode)
        # Past one commit of this run, then a few more records: some outputs are uncommitted.
        wait_for_lines(sink, b"C ", len(sink_lines(sink, b"C ")) + 1, process, "a commit")
        wait_for_lines(sink, b"P ", len(sink_lines(sink, b"P ")) + 5, process, "records processed")
        assert process.poll() is None, f"run {run} exited early; see {tmp_path}/run{run}.log"
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        killed_mid_transaction += 1
    process = spawn(bootstrap, source, output, group, sink, KILLS, mode)
    assert process.stdout is not None and process.stdout.readline() == b"started\n"
    ends = {p: len(values) for p, values in source_values.items()}
    deadline = time.monotonic() + 60
    while asyncio.run(group_offsets(bootstrap, group)) != ends:
        assert time.monotonic() < deadline and process.poll() is None, "the last run did not commit everything"
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0

    processings = len(sink_lines(sink, b"P "))
    assert killed_mid_transaction == KILLS
    assert processings > RECORDS, "no record was processed twice: the kills hit no open transaction"
    assert asyncio.run(read_all(bootstrap, output)) == expected(source_values)


def test_a_member_joining_mid_stream_takes_partitions_after_the_transaction_commits(broker: BrokerProcess) -> None:
    bootstrap, source, output, group = broker.bootstrap, "eos-join-in", "eos-join-out", "eos-join"

    async def scenario() -> tuple[Partitions, Partitions, list[int], list[int]]:
        source_values = await prepare(bootstrap, source, output)
        commits: list[list[int]] = [[], []]
        revoked: list[int] = []
        assigned = [0, 0]

        def member(index: int) -> ExactlyOnceParallelConsumer:
            async def handle(record: ConsumerRecord) -> list[OutputRecord]:
                # Slow until the second member owns partitions, so the first cannot finish alone.
                await asyncio.sleep(0.002 * (record.offset % 4) + (0 if assigned[1] else 0.04))
                return [OutputRecord(output, f(record.value or b""), record.key, partition=record.partition)]

            class Listener:
                def on_partitions_revoked(self, partitions: frozenset[object]) -> None:
                    revoked.append(len(partitions))

                def on_partitions_assigned(self, partitions: frozenset[object]) -> None:
                    assigned[index] += len(partitions)

            return ExactlyOnceParallelConsumer(
                {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                 "client.id": f"eos-join-{index}", "heartbeat.interval.ms": 100},
                handle, {"ordering": "key", "max_concurrency": 8, "commit_interval_ms": 30},
                transactional_id=f"eos-join-{index}", listener=Listener(),
                on_commit=lambda points: commits[index].append(len(points)))

        first, second = member(0), member(1)
        ends = {p: len(values) for p, values in source_values.items()}
        async with first, second:
            first.subscribe([source])
            await first.start()
            async with asyncio.timeout(60):
                while not commits[0]:
                    await asyncio.sleep(0.01)
                second.subscribe([source])
                await second.start()  # joins: the first member's partitions are revoked
                while await group_offsets(bootstrap, group) != ends:
                    await asyncio.sleep(0.1)
        return source_values, await read_all(bootstrap, output), [len(c) for c in commits], revoked

    source_values, output_values, commit_counts, revoked = asyncio.run(scenario())
    assert revoked and sum(revoked) > 0, "no partition was revoked: the rebalance path was not taken"
    assert all(commit_counts), f"a member committed nothing: {commit_counts}"
    want = expected(source_values)
    for partition, values in output_values.items():
        assert sorted(values) == sorted(want[partition]), f"partition {partition}: not f(input) exactly once"
