"""Transactions' throughput cost: Strom beside Apache Kafka 3.9, same producer, same run (issue 19).

    .venv/bin/python benchmarks/transactions.py [--rounds 5] [--seconds 5] [--commit-ms 100]
                                                [--brokers strom,kafka39] [--quick] [--profile]

Both brokers run for the whole script: ``strom serve`` (default settings, a fresh data dir)
and Kafka 3.9 in ZooKeeper mode through ``tests/support/reference_broker.py`` (the jars
``scripts/kafka-reference`` fetches, the shared reference settings). The producer is
confluent-kafka (librdkafka, C) on both sides, so only the ``produce`` call is Python.

Two workloads, each ``--seconds`` long, each writing 1 KiB values (cycled from 1,024 random
ones, null keys, librdkafka's default partitioner) as fast as one Python loop can call
``produce`` to a fresh topic of 4 partitions:

* transactional: ``transactional.id`` set (idempotent, acks=all); ``begin_transaction``,
  produce for ``--commit-ms`` (100 ms), ``flush``, ``commit_transaction``, repeat until the
  time is up. The clock stops when the last commit returns, so the flush, EndTxn and the
  markers are all inside it; the time in ``commit_transaction`` after the flush (EndTxn
  until the coordinator has written the markers) is shown per transaction.
* idempotent: the same producer without ``transactional.id`` (``enable.idempotence``,
  acks=all), producing for the same time, then ``flush``.
* commits: transactions of one record per partition, committed back to back for the same
  time: the broker's CPU per transaction, nearly free of record work. Weighed against the
  idempotent pass's CPU per record and the transactional pass's records per transaction, it
  gives the share of the broker's work transactions add, a figure that, unlike wall-clock
  throughput, holds still on a loaded machine.

Everything else is librdkafka's default (``linger.ms`` 5, ``batch.size`` 1 MB, no
compression) but ``queue.buffering.max.messages`` (``QUEUED_RECORDS``, below). After each
pass the topic's last stable offsets are read back (once the last markers are in): the
idempotent topic must hold exactly the records sent, the transactional one those plus one
commit marker per partition a transaction wrote to, so a pass whose records were not all
written and committed fails the run.

Besides records/s, each pass reports the broker's CPU time per record (user + system, all
threads, from /proc; Kafka: the broker JVM, not ZooKeeper): on a machine shared with other
work, wall-clock throughput swings with the neighbours' load while CPU per record mostly
does not, and a multi-threaded JVM gets more of a contended CPU than one event loop does.
Each pass also gives librdkafka's mean produce round trip (its ``rtt`` statistics), which
tells a broker that answers slowly from a client that cannot feed it.

Each broker first gets one uncounted warm-up pass of both workloads (Kafka runs warm in
practice; the first InitProducerId also creates ``__transaction_state``). Rounds then
interleave brokers and workloads in a rotated order; each figure is the median of the
rounds (best also shown), and the transactional cost is the median of the per-round costs
(the two passes of one round on one broker). ``--profile`` runs one more transactional pass
against a second, cProfile'd Strom and prints where the broker's time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.support.reference_broker starts Apache Kafka

PARTITIONS = 4
VALUE_SIZE = 1024
CHECK_EVERY = 64  # produce calls between two looks at the clock
TIMEOUT_S = 60.0
WORKLOADS = ("transactional", "idempotent")
PASSES = (*WORKLOADS, "commits")  # commits: the broker's CPU per transaction, records aside
# librdkafka queues up to 100,000 records (100 MB here) by default: a loop that produces
# faster than the broker takes them would leave the commit to flush up to a second of
# backlog, and a "100 ms" transaction would last far longer. 10,000 records (10 MB, one
# of librdkafka's default batch.num.messages) keeps batches full and the flush short.
QUEUED_RECORDS = 10_000


@dataclass
class Broker:
    name: str
    bootstrap: str
    pid: int  # the broker process (Kafka: its JVM, not ZooKeeper), for its CPU time
    topics: int = 0

    def cpu_seconds(self) -> float:
        """User + system CPU the broker process has used so far, all its threads."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def topic(self, workload: str) -> str:
        """A fresh topic of ``PARTITIONS`` partitions, created before the clock starts."""
        self.topics += 1
        name = f"txn-bench-{workload}-{self.topics}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
            future.result(TIMEOUT_S)
        return name


