"""Figures 5-7 of ``benchmarks/cluster.py``: replication (issue 18), for both systems alike.

5. produce: 1 KiB records (kcat on librdkafka, a C client, so the client is not the
   bottleneck) to a fresh 6-partition topic, with RF 1 acks=1, RF 3 acks=1 and RF 3
   acks=all (``min.insync.replicas=2``); each topic waits until every broker's Metadata
   shows every partition with its full ISR before the clock starts. MB/s.
6. consume: the RF 3 topic read back whole, one kcat per partition. MB/s.
7. leader failover: a 3-partition RF 3 topic (``min.insync.replicas=2``); an idempotent
   acks=all producer (confluent-kafka) sends a record every ``PRODUCE_INTERVAL_S`` to a
   partition whose leader is not the controller (so no controller election is in the
   way); SIGKILL (or SIGTERM) that leader, and time until the producer's first
   acknowledgement of a record sent after the signal, and the longest silence between
   acknowledgements from the signal until the controller's Metadata names another leader
   and a second more (an old leader still acknowledging during its controlled shutdown
   makes the first figure small, not the second); after a SIGKILL, also when ZooKeeper
   expired the dead leader's session (a watch on its ``/brokers/ids`` znode). The broker is
   started again and the ISR waited for before the next round.

A system that refuses a replication factor above 1 (Strom before replication landed)
gets no RF 3 rows: ``Unsupported`` is raised once and the caller says so.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.broker import Broker, _records_file, ensure_peers, kcat_consume
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from strom.protocol.messages.create_topics_response import CreateTopicsResponse

RECORD_BYTES = 1024
PRODUCE_PARTITIONS = 6
FAILOVER_PARTITIONS = 3
PRODUCE_INTERVAL_S = 0.002
ROWS = (("RF 1, acks=1", 1, "1"), ("RF 3, acks=1", 3, "1"), ("RF 3, acks=all", 3, "all"))
TIMEOUT = 180.0
CREATE_TOPICS_VERSION = 7


class Unsupported(Exception):
    """The cluster refused a replicated topic, or does not replicate one."""


class NotAcknowledged(Exception):
    """The producer gave up on records."""


def wait_until(condition: Callable[[], object], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (OSError, AssertionError) as exc:  # a broker (re)starting: not yet
            last = exc
        time.sleep(0.02)
    raise TimeoutError(f"no {what} within {timeout:.0f} s (last error: {last!r})")


def create_topic(observer: Any, topic: str, partitions: int, replication_factor: int) -> None:
    """CreateTopics at the controller (``min.insync.replicas=2`` when replicated), then until
    every broker's Metadata shows each partition led with its whole ISR."""
    controller = observer.wait_settled()
    configs = (CreatableTopicConfig("min.insync.replicas", "2"),) if replication_factor > 1 else ()
    request = CreateTopicsRequest(topics=(CreatableTopic(name=topic, num_partitions=partitions,
                                                         replication_factor=replication_factor,
                                                         configs=configs),), timeout_ms=int(TIMEOUT * 1000))
    response = observer.call(controller, request, CREATE_TOPICS_VERSION)
    assert isinstance(response, CreateTopicsResponse)
    (result,) = response.topics
    if result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR and replication_factor > 1:
        raise Unsupported(f"{observer.cluster.name}: replication factor {replication_factor} refused: "
                          f"{result.error_message}")
    if result.error_code != 0:
        raise RuntimeError(f"{observer.cluster.name}: CreateTopics {topic}: error {result.error_code} "
                           f"{result.error_message}")
    for broker_id in observer.cluster.broker_ids():
        wait_until(lambda b=broker_id: observer.all_led(b, topic, partitions, replication_factor),
                   f"{topic} fully replicated in broker {broker_id}'s Metadata")


def bootstrap(observer: Any) -> str:
    return ",".join(observer.cluster.bootstrap(b) for b in observer.cluster.broker_ids())


def kcat_produce(kcat: Path, servers: str, topic: str, records: Path, acks: str,
                 message_timeout_ms: int = 120_000) -> float:
    """Seconds to produce every line of ``records``; raises ``NotAcknowledged`` if kcat
    reports any record undelivered (it exits 0 all the same)."""
    command = [str(kcat), "-b", servers, "-P", "-t", topic, "-l", str(records), "-X", f"acks={acks}",
               "-X", f"message.timeout.ms={message_timeout_ms}", "-X", "linger.ms=5",
               "-X", "queue.buffering.max.messages=1000000", "-X", "batch.size=1000000"]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=message_timeout_ms / 1000 + 120)
    elapsed = time.perf_counter() - began
    failures = [line for line in done.stderr.splitlines() if "failed" in line.lower()]
    if done.returncode != 0 or failures:
        raise NotAcknowledged(f"kcat exit {done.returncode}, {len(failures)} failures, e.g. "
                              f"{(failures or done.stderr.splitlines() or [''])[0]}")
    return elapsed


