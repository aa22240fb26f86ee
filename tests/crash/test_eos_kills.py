"""Read-process-write exactly once while the processor and the broker are SIGKILLed.

One ``strom serve`` (restarted on the same data dir and port after each kill) and a
confluent-kafka consume-transform-produce processor (tests/support/eos_processor.py, its
own process) that commits the output and its consumer's offsets in one transaction per
poll batch. Before each event the test appends a chunk of input (unique values, explicit
partitions, an idempotent producer), waits until the processor has committed some input
past what it had committed before, then waits a seeded random moment and:

- SIGKILLs the processor and starts another (its ``init_transactions`` fences the dead
  one and aborts its open transaction), or
- SIGKILLs the broker and restarts it while the processor carries on, or
- once, the crash point: SIGKILLs the broker and the processor, restarts the broker with
  ``STROM_TXN_CRASH_AT=after-prepare-commit:1``, appends fresh input and starts a
  processor, whose first commit makes the broker exit by itself (137) right after its
  PrepareCommit is durable and before any marker is written; restarted normally, the
  broker must write the markers from its load.

Progress is measured by the input offsets the processors report committed, never by a
count of commits: the test waits for a commit only while there is input above those
offsets, so an idle processor (all its input committed) is never taken for a stalled one,
and the crash point, the first PrepareCommit of a broker whose processor has fresh input,
is always reached. At the end the processor runs until its committed offsets reach the
input's ends, and the output, read ``read_committed``, must be exactly the transformed
input: nothing lost, nothing twice, in input order per partition. The kills are counted
and asserted. Appends reach the page cache with ``pwrite`` before they are acknowledged,
so a SIGKILL (unlike a power loss) loses nothing and no flush setting is needed.

``STROM_EOS_KILLS`` sets the number of processor kills (at least 10; the broker is killed
half as often, at least 5 times, one of them the crash point); ``STROM_EOS_SEED`` the seed.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.broker.transaction.transaction_coordinator import CRASH_POINT_ENV
from tests.support.broker_process import BrokerProcess
from tests.support.eos_processor import transform

SEED = int(os.environ.get("STROM_EOS_SEED", "20261125"))
PROCESSOR_KILLS = max(10, int(os.environ.get("STROM_EOS_KILLS", "10")))
BROKER_KILLS = max(5, PROCESSOR_KILLS // 2)  # one of them followed by the crash point
PARTITIONS = 3
CHUNK = 120  # input records appended before each event
INPUT, OUTPUT = "eos-input", "eos-output"
OVERRIDES = {
    "transaction.state.log.num.partitions": "1",
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}
TIMEOUT = 120.0  # per wait: generous, for a loaded 2-core machine
STALL_SECONDS = 60.0  # input uncommitted and no commit for this long: the processor is stalled
MAX_STALLS = 2
REPO = Path(__file__).resolve().parents[2]


class CommittedOffsets:
    """The highest input offsets any processor reported committed, per partition.

    A processor reports the group's committed offsets when it starts and after each
    commit; a killed one may have committed more than it reported, never less, so these
    are a lower bound of the truth that only grows."""

    def __init__(self) -> None:
        self.offsets = [0] * PARTITIONS
        self._lock = threading.Lock()

    def report(self, line: str) -> None:
        with self._lock:
            for item in line.split()[1].split(","):
                partition, offset = map(int, item.split(":"))
                self.offsets[partition] = max(self.offsets[partition], offset)

    def total(self) -> int:
        return sum(self.snapshot())

    def snapshot(self) -> list[int]:
        with self._lock:
            return list(self.offsets)


class ProcessorProcess:
    """One run of the processor; its reports go to the shared ``CommittedOffsets``."""

    def __init__(self, bootstrap: str, stderr_path: Path, seed: int, committed: CommittedOffsets) -> None:
        command = [sys.executable, "-m", "tests.support.eos_processor", bootstrap, INPUT, OUTPUT,
                   str(PARTITIONS), "--seed", str(seed)]
        # librdkafka's transaction log ("eos") goes to the processor's log, for a stall's diagnosis.
        environment = {**os.environ, "STROM_EOS_DEBUG": os.environ.get("STROM_EOS_DEBUG", "eos")}
        with open(stderr_path, "a") as stderr:
            stderr.write(f"--- the test at {time.strftime('%H:%M:%S')}: a processor starts (seed {seed}) ---\n")
            stderr.flush()
            self.process = subprocess.Popen(command, cwd=REPO, env=environment, stdout=subprocess.PIPE,
                                            stderr=stderr, text=True)
        self.stderr_path = stderr_path
        self._reader = threading.Thread(target=self._read, args=(committed,), daemon=True)
        self._reader.start()

    def _read(self, committed: CommittedOffsets) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("committed "):
                committed.report(line)

    def check_alive(self) -> None:
        assert self.process.poll() is None, f"the processor exited ({self.process.returncode}): {self.tail()}"

    def kill(self) -> None:
        self.check_alive()
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(TIMEOUT) == -signal.SIGKILL
        self._reader.join(TIMEOUT)

    def tail(self) -> str:
        return self.stderr_path.read_text()[-3000:]


class Run:
    """The test's state: the broker, the processor running, what was sent and committed."""

    def __init__(self, broker: BrokerProcess, tmp_path: Path, rng: random.Random) -> None:
        self.broker = broker
        self.rng = rng
        self.stderr_path = tmp_path / "processor.log"
        self.sent: list[list[bytes]] = [[] for _ in range(PARTITIONS)]
        self.committed = CommittedOffsets()
        self.stalls: list[int] = []  # the committed total when a processor was replaced for stalling
        self.processor = self.start_processor()

    def start_processor(self) -> ProcessorProcess:
        return ProcessorProcess(self.broker.bootstrap, self.stderr_path, self.rng.randrange(1 << 30),
                                self.committed)

    def note(self, text: str) -> None:
        """A line in the processors' log (and the test's output) to find an event by."""
        with open(self.stderr_path, "a") as log:
            log.write(f"--- the test at {time.strftime('%H:%M:%S')}: {text} ---\n")
        print(text, flush=True)

    def append_input(self) -> None:
        """CHUNK more input records, round robin over the partitions; ``sent`` gets what was acked."""
        producer = Producer({"bootstrap.servers": self.broker.bootstrap, "enable.idempotence": True,
                             "linger.ms": 5})
        failures: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                failures.append(error)

        first = sum(len(values) for values in self.sent)
        for sequence in range(first, first + CHUNK):
            partition = sequence % PARTITIONS
            value = b"%d-%06d" % (partition, sequence)
            producer.produce(INPUT, value, b"k%d" % sequence, partition=partition, on_delivery=delivered)
            self.sent[partition].append(value)
        assert producer.flush(TIMEOUT) == 0 and not failures, failures

    def wait_for_commit(self, target: int) -> None:
        """Until the committed total passes ``target``; only called while input above ``target``
        is uncommitted, so only a stuck processor keeps it waiting. librdkafka 2.16 can wait
        for good in send_offsets_to_transaction after its broker went away (a coordinator
        request never re-triggered: librdkafka #5511 and #5456); a real deployment's liveness
        check would restart it, and so does this, at most MAX_STALLS times (the replacement
        fences it, so the output stays exactly once either way)."""
        assert target < sum(map(len, self.sent)), "waiting for a commit with nothing to commit"
        last_total, last_move = self.committed.total(), time.monotonic()
        while (total := self.committed.total()) <= target:
            self.processor.check_alive()
            if total != last_total:
                last_total, last_move = total, time.monotonic()
            elif time.monotonic() - last_move > STALL_SECONDS:
                self.stalls.append(total)
                assert len(self.stalls) <= MAX_STALLS, f"{len(self.stalls)} processors stalled: {self.processor.tail()}"
                self.note(f"no commit in {STALL_SECONDS} s with input to commit: replacing the processor")
                self.processor.kill()
                self.processor = self.start_processor()
                last_move = time.monotonic()
            time.sleep(0.02)

    def restart_broker(self, crash_at: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
        """Start the broker again; with ``crash_at``, with the crash point set (read once, at start)."""
        with monkeypatch.context() as patch:
            if crash_at:
                patch.setenv(CRASH_POINT_ENV, crash_at)
            self.broker.start(timeout=TIMEOUT)

    def crash_point(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The broker killed, then dead by itself after the first PrepareCommit it makes durable.

        The processor is killed too and a new one starts once the crash-point broker and the
        fresh input are there: it always has input to commit, and as a new client it has no
        coordinator cached from the broker that died (see ``wait_for_commit``), so its first
        commit, the crash point, comes."""
        self.processor.kill()
        self.restart_broker("after-prepare-commit:1", monkeypatch)
        target = self.committed.total()
        self.append_input()
        self.processor = self.start_processor()
        assert self.broker.process is not None
        try:
            code = self.broker.process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the broker did not exit at its crash point within {TIMEOUT} s (committed "
                        f"{self.committed.total()} of {sum(map(len, self.sent))}, {target} before); "
                        f"its log ends:\n{self.broker.log_path.read_text()[-3000:]}\n"
                        f"the processors' log ends:\n{self.processor.tail()}")
        assert code == 137, f"the broker exited {code}: {self.broker.log_path.read_text()[-3000:]}"
        assert self.broker.stop() == 137
        assert f"{CRASH_POINT_ENV}: after-prepare-commit of " in self.broker.log_path.read_text()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    yield process
    if process.alive():
        process.stop()


def read_partitions(bootstrap: str, topic: str, isolation: str) -> list[list[bytes]]:
    """Every value of every partition, up to its end, as a consumer at ``isolation`` sees them.
    read_committed waits first until no transaction is open (the last stable offset, what a
    read_committed consumer's ListOffsets answers, equals the high watermark)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-reader-{isolation}",
                         "enable.partition.eof": True, "isolation.level": isolation,
                         "enable.auto.commit": False})
    uncommitted = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-watermarks",
                            "isolation.level": "read_uncommitted"})
    try:
        deadline = time.monotonic() + TIMEOUT
        for partition in range(PARTITIONS):
            tp = TopicPartition(topic, partition)
            while consumer.get_watermark_offsets(tp, 10, cached=False)[1] != \
                    uncommitted.get_watermark_offsets(tp, 10, cached=False)[1]:
                assert time.monotonic() < deadline, f"{topic}-{partition} keeps a transaction open"
                time.sleep(0.05)
        consumer.assign([TopicPartition(topic, partition, 0) for partition in range(PARTITIONS)])
        values: list[list[bytes]] = [[] for _ in range(PARTITIONS)]
        at_end: set[int] = set()
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"no end of {topic}: at the end of {sorted(at_end)}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(message.error())
                at_end.add(message.partition())
                continue
            values[message.partition()].append(message.value())
        return values
    finally:
        consumer.close()
        uncommitted.close()


