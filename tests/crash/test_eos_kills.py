"""Read-process-write exactly once while the processor and the broker are SIGKILLed.

One ``strom serve`` (restarted on the same data dir and port after each kill) and a
confluent-kafka consume-transform-produce processor (tests/support/eos_processor.py, its
own process) that commits the output and its consumer's offsets in one transaction per
poll batch. Before each event the test appends a chunk of input (unique values, explicit
partitions, an idempotent producer); then, once the processor has committed something
since the last event, it waits a seeded random moment and:

- SIGKILLs the processor and starts another (its ``init_transactions`` fences the dead
  one and aborts its open transaction), or
- SIGKILLs the broker and restarts it while the processor carries on, or
- once: SIGKILLs the broker, restarts it with ``STROM_TXN_CRASH_AT=after-prepare-commit:N``
  and waits for it to exit by itself (137) right after a PrepareCommit is durable and
  before any marker is written; the restarted broker must write the markers from its load.

At the end a last processor runs until its committed positions reach the input's ends,
and the output, read ``read_committed``, must be exactly the transformed input: nothing
lost, nothing twice, in input order per partition. The kills that happened are counted
and asserted. Appends reach the page cache with ``pwrite`` before they are acknowledged,
so a SIGKILL (unlike a power loss) loses nothing and no flush setting is needed.

``STROM_EOS_KILLS`` sets the number of processor kills (the broker is killed half as
often, at least 5 times); ``STROM_EOS_SEED`` the seed.
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
STALL_SECONDS = 60.0  # no commit for this long: the processor is stalled (see make_progress)
MAX_STALLS = 2
REPO = Path(__file__).resolve().parents[2]


class ProcessorProcess:
    """One run of the processor; counts the commits it reports on stdout."""

    def __init__(self, bootstrap: str, stderr_path: Path, seed: int, until: dict[int, int] | None = None) -> None:
        command = [sys.executable, "-m", "tests.support.eos_processor", bootstrap, INPUT, OUTPUT,
                   str(PARTITIONS), "--seed", str(seed)]
        if until is not None:
            command += ["--until", ",".join(f"{p}:{end}" for p, end in until.items())]
        # librdkafka's transaction log ("eos") goes to the processor's log, for a stall's diagnosis.
        environment = {**os.environ, "STROM_EOS_DEBUG": os.environ.get("STROM_EOS_DEBUG", "eos")}
        with open(stderr_path, "a") as stderr:
            self.process = subprocess.Popen(command, cwd=REPO, env=environment, stdout=subprocess.PIPE,
                                            stderr=stderr, text=True)
        self.stderr_path = stderr_path
        self.commits = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("committed "):
                self.commits += 1

    def wait_for_commits(self, count: int, timeout: float = TIMEOUT) -> bool:
        """False if the processor did not get to ``count`` commits within ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.commits < count:
            assert self.process.poll() is None, f"the processor exited ({self.process.returncode}): {self.tail()}"
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def kill(self) -> None:
        assert self.process.poll() is None, f"the processor exited ({self.process.returncode}): {self.tail()}"
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(TIMEOUT) == -signal.SIGKILL
        self._reader.join(TIMEOUT)

    def tail(self) -> str:
        return self.stderr_path.read_text()[-3000:]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    yield process
    if process.alive():
        process.stop()


def append_input(bootstrap: str, sent: list[list[bytes]]) -> None:
    """CHUNK more input records, round robin over the partitions; ``sent`` gets what was acked."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(error)

    first = sum(len(values) for values in sent)
    for sequence in range(first, first + CHUNK):
        partition = sequence % PARTITIONS
        value = b"%d-%06d" % (partition, sequence)
        producer.produce(INPUT, value, b"k%d" % sequence, partition=partition,
                         on_delivery=delivered)
        sent[partition].append(value)
    assert producer.flush(TIMEOUT) == 0 and not failures, failures


def restart_broker(broker: BrokerProcess, crash_at: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start the broker again; with ``crash_at``, with the crash point set (it reads it once, at start)."""
    with monkeypatch.context() as patch:
        if crash_at:
            patch.setenv(CRASH_POINT_ENV, crash_at)
        broker.start(timeout=TIMEOUT)


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