def check_acks_all(kcat: Path, observer: Any, topic: str, work: Path) -> None:
    """A replicated topic whose acks=all records are never acknowledged (followers not
    fetching yet) has no figures: ``Unsupported``, after 100 records and 20 s."""
    try:
        kcat_produce(kcat, bootstrap(observer), topic, _records_file(work, 100, RECORD_BYTES), "all", 20_000)
    except NotAcknowledged as exc:
        raise Unsupported(f"{observer.cluster.name}: acks=all on RF 3 not acknowledged: {exc}") from exc


class ThroughputFigures:
    """Figures 5 and 6; one instance per benchmark run (the records file is made once)."""

    def __init__(self, work: Path, records: int) -> None:
        self.work = work
        self.kcat = ensure_peers()
        self.records = records
        self.records_file = _records_file(work, records, RECORD_BYTES)
        self.unsupported: set[str] = set()

    def run(self, observer: Any, results: Any, round_number: int) -> None:
        name = observer.cluster.name
        servers = bootstrap(observer)
        megabytes = self.records * RECORD_BYTES / 1e6
        for label, replication_factor, acks in ROWS:
            if replication_factor > 1 and name in self.unsupported:
                continue
            topic = f"produce-rf{replication_factor}-acks{acks}-{round_number}"
            try:
                create_topic(observer, topic, PRODUCE_PARTITIONS, replication_factor)
                if replication_factor > 1:
                    check_acks_all(self.kcat, observer, topic, self.work)
            except Unsupported as exc:
                print(f"  {name}: no RF 3 rows ({exc})", flush=True)
                self.unsupported.add(name)
                observer.delete_topic(topic)
                continue
            elapsed = kcat_produce(self.kcat, servers, topic, self.records_file, acks)
            if results is not None:
                results.add(name, f"5. produce 1 KiB, {label} (MB/s)", megabytes / elapsed)
            if replication_factor > 1:
                self.replica_bytes(observer, topic, replication_factor)
            if acks == "all" or replication_factor == 1:
                broker = Broker(name, servers, stop=lambda: None)
                expected = self.records + (100 if replication_factor > 1 else 0)  # with check_acks_all's
                consumed = kcat_consume(self.kcat, broker, topic, PRODUCE_PARTITIONS, expected)
                if results is not None:
                    results.add(name, f"6. consume 1 KiB, RF {replication_factor} (MB/s)", megabytes / consumed)
            observer.delete_topic(topic)


    def replica_bytes(self, observer: Any, topic: str, replication_factor: int) -> None:
        """A check, not a figure: the topic's segment bytes on every broker's disk (read from
        outside, after every broker's Metadata shows the whole ISR again) against one copy."""
        name = observer.cluster.name
        for broker_id in observer.cluster.broker_ids():
            wait_until(lambda b=broker_id: observer.all_led(b, topic, PRODUCE_PARTITIONS, replication_factor),
                       f"{topic}'s ISR whole in broker {broker_id}'s Metadata")
        directories = [d for d in (self.work / f"{name}-3").rglob(f"{topic}-*") if d.is_dir()]
        copies = sum(f.stat().st_size for d in directories for f in d.glob("*.log")) / 1e6
        print(f"  {name:8} check: {topic} in {len(directories)} replica directories, {copies:.1f} MB "
              f"of segments ({self.records * RECORD_BYTES / 1e6:.1f} MB of values per copy)", flush=True)


@dataclass
class _Acks:
    """Delivery reports as (time sent, time acknowledged), in the producer's thread."""

    times: list[tuple[float, float]]
    errors: int = 0


def _paced_producer(servers: str, topic: str, partition: int, stop: threading.Event, acks: _Acks) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0, "message.timeout.ms": int(TIMEOUT * 1000),
                         "log_level": 3})  # librdkafka's reconnect notices are expected here

    def delivered(sent: float, error: Any, _message: Any) -> None:
        if error is None:
            acks.times.append((sent, time.monotonic()))
        else:
            acks.errors += 1

    while not stop.is_set():
        sent = time.monotonic()
        producer.produce(topic, b"x" * 100, partition=partition,
                         on_delivery=lambda error, message, sent=sent: delivered(sent, error, message))
        deadline = sent + PRODUCE_INTERVAL_S
        while (remaining := deadline - time.monotonic()) > 0:
            producer.poll(remaining)
    producer.flush(30)