@dataclass
class Pass:
    records: int
    seconds: float
    transactions: int = 0
    broker_cpu: float = 0.0  # seconds of the broker's CPU during the pass
    commit_seconds: float = 0.0  # in commit_transaction after the flush: EndTxn, markers
    round_trip_ms: float = float("nan")  # librdkafka's mean produce round trip

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds

    @property
    def cpu_per_record(self) -> float:
        """Microseconds of broker CPU per record: steadier than throughput on a shared machine."""
        return self.broker_cpu / self.records * 1e6


@dataclass
class Results:
    passes: dict[tuple[str, str], list[Pass]] = field(default_factory=dict)

    def add(self, broker: str, workload: str, result: Pass) -> None:
        self.passes.setdefault((broker, workload), []).append(result)

    def rates(self, broker: str, workload: str) -> list[float]:
        return [result.records_per_second for result in self.passes.get((broker, workload), [])]

    def cpu(self, broker: str, workload: str) -> list[float]:
        return [result.cpu_per_record for result in self.passes.get((broker, workload), [])]

    def costs(self, broker: str) -> list[float]:
        """Per round: the share of the idempotent throughput transactions cost."""
        pairs = zip(self.rates(broker, "transactional"), self.rates(broker, "idempotent"), strict=True)
        return [1.0 - txn / idem for txn, idem in pairs]

    def commit_costs(self, broker: str) -> list[tuple[float, float, float]]:
        """Per round: the broker's CPU per transaction (ms), that in idempotent records'
        worth, and so the share it adds at the transactional pass's records per transaction."""
        rounds = zip(self.passes.get((broker, "commits"), []), self.passes.get((broker, "idempotent"), []),
                     self.passes.get((broker, "transactional"), []), strict=True)
        costs = []
        for commit, plain, transactional in rounds:
            per_transaction = commit.broker_cpu / commit.transactions
            in_records = per_transaction / (plain.broker_cpu / plain.records)
            costs.append((per_transaction * 1e3, in_records,
                          in_records / (transactional.records / transactional.transactions)))
        return costs

    def cpu_costs(self, broker: str) -> list[float]:
        """Per round: the broker CPU per record transactions add, as a share of idempotent's."""
        pairs = zip(self.cpu(broker, "transactional"), self.cpu(broker, "idempotent"), strict=True)
        return [txn / idem - 1.0 for txn, idem in pairs]


# -- brokers -------------------------------------------------------------------------------
@contextmanager
def strom(profile_to: Path | None = None) -> Iterator[Broker]:
    """``strom serve`` in a fresh data dir; under cProfile when ``profile_to`` is given."""
    from tests.support.reference_broker import metadata_answer

    with tempfile.TemporaryDirectory(prefix="strom-txn-bench-") as data:
        runner = [sys.executable]
        if profile_to is not None:
            runner += ["-m", "cProfile", "-o", str(profile_to)]
            runner += [str(Path(sys.executable).parent / "strom")]
        else:
            runner += ["-m", "strom"]
        command = [*runner, "serve", "--data-dir", data, "--listeners", "PLAINTEXT://127.0.0.1:0",
                   "--log-level", "warning", "--override", "group.initial.rebalance.delay.ms=0"]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(REPO / ".venv" / "pycache")
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert process.stdout is not None
            bootstrap = process.stdout.readline().rsplit("ready on ", 1)[1].strip()
            deadline = time.monotonic() + TIMEOUT_S
            while metadata_answer(bootstrap, timeout=1.0) is None:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("strom serve did not answer Metadata")
                time.sleep(0.05)
            yield Broker("strom", bootstrap, process.pid)
        finally:
            # SIGINT: the serve command stops cleanly, so cProfile gets to write its file.
            process.send_signal(signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)


@contextmanager
def kafka39() -> Iterator[Broker]:
    from tests.support.reference_broker import start_reference_broker

    with tempfile.TemporaryDirectory(prefix="kafka39-txn-bench-") as data, \
            start_reference_broker("39", Path(data)) as broker:
        yield Broker("kafka39", broker.bootstrap, broker.pid)