def make_progress(processor: ProcessorProcess, broker: BrokerProcess, stderr_path: Path, rng: random.Random,
                  stalls: list[int]) -> ProcessorProcess:
    """The processor once it has committed again: a processor that stalls is replaced.

    librdkafka 2.16 can wait for good in send_offsets_to_transaction after its broker went
    away (a coordinator request never re-triggered: librdkafka #5511 and #5456); a real
    deployment's liveness check would restart it, and so does this, at most MAX_STALLS
    times (the replacement fences it, so the output stays exactly once either way)."""
    while not processor.wait_for_commits(processor.commits + 1, STALL_SECONDS):
        stalls.append(processor.commits)
        assert len(stalls) <= MAX_STALLS, f"{len(stalls)} processors stalled: {processor.tail()}"
        with open(stderr_path, "a") as log:
            log.write(f"--- the test: no commit in {STALL_SECONDS} s, replacing the processor ---\n")
        processor.kill()
        processor = ProcessorProcess(broker.bootstrap, stderr_path, rng.randrange(1 << 30))
    return processor


def test_read_process_write_is_exactly_once_through_sigkills(broker: BrokerProcess, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(SEED)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(INPUT, PARTITIONS, 1), NewTopic(OUTPUT, PARTITIONS, 1)]).values():
        future.result(TIMEOUT)
    events = ["processor"] * PROCESSOR_KILLS + ["broker"] * (BROKER_KILLS - 1) + ["crash-point"]
    rng.shuffle(events)
    stderr_path = tmp_path / "processor.log"
    sent: list[list[bytes]] = [[] for _ in range(PARTITIONS)]
    kills = {"processor": 0, "broker": 0, "crash-point": 0}
    stalls: list[int] = []  # the commits of each processor replaced for not making progress
    processor = ProcessorProcess(broker.bootstrap, stderr_path, rng.randrange(1 << 30))
    try:
        for number, event in enumerate(events):
            print(f"event {number}: {event} ({processor.commits} commits)", flush=True)
            append_input(broker.bootstrap, sent)
            processor = make_progress(processor, broker, stderr_path, rng, stalls)
            time.sleep(rng.uniform(0.0, 0.4))  # a random moment in the loop
            if event == "processor":
                processor.kill()
                kills["processor"] += 1
                processor = ProcessorProcess(broker.bootstrap, stderr_path, rng.randrange(1 << 30))
                continue
            assert broker.stop(signal.SIGKILL) == -signal.SIGKILL
            kills["broker"] += 1
            if event == "crash-point":
                restart_broker(broker, f"after-prepare-commit:{rng.randint(1, 5)}", monkeypatch)
                assert broker.process is not None
                assert broker.process.wait(TIMEOUT) == 137, "the broker did not stop at its crash point"
                assert broker.stop() == 137
                assert f"{CRASH_POINT_ENV}: after-prepare-commit of " in broker.log_path.read_text()
                kills["crash-point"] += 1
            log_before = broker.log_path.stat().st_size
            restart_broker(broker, None, monkeypatch)
            if event == "crash-point":  # the PrepareCommit it died after is finished from the load
                with open(broker.log_path) as log:
                    log.seek(log_before)
                    assert "completing its PrepareCommit transaction found on load" in log.read()
        processor = make_progress(processor, broker, stderr_path, rng, stalls)
        processor.kill()
        kills["processor"] += 1
        ends = {partition: len(values) for partition, values in enumerate(sent)}
        processor = ProcessorProcess(broker.bootstrap, stderr_path, rng.randrange(1 << 30), until=ends)
        assert processor.process.wait(TIMEOUT) == 0, f"the last processor did not finish: {processor.tail()}"
        print(f"stalled processors replaced: {len(stalls)}", flush=True)
    finally:
        with contextlib.suppress(ProcessLookupError):
            processor.process.kill()
        processor.process.wait(TIMEOUT)
    assert len(stalls) <= MAX_STALLS, f"{len(stalls)} processors stalled: see {stderr_path}"
    assert kills == {"processor": PROCESSOR_KILLS + 1, "broker": BROKER_KILLS, "crash-point": 1}
    assert read_partitions(broker.bootstrap, INPUT, "read_uncommitted") == sent, "the input itself is wrong"
    output = read_partitions(broker.bootstrap, OUTPUT, "read_committed")
    written = sum(map(len, read_partitions(broker.bootstrap, OUTPUT, "read_uncommitted")))
    print(f"{sum(map(len, sent))} input records; {written} written to the output, "
          f"{written - sum(map(len, output))} of them aborted", flush=True)
    for partition in range(PARTITIONS):
        expected = [transform(value) for value in sent[partition]]
        got = output[partition]
        missing, doubled = set(expected) - set(got), len(got) - len(set(got))
        assert got == expected, (f"partition {partition}: {len(got)} records for {len(expected)}, "
                                 f"{len(missing)} missing, {doubled} twice")