def leader_failover(observer: Any, results: Any, round_number: int, how: str) -> None:
    """One round of figure 7 (``how``: "kill" or "term"); ``Unsupported`` if RF 3 is refused."""
    cluster = observer.cluster
    topic = f"failover-{how}-{round_number}"
    create_topic(observer, topic, FAILOVER_PARTITIONS, 3)
    controller = observer.wait_settled()
    leaders = {p: leader for p, leader, _ in observer.partitions(controller, topic)}
    partition, leader = next((p, b) for p, b in sorted(leaders.items()) if b != controller)
    stop = threading.Event()
    acks = _Acks([])
    thread = threading.Thread(target=_paced_producer, args=(bootstrap(observer), topic, partition, stop, acks),
                              daemon=True)
    thread.start()
    try:
        try:
            wait_until(lambda: len(acks.times) >= 50, "the producer's first acknowledgements", 30)
        except TimeoutError as exc:
            raise Unsupported(f"{cluster.name}: acks=all on RF 3 not acknowledged ({exc})") from exc
        observer.drop(leader)
        expired: list[float] = []  # when ZooKeeper deleted the dead leader's registration (SIGKILL)
        if how == "kill" and not observer.zk.exists(f"/brokers/ids/{leader}",
                                                    watch=lambda _event: expired.append(time.monotonic())):
            raise RuntimeError(f"{cluster.name}: broker {leader} not registered before the kill")
        signalled = time.monotonic()
        if how == "kill":
            cluster.kill(leader)
        else:
            process = cluster.send_sigterm(leader)
        wait_until(lambda: any(sent >= signalled for sent, _ in acks.times[-200:]),
                   "an acknowledgement of a record sent after the signal")
        first = min(acked for sent, acked in acks.times if sent >= signalled)
        # Until the controller's Metadata names another leader, then a second of acks more:
        # the longest silence in between is what the producer saw of the failover.
        wait_until(lambda: dict((p, b) for p, b, _ in observer.partitions(controller, topic)).get(partition)
                   not in (leader, -1), f"{topic}-{partition} led by another broker")
        time.sleep(1.0)
    finally:
        stop.set()
        thread.join(60)
    acked = sorted([signalled] + [a for _, a in acks.times if a >= signalled])
    gap = max(later - earlier for earlier, later in itertools.pairwise(acked))
    if how == "term":
        wait_until(lambda: process.poll() is not None, f"broker {leader} exiting")
        cluster.reap(leader)
    if results is not None:
        signal_name = "SIGKILL" if how == "kill" else "SIGTERM"
        unit, scale = ("s", 1.0) if how == "kill" else ("ms", 1000.0)
        results.add(cluster.name, f"7. leader {signal_name} -> next acknowledged record ({unit})",
                    (first - signalled) * scale)
        results.add(cluster.name, f"7. leader {signal_name}: longest gap between acknowledgements ({unit})",
                    gap * scale)
        if expired:
            results.add(cluster.name, "7. ... SIGKILL -> its session expired (s)", expired[0] - signalled)
            results.add(cluster.name, "7. ... session expired -> next acknowledged record (ms)",
                        (first - expired[0]) * 1000)
    cluster.restart(leader)
    observer.wait_settled()
    for broker_id in cluster.broker_ids():
        wait_until(lambda b=broker_id: observer.all_led(b, topic, FAILOVER_PARTITIONS, 3),
                   f"{topic}'s ISR whole again in broker {broker_id}'s Metadata")
    observer.delete_topic(topic)


class FailoverFigures:
    """Figure 7's rounds, or one line saying why a system has none (RF 3 refused)."""

    def __init__(self) -> None:
        self.unsupported: set[str] = set()

    def run(self, observer: Any, results: Any, round_number: int, how: str) -> None:
        name = observer.cluster.name
        if name in self.unsupported:
            return
        try:
            leader_failover(observer, results, round_number, how)
        except Unsupported as exc:
            print(f"  {name}: no leader failover figures ({exc})", flush=True)
            self.unsupported.add(name)


def percentile(values: list[float], fraction: float) -> float:
    """Nearest rank: with fewer than 100 trials, p99 is the largest."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def goals(figures: dict[tuple[str, str], list[float]], systems: list[str], session_timeout_ms: int) -> list[str]:
    """The issue's goals, as ratios of medians (and p50/p99 for the failovers)."""
    import statistics

    def median(figure: str, system: str) -> float | None:
        values = figures.get((figure, system))
        return statistics.median(values) if values else None

    lines = []
    for system in systems:
        rf1 = median("5. produce 1 KiB, RF 1, acks=1 (MB/s)", system)
        rf3 = median("5. produce 1 KiB, RF 3, acks=all (MB/s)", system)
        if rf1 and rf3:
            lines.append(f"{system}: RF 3 acks=all / RF 1 acks=1 = {rf3 / rf1:.2f} (goal >= 0.5)")
    if "strom" in systems and "kafka39" in systems:
        for figure in sorted({f for f, _ in figures if f.startswith(("5.", "6."))}):
            strom, kafka = median(figure, "strom"), median(figure, "kafka39")
            if strom and kafka:
                lines.append(f"{figure}: Strom / Kafka = {strom / kafka:.2f} (goal >= 1.0)")
    kill_bound = session_timeout_ms / 1000 + 1
    for figure, bound, unit in (("7. leader SIGKILL -> next acknowledged record (s)", kill_bound, "s"),
                                ("7. leader SIGKILL: longest gap between acknowledgements (s)", kill_bound, "s"),
                                ("7. leader SIGTERM -> next acknowledged record (ms)", 100.0, "ms"),
                                ("7. leader SIGTERM: longest gap between acknowledgements (ms)", 100.0, "ms")):
        for system in systems:
            values = figures.get((figure, system))
            if values:
                p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
                lines.append(f"{system}: {figure}: p50 {p50:.3f} p99 {p99:.3f} {unit} "
                             f"(goal <= {bound:g} {unit}: {'met' if p99 <= bound else 'missed'})")
    return lines