def test_read_process_write_is_exactly_once_through_sigkills(broker: BrokerProcess, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(INPUT, PARTITIONS, 1), NewTopic(OUTPUT, PARTITIONS, 1)]).values():
        future.result(TIMEOUT)
    rng = random.Random(SEED)
    events = ["processor"] * PROCESSOR_KILLS + ["broker"] * (BROKER_KILLS - 1) + ["crash-point"]
    rng.shuffle(events)
    kills = {"processor": 0, "broker": 0, "crash-point": 0}
    run = Run(broker, tmp_path, rng)
    try:
        for number, event in enumerate(events):
            run.note(f"event {number}: {event} (committed {run.committed.snapshot()})")
            target = run.committed.total()
            run.append_input()
            run.wait_for_commit(target)
            time.sleep(rng.uniform(0.0, 0.4))  # a random moment in the loop
            if event == "processor":
                run.processor.kill()
                kills["processor"] += 1
                run.processor = run.start_processor()
                continue
            assert broker.stop(signal.SIGKILL) == -signal.SIGKILL
            kills["broker"] += 1
            if event == "crash-point":
                run.crash_point(monkeypatch)
                kills["crash-point"] += 1
            log_before = broker.log_path.stat().st_size
            run.restart_broker(None, monkeypatch)
            if event == "crash-point":  # the PrepareCommit it died after is finished from the load
                with open(broker.log_path) as log:
                    log.seek(log_before)
                    assert "completing its PrepareCommit transaction found on load" in log.read()
        ends = [len(values) for values in run.sent]
        while run.committed.snapshot() != ends:
            run.wait_for_commit(run.committed.total())
        run.note(f"all input committed: {ends}; stalled processors replaced: {len(run.stalls)}")
        run.processor.kill()
    finally:
        with contextlib.suppress(ProcessLookupError):
            run.processor.process.kill()
        run.processor.process.wait(TIMEOUT)
    assert kills == {"processor": PROCESSOR_KILLS, "broker": BROKER_KILLS, "crash-point": 1}
    assert read_partitions(broker.bootstrap, INPUT, "read_uncommitted") == run.sent, "the input itself is wrong"
    output = read_partitions(broker.bootstrap, OUTPUT, "read_committed")
    written = sum(map(len, read_partitions(broker.bootstrap, OUTPUT, "read_uncommitted")))
    print(f"{sum(map(len, run.sent))} input records; {written} written to the output, "
          f"{written - sum(map(len, output))} of them aborted", flush=True)
    for partition in range(PARTITIONS):
        expected = [transform(value) for value in run.sent[partition]]
        got = output[partition]
        missing, doubled = set(expected) - set(got), len(got) - len(set(got))
        assert got == expected, (f"partition {partition}: {len(got)} records for {len(expected)}, "
                                 f"{len(missing)} missing, {doubled} twice")