# -- the two workloads ---------------------------------------------------------------------
@dataclass
class RoundTrips:
    """librdkafka's produce round trips to the broker (its ``rtt`` statistics, 1 s windows),
    to tell a broker that answers slowly from one the client cannot feed."""

    total_us: float = 0.0
    count: int = 0

    def on_statistics(self, statistics_json: str) -> None:
        for broker in json.loads(statistics_json).get("brokers", {}).values():
            if broker.get("nodeid", -1) >= 0 and broker["rtt"]["cnt"]:
                self.total_us += broker["rtt"]["avg"] * broker["rtt"]["cnt"]
                self.count += broker["rtt"]["cnt"]

    @property
    def mean_ms(self) -> float:
        return self.total_us / self.count / 1000 if self.count else float("nan")


def _producer(bootstrap: str, transactional_id: str | None,
              round_trips: RoundTrips | None = None) -> confluent_kafka.Producer:
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                 "queue.buffering.max.messages": QUEUED_RECORDS, "log.connection.close": False}
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    if round_trips is not None:
        config["statistics.interval.ms"] = 1000
        config["stats_cb"] = round_trips.on_statistics
    return confluent_kafka.Producer(config)


def _produce_until(producer: confluent_kafka.Producer, topic: str, values: list[bytes], until: float) -> int:
    """Produce as fast as the loop goes until ``until`` (perf_counter); returns the count."""
    produce, poll, clock = producer.produce, producer.poll, time.perf_counter
    sent = 0
    while True:
        for index in range(CHECK_EVERY):
            value = values[(sent + index) & 1023]
            while True:
                try:
                    produce(topic, value)
                    break
                except BufferError:  # queue.buffering.max.messages reached: let it drain
                    poll(0.001)
        sent += CHECK_EVERY
        poll(0)
        if clock() >= until:
            return sent


def transactional(broker: Broker, values: list[bytes], seconds: float, commit_ms: int) -> Pass:
    topic = broker.topic("transactional")
    round_trips = RoundTrips()
    producer = _producer(broker.bootstrap, f"txn-bench-{broker.name}-{broker.topics}", round_trips)
    producer.init_transactions(TIMEOUT_S)
    producer.list_topics(topic, timeout=TIMEOUT_S)
    records = transactions = 0
    commit_seconds = 0.0
    cpu = broker.cpu_seconds()
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        producer.begin_transaction()
        records += _produce_until(producer, topic, values, time.perf_counter() + commit_ms / 1000)
        producer.flush(TIMEOUT_S)  # as commit_transaction would: timed apart from the commit
        committing = time.perf_counter()
        producer.commit_transaction(TIMEOUT_S)
        commit_seconds += time.perf_counter() - committing
        transactions += 1
    elapsed = time.perf_counter() - start
    cpu = broker.cpu_seconds() - cpu
    _check_written(broker, topic, records, transactions)
    return Pass(records, elapsed, transactions, cpu, commit_seconds, round_trips.mean_ms)


def idempotent(broker: Broker, values: list[bytes], seconds: float, commit_ms: int) -> Pass:
    topic = broker.topic("idempotent")
    round_trips = RoundTrips()
    producer = _producer(broker.bootstrap, None, round_trips)
    producer.list_topics(topic, timeout=TIMEOUT_S)
    cpu = broker.cpu_seconds()
    start = time.perf_counter()
    records = _produce_until(producer, topic, values, start + seconds)
    left = producer.flush(TIMEOUT_S)
    elapsed = time.perf_counter() - start
    cpu = broker.cpu_seconds() - cpu
    if left:
        raise RuntimeError(f"{broker.name}: {left} records not delivered")
    _check_written(broker, topic, records, 0)
    return Pass(records, elapsed, 0, cpu, 0.0, round_trips.mean_ms)


def _check_written(broker: Broker, topic: str, records: int, transactions: int) -> None:
    """The topic's end offsets account for every record: exactly (idempotent), or with at
    least one commit marker per transaction and at most one per partition touched.

    The end offsets are read read_committed (librdkafka's default), so they are the last
    stable offsets: Kafka answers EndTxn before its markers are written, and until the last
    one is, the LSO stays before that transaction's records. So this waits for them."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "txn-bench-check",
                                         "isolation.level": "read_committed"})
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while True:
            offsets = sum(consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, partition),
                                                         timeout=TIMEOUT_S, cached=False)[1]
                          for partition in range(PARTITIONS))
            markers = offsets - records
            if markers >= transactions or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        consumer.close()
    if not transactions <= markers <= transactions * PARTITIONS:
        raise RuntimeError(f"{broker.name} {topic}: {offsets} stable offsets for {records} records "
                           f"and {transactions} transactions")


def commits(broker: Broker, values: list[bytes], seconds: float, commit_ms: int) -> Pass:
    """Transactions of one record per partition, committed back to back: the broker's CPU
    per transaction (AddPartitionsToTxn, EndTxn, three transaction-log appends, a marker per
    partition), nearly free of record work, to weigh against the CPU of a record."""
    topic = broker.topic("commits")
    producer = _producer(broker.bootstrap, f"txn-bench-{broker.name}-{broker.topics}")
    producer.init_transactions(TIMEOUT_S)
    producer.list_topics(topic, timeout=TIMEOUT_S)
    transactions = 0
    cpu = broker.cpu_seconds()
    start = time.perf_counter()
    while time.perf_counter() < start + seconds:
        producer.begin_transaction()
        for partition in range(PARTITIONS):
            producer.produce(topic, values[partition], partition=partition)
        producer.commit_transaction(TIMEOUT_S)
        transactions += 1
    elapsed = time.perf_counter() - start
    cpu = broker.cpu_seconds() - cpu
    _check_written(broker, topic, transactions * PARTITIONS, transactions)
    return Pass(transactions * PARTITIONS, elapsed, transactions, cpu)


RUNS: dict[str, Callable[[Broker, list[bytes], float, int], Pass]] = {
    "transactional": transactional, "idempotent": idempotent, "commits": commits,
}


# -- the run -------------------------------------------------------------------------------
def values_pool() -> list[bytes]:
    rng = random.Random(19)
    return [rng.randbytes(VALUE_SIZE) for _ in range(1024)]


def run(brokers: list[Broker], rounds: int, seconds: float, commit_ms: int, warm_up: float) -> Results:
    values = values_pool()
    if warm_up > 0:
        for broker in brokers:
            for workload in WORKLOADS:
                RUNS[workload](broker, values, warm_up, commit_ms)
    results = Results()
    order = [(broker, workload) for broker in brokers for workload in PASSES]
    for number in range(rounds):
        shift = number % len(order)
        for broker, workload in order[shift:] + order[:shift]:
            result = RUNS[workload](broker, values, seconds, commit_ms)
            results.add(broker.name, workload, result)
            print(f"  round {number + 1}: {broker.name:8} {workload:13} {describe(workload, result)}", flush=True)
    return results


def describe(workload: str, result: Pass) -> str:
    if workload == "commits":
        return (f"{result.transactions / result.seconds:9,.0f} transactions/s, "
                f"{result.broker_cpu / result.transactions * 1e3:5.2f} ms broker CPU/transaction")
    length = (f", {result.seconds / result.transactions * 1000:.0f} ms each, {result.commit_seconds / result.transactions * 1000:.1f}"
              " ms of it in the commit after the flush" if result.transactions else "")
    return (f"{result.records_per_second:>9,.0f} records/s, {result.cpu_per_record:5.2f} µs broker CPU/record, "
            f"broker busy {result.broker_cpu / result.seconds:4.0%} of a core, "
            f"round trip {result.round_trip_ms:5.1f} ms "
            f"({result.records:,} records in {result.seconds:.1f} s, {result.transactions} transactions{length})")


def report(results: Results, names: list[str], rounds: int) -> None:
    mb = VALUE_SIZE / 1e6
    print(f"\n{'broker / workload (median / best of ' + str(rounds) + ')':42} {'records/s':>21} "
          f"{'MB/s':>15} {'broker CPU µs/record':>22}")
    for name in names:
        for workload in WORKLOADS:
            rates, cpu = results.rates(name, workload), results.cpu(name, workload)
            median, best = statistics.median(rates), max(rates)
            print(f"{name + ' ' + workload:42} {median:>10,.0f} / {best:>9,.0f} "
                  f"{median * mb:>7.1f} / {best * mb:>5.1f} {statistics.median(cpu):>12.2f} / {min(cpu):>5.2f}")
    print("\nlibrdkafka's produce round trip, median of the passes (ms)")
    for name in names:
        trips = {workload: statistics.median(result.round_trip_ms for result in results.passes[(name, workload)])
                 for workload in WORKLOADS}
        print(f"  {name:8} " + ", ".join(f"{workload} {trip:.1f}" for workload, trip in trips.items()))
    print("\ntransactional cost, per round, median (goal ≤ 5 % throughput on Strom)")
    for name in names:
        costs, cpu_costs = results.costs(name), results.cpu_costs(name)
        print(f"  {name:8} throughput {statistics.median(costs):+6.1%} (rounds: "
              f"{', '.join(f'{cost:+.1%}' for cost in costs)})")
        print(f"  {name:8} broker CPU per record {statistics.median(cpu_costs):+6.1%} (rounds: "
              f"{', '.join(f'{cost:+.1%}' for cost in cpu_costs)})")
    print("\nbroker CPU per transaction (commits pass: 1 record per partition), median; as idempotent "
          "records' CPU; its share of a 100 ms transaction's records")
    for name in names:
        commit_costs = results.commit_costs(name)
        rate = statistics.median(result.transactions / result.seconds
                                 for result in results.passes[(name, "commits")])
        print(f"  {name:8} {rate:6.0f} transactions/s, "
              f"{statistics.median(cost[0] for cost in commit_costs):5.2f} ms CPU each = "
              f"{statistics.median(cost[1] for cost in commit_costs):6.0f} records' worth = "
              f"{statistics.median(cost[2] for cost in commit_costs):+6.1%} (rounds: "
              f"{', '.join(f'{cost[2]:+.1%}' for cost in commit_costs)})")
    if "strom" in names and "kafka39" in names:
        print("\nStrom ÷ Kafka 3.9, medians (goal ≥ 1.0x transactional throughput)")
        for workload in WORKLOADS:
            ratio = statistics.median(results.rates("strom", workload)) / statistics.median(
                results.rates("kafka39", workload))
            cpu_ratio = statistics.median(results.cpu("strom", workload)) / statistics.median(
                results.cpu("kafka39", workload))
            print(f"  {workload:13} throughput {ratio:.2f}x, broker CPU per record {cpu_ratio:.2f}x")


def profile(seconds: float, commit_ms: int, top: int) -> None:
    """One transactional pass against a cProfile'd Strom: where the broker's time goes.

    The profile covers the broker's whole life, so a 2 s warm-up pass first (creating
    ``__transaction_state`` and the topics, importing what the first append needs) dilutes
    the one-off costs; the second listing is the transaction coordinator's and the marker
    writer's own functions, cumulative, the work a transaction adds to a plain produce."""
    with tempfile.TemporaryDirectory(prefix="strom-txn-profile-") as scratch:
        output = Path(scratch) / "serve.prof"
        with strom(profile_to=output) as broker:
            values = values_pool()
            transactional(broker, values, 2.0, commit_ms)
            result = transactional(broker, values, seconds, commit_ms)
        print(f"\ncProfile'd Strom: {result.records_per_second:,.0f} records/s transactional "
              f"({result.transactions} transactions, after {2.0:g} s of warm-up); broker functions by own time:")
        stats = pstats.Stats(str(output))
        stats.sort_stats("tottime").print_stats(top)
        print("the transaction coordinator and the markers, cumulative:")
        stats.sort_stats("cumulative").print_stats(r"broker/transaction/|txn_markers|verification", top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each pass")
    parser.add_argument("--commit-ms", type=int, default=100, help="a transaction is committed this often")
    parser.add_argument("--warm-up", type=float, default=3.0, help="seconds of the uncounted first pass")
    parser.add_argument("--brokers", default="strom,kafka39")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round of 1 s passes, no warm-up")
    parser.add_argument("--profile", action="store_true", help="add a cProfile'd transactional pass of Strom")
    parser.add_argument("--profile-top", type=int, default=30)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.warm_up = 1, 1.0, 0.0
    names = args.brokers.split(",")
    starts = {"strom": strom, "kafka39": kafka39}
    print(f"transactions benchmark: {args.rounds} rounds of {args.seconds:g} s passes, {VALUE_SIZE} B values, "
          f"{PARTITIONS} partitions, commit every {args.commit_ms} ms, confluent-kafka "
          f"{confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})", flush=True)
    with ExitStack() as stack:
        brokers = [stack.enter_context(starts[name]()) for name in names]
        results = run(brokers, args.rounds, args.seconds, args.commit_ms, args.warm_up)
    report(results, names, args.rounds)
    if args.profile:
        profile(args.seconds, args.commit_ms, args.profile_top)


if __name__ == "__main__":
    main()
