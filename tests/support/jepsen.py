"""Histories and a checker in the Jepsen style for Kafka-compatible clusters.

Producers send records whose values are unique (``"<producer>-<seq>"``) and record each
send's outcome: **ok** (acknowledged, with its partition and offset), **fail** (a definite
error: the record was certainly not written) or **info** (a timeout or any error whose
outcome is unknown: "maybe", never counted as lost). Consumers record every
(partition, offset, value) they poll, under a *session* that changes whenever their
assignment does (a rebalance may legitimately rewind positions), and their commits. After
the faults, a *final read* consumes every partition from its start to its end.

The checker (Jepsen's Kafka/Redpanda checkers, jepsen-io/redpanda) reports:

- **lost**: acknowledged, but absent from the final read;
- **duplicated**: one value at two offsets (an anomaly only if its producer was
  idempotent; otherwise counted, since retries without idempotence may duplicate);
- **inconsistent offsets**: two values at one (partition, offset) across every reader and
  every acknowledgement;
- **non-monotonic**: within one consumer session, a partition's polled offsets not
  strictly increasing;
- **unexpected**: a value read that no producer ever sent;
- **failed but read**: a send answered with a definite error whose value is read anyway
  (the error was not definite after all);
- **regressed commits**: an acknowledged commit above the group's committed offset read
  after the test (a commit lost when the coordinator moved).

Drivers for confluent-kafka (librdkafka, in threads) and Strom's own client (asyncio, in a
thread with its own event loop) run for a bounded time with seeded random choices; a
``Workload`` runs several of them at once and ends with the final read. Everything is
recorded with a lock, so drivers of both kinds share one ``History``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Outcome = Literal["ok", "fail", "info"]

# Produce errors after which the record is certainly not in the log: refused before any
# append, as Kafka's Partition.appendRecordsToLeader / the validator refuse them. Anything
# else (timeouts, NOT_ENOUGH_REPLICAS_AFTER_APPEND, a lost connection, retries exhausted
# on a retriable error) is "info".
DEFINITE_PRODUCE_ERRORS = frozenset({
    "MESSAGE_TOO_LARGE", "MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD", "CORRUPT_MESSAGE",
    "INVALID_TIMESTAMP", "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "INVALID_REQUIRED_ACKS",
    "INVALID_TOPIC_EXCEPTION", "UNSUPPORTED_FOR_MESSAGE_FORMAT", "NOT_ENOUGH_REPLICAS",
})


@dataclass(frozen=True, slots=True)
class Send:
    process: str
    value: str
    outcome: Outcome
    partition: int = -1
    offset: int = -1
    idempotent: bool = False
    error: str = ""


@dataclass(frozen=True, slots=True)
class Poll:
    session: str  # "final" for the final read
    partition: int
    offset: int
    value: str


@dataclass(frozen=True, slots=True)
class Commit:
    session: str
    partition: int
    offset: int
    outcome: Outcome


@dataclass
class History:
    """What the clients saw; safe to record into from several threads."""

    sends: list[Send] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    final_committed: dict[int, int] | None = None  # the group's offsets read after the test
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def sent(self, send: Send) -> None:
        with self._lock:
            self.sends.append(send)

    def polled(self, session: str, partition: int, offset: int, value: bytes | str | None) -> None:
        text = value.decode(errors="replace") if isinstance(value, bytes) else (value or "")
        with self._lock:
            self.polls.append(Poll(session, partition, offset, text))

    def committed(self, session: str, offsets: Iterable[tuple[int, int]], outcome: Outcome) -> None:
        with self._lock:
            self.commits.extend(Commit(session, p, o, outcome) for p, o in offsets)

    def to_json(self) -> str:
        """The whole history, to keep beside a failed test's report."""
        with self._lock:
            return json.dumps({"sends": [asdict(s) for s in self.sends], "polls": [asdict(p) for p in self.polls],
                               "commits": [asdict(c) for c in self.commits],
                               "final_committed": self.final_committed})

    @classmethod
    def from_json(cls, text: str) -> History:
        data = json.loads(text)
        final = data.get("final_committed")
        return cls([Send(**s) for s in data["sends"]], [Poll(**p) for p in data["polls"]],
                   [Commit(**c) for c in data["commits"]],
                   None if final is None else {int(k): v for k, v in final.items()})


@dataclass
class Report:
    lost: list[Send] = field(default_factory=list)
    duplicated: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # idempotent producers
    duplicated_allowed: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # others
    inconsistent_offsets: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    nonmonotonic: list[tuple[str, int, int, int]] = field(default_factory=list)  # session, partition, prev, offset
    unexpected: list[Poll] = field(default_factory=list)
    failed_but_read: list[Send] = field(default_factory=list)
    regressed_commits: list[tuple[Commit, int]] = field(default_factory=list)  # commit, final committed
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not (self.lost or self.duplicated or self.inconsistent_offsets or self.nonmonotonic
                    or self.unexpected or self.failed_but_read or self.regressed_commits)

    def summary(self) -> str:
        parts = [f"{name}={count}" for name, count in self.counts.items()]
        anomalies = {
            "lost": len(self.lost), "duplicated": len(self.duplicated),
            "inconsistent-offsets": len(self.inconsistent_offsets), "nonmonotonic": len(self.nonmonotonic),
            "unexpected": len(self.unexpected), "failed-but-read": len(self.failed_but_read),
            "regressed-commits": len(self.regressed_commits),
        }
        parts += [f"{name}={count}" for name, count in anomalies.items() if count]
        head = "valid" if self.valid else "INVALID"
        examples = [f"lost e.g. {self.lost[:3]}"] if self.lost else []
        examples += [f"duplicated e.g. {dict(list(self.duplicated.items())[:3])}"] if self.duplicated else []
        examples += [f"inconsistent e.g. {dict(list(self.inconsistent_offsets.items())[:3])}"] \
            if self.inconsistent_offsets else []
        examples += [f"nonmonotonic e.g. {self.nonmonotonic[:3]}"] if self.nonmonotonic else []
        examples += [f"unexpected e.g. {self.unexpected[:3]}"] if self.unexpected else []
        return "; ".join([head + ": " + " ".join(parts), *examples])


def check(history: History) -> Report:
    """Every anomaly the history shows (see the module docstring)."""
    report = Report()
    sends = {s.value: s for s in history.sends}
    final_values = {p.value for p in history.polls if p.session == "final"}
    # Where each value was seen (read or acknowledged), and what each offset holds.
    places: dict[str, set[tuple[int, int]]] = defaultdict(set)
    at_offset: dict[tuple[int, int], set[str]] = defaultdict(set)
    for send in history.sends:
        if send.outcome == "ok" and send.offset >= 0:
            places[send.value].add((send.partition, send.offset))
            at_offset[(send.partition, send.offset)].add(send.value)
    last: dict[tuple[str, int], int] = {}
    for poll in history.polls:
        places[poll.value].add((poll.partition, poll.offset))
        at_offset[(poll.partition, poll.offset)].add(poll.value)
        key = (poll.session, poll.partition)
        previous = last.get(key)
        if previous is not None and poll.offset <= previous:
            report.nonmonotonic.append((poll.session, poll.partition, previous, poll.offset))
        last[key] = poll.offset
        if poll.value not in sends:
            report.unexpected.append(poll)
    report.lost = [s for s in history.sends if s.outcome == "ok" and s.value not in final_values]
    for value, where in places.items():
        if len(where) > 1:
            send = sends.get(value)
            target = report.duplicated if send is not None and send.idempotent else report.duplicated_allowed
            target[value] = sorted(where)
    report.inconsistent_offsets = {k: sorted(v) for k, v in sorted(at_offset.items()) if len(v) > 1}
    read_values = set(places)
    report.failed_but_read = [s for s in history.sends if s.outcome == "fail" and s.value in read_values]
    if history.final_committed is not None:
        for commit in history.commits:
            final = history.final_committed.get(commit.partition, -1)
            if commit.outcome == "ok" and commit.offset > final:
                report.regressed_commits.append((commit, final))
    outcomes = defaultdict(int)
    for send in history.sends:
        outcomes[send.outcome] += 1
    report.counts = {"ok": outcomes["ok"], "fail": outcomes["fail"], "info": outcomes["info"],
                     "polled": len(history.polls), "final": len(final_values),
                     "duplicated-allowed": len(report.duplicated_allowed),
                     "commits-ok": sum(c.outcome == "ok" for c in history.commits)}
    return report


# -- drivers -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ProducerSpec:
    name: str
    client: Literal["confluent", "strom"] = "confluent"
    idempotent: bool = True
    acks: int = -1
    rate: float = 200.0  # records per second, on average (seeded random gaps)
    extra: tuple[tuple[str, str], ...] = ()  # more client properties, Kafka's names


@dataclass(frozen=True)
class ConsumerSpec:
    name: str
    client: Literal["confluent", "strom"] = "confluent"
    group: str = "jepsen"
    commit_every: int = 50  # records between synchronous commits
    extra: tuple[tuple[str, str], ...] = ()


def _produce_outcome(error_name: str) -> Outcome:
    return "fail" if error_name in DEFINITE_PRODUCE_ERRORS else "info"


def run_confluent_producer(history: History, bootstrap: str, topic: str, partitions: int, spec: ProducerSpec,
                           seed: int, stop: threading.Event, drain_s: float = 30.0) -> None:
    """Send until ``stop``, then wait up to ``drain_s`` for outstanding answers; a record
    still unanswered is "info"."""
    from confluent_kafka import KafkaError as CKafkaError
    from confluent_kafka import Producer

    rng = random.Random(seed)
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": str(spec.acks),
                              "enable.idempotence": spec.idempotent, "linger.ms": 5,
                              "message.timeout.ms": 20000, "request.timeout.ms": 5000,
                              "client.id": spec.name, **dict(spec.extra)}
    producer = Producer(config)
    pending: set[str] = set()
    lock = threading.Lock()

    def delivered(error: CKafkaError | None, message: Any) -> None:
        value = message.value().decode()
        with lock:
            pending.discard(value)
        if error is None:  # librdkafka reports no offset (None) when the broker gave none
            offset = message.offset()
            history.sent(Send(spec.name, value, "ok", message.partition(), -1 if offset is None else offset,
                              spec.idempotent))
        else:
            history.sent(Send(spec.name, value, _produce_outcome(error.name()), message.partition(), -1,
                              spec.idempotent, error.name()))

    seq = 0
    while not stop.is_set():
        value = f"{spec.name}-{seq}"
        seq += 1
        with lock:
            pending.add(value)
        try:
            producer.produce(topic, value.encode(), partition=rng.randrange(partitions), on_delivery=delivered)
        except BufferError:
            with lock:
                pending.discard(value)  # never queued: nothing was sent
            producer.poll(0.1)
            continue
        producer.poll(0)
        stop.wait(rng.expovariate(spec.rate))
    producer.flush(drain_s)
    with lock:
        unanswered = sorted(pending)
    for value in unanswered:
        history.sent(Send(spec.name, value, "info", idempotent=spec.idempotent, error="unanswered"))


def run_confluent_consumer(history: History, bootstrap: str, topic: str, spec: ConsumerSpec,
                           stop: threading.Event) -> None:
    """Consume in a group until ``stop``, committing synchronously every ``commit_every``
    records; a new session begins at every assignment."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    generation = [0]

    def assigned(consumer: Any, partitions: list[Any]) -> None:
        generation[0] += 1

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": spec.group, "client.id": spec.name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, **dict(spec.extra)})
    consumer.subscribe([topic], on_assign=assigned)
    uncommitted: dict[int, int] = {}
    since_commit = 0
    try:
        while not stop.is_set():
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            session = f"{spec.name}-{generation[0]}"
            history.polled(session, message.partition(), message.offset(), message.value())
            uncommitted[message.partition()] = message.offset() + 1
            since_commit += 1
            if since_commit >= spec.commit_every:
                offsets = sorted(uncommitted.items())
                uncommitted, since_commit = {}, 0
                try:
                    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets], asynchronous=False)
                    history.committed(session, offsets, "ok")
                except KafkaException:
                    history.committed(session, offsets, "info")
    finally:
        consumer.close()


async def _strom_producer(history: History, bootstrap: str, topic: str, partitions: int, spec: ProducerSpec,
                          seed: int, stop: threading.Event, drain_s: float) -> None:
    from strom.client import AsyncProducer, KafkaError

    rng = random.Random(seed)
    config = {"bootstrap.servers": bootstrap, "acks": spec.acks, "enable.idempotence": spec.idempotent,
              "client.id": spec.name, "request.timeout.ms": 5000, "delivery.timeout.ms": 20000,
              **dict(spec.extra)}
    unanswered: set[str] = set()
    waits: list[asyncio.Task[None]] = []

    async def outcome(value: str, future: Awaitable[Any]) -> None:
        try:
            metadata = await future
        except KafkaError as exc:
            name = exc.error_code.name
            history.sent(Send(spec.name, value, _produce_outcome(name), idempotent=spec.idempotent, error=name))
        except Exception as exc:  # timeouts, connections: the outcome is unknown
            history.sent(Send(spec.name, value, "info", idempotent=spec.idempotent, error=type(exc).__name__))
        else:  # an acknowledgement without an offset still counts for "lost"
            offset = metadata.offset if metadata.offset is not None else -1
            history.sent(Send(spec.name, value, "ok", metadata.partition, offset, spec.idempotent))
        unanswered.discard(value)

    producer = AsyncProducer(config)
    try:
        seq = 0
        while not stop.is_set():
            value = f"{spec.name}-{seq}"
            seq += 1
            unanswered.add(value)
            try:
                future = await producer.send(topic, value.encode(), partition=rng.randrange(partitions))
            except Exception as exc:  # refused before it was queued: not sent at all
                unanswered.discard(value)
                history.sent(Send(spec.name, value, "fail", idempotent=spec.idempotent, error=type(exc).__name__))
                await asyncio.sleep(0.1)
                continue
            waits.append(asyncio.ensure_future(outcome(value, future)))
            await asyncio.sleep(rng.expovariate(spec.rate))
        if waits:
            await asyncio.wait(waits, timeout=drain_s)
    finally:
        for task in waits:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer.close(0), drain_s)
    for value in sorted(unanswered):
        history.sent(Send(spec.name, value, "info", idempotent=spec.idempotent, error="unanswered"))


def run_strom_producer(history: History, bootstrap: str, topic: str, partitions: int, spec: ProducerSpec,
                       seed: int, stop: threading.Event, drain_s: float = 30.0) -> None:
    asyncio.run(_strom_producer(history, bootstrap, topic, partitions, spec, seed, stop, drain_s))


async def _strom_consumer(history: History, bootstrap: str, topic: str, spec: ConsumerSpec,
                          stop: threading.Event) -> None:
    from strom.client import AsyncConsumer, KafkaError

    generation = [0]

    class Listener:
        def on_partitions_assigned(self, partitions: frozenset[Any]) -> None:
            generation[0] += 1

        def on_partitions_revoked(self, partitions: frozenset[Any]) -> None:
            generation[0] += 1

        def on_partitions_lost(self, partitions: frozenset[Any]) -> None:
            generation[0] += 1

    consumer = AsyncConsumer({"bootstrap.servers": bootstrap, "group.id": spec.group, "client.id": spec.name,
                              "auto.offset.reset": "earliest", "enable.auto.commit": False,
                              "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, **dict(spec.extra)})
    consumer.subscribe([topic], listener=Listener())
    uncommitted: dict[int, int] = {}
    since_commit = 0
    try:
        while not stop.is_set():
            try:
                records = await consumer.poll(200)
            except KafkaError:
                continue
            session = f"{spec.name}-{generation[0]}"
            for record in records:
                history.polled(session, record.partition, record.offset, record.value)
                uncommitted[record.partition] = record.offset + 1
            since_commit += len(records)
            if since_commit >= spec.commit_every:
                offsets = sorted(uncommitted.items())
                uncommitted, since_commit = {}, 0
                try:
                    await consumer.commit({(topic, p): o for p, o in offsets})
                    history.committed(session, offsets, "ok")
                except Exception:  # a failed or unknown commit: "info"
                    history.committed(session, offsets, "info")
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(consumer.close(), 30)


def run_strom_consumer(history: History, bootstrap: str, topic: str, spec: ConsumerSpec,
                       stop: threading.Event) -> None:
    asyncio.run(_strom_consumer(history, bootstrap, topic, spec, stop))


def final_read(history: History, bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0,
               group: str | None = None) -> None:
    """Read every partition from its start to its end (the high watermark when the read
    begins) with librdkafka, recording each record as session "final"; with ``group``,
    also record the group's committed offsets."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jepsen-final-read",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1]
                for p in range(partitions)}
        positions = {p: -1 for p in ends}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends if ends[p] > 0])
        deadline = time.monotonic() + timeout_s
        while any(positions[p] + 1 < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"final read of {topic} stopped at {positions}, ends {ends}")
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            history.polled("final", message.partition(), message.offset(), message.value())
            positions[message.partition()] = message.offset()
        if group is not None:
            grouped = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
            try:
                committed = grouped.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=timeout_s)
                history.final_committed = {tp.partition: tp.offset for tp in committed}
            finally:
                grouped.close()
    finally:
        consumer.close()


@dataclass
class Workload:
    """Producers and consumers run at once for ``duration_s`` (while the test injects
    faults through ``during``), then the final read; ``run`` returns the checker's report."""

    bootstrap: str
    topic: str
    partitions: int
    producers: list[ProducerSpec]
    consumers: list[ConsumerSpec] = field(default_factory=list)
    seed: int = 0
    history: History = field(default_factory=History)

    def run(self, duration_s: float, during: Callable[[threading.Event], None] | None = None,
            final_timeout_s: float = 60.0) -> Report:
        stop = threading.Event()
        threads = [self._thread(spec, index, stop) for index, spec in enumerate(self.producers)]
        threads += [self._thread(spec, index, stop) for index, spec in enumerate(self.consumers)]
        deadline = time.monotonic() + duration_s
        for thread in threads:
            thread.start()
        try:
            if during is not None:
                during(stop)
            stop.wait(max(0.0, deadline - time.monotonic()))
        finally:
            stop.set()
            for thread in threads:
                thread.join(120)
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            raise RuntimeError(f"drivers did not stop: {stuck}")
        groups = {spec.group for spec in self.consumers}
        final_read(self.history, self.bootstrap, self.topic, self.partitions, final_timeout_s,
                   group=next(iter(groups)) if len(groups) == 1 else None)
        return check(self.history)

    def _thread(self, spec: ProducerSpec | ConsumerSpec, index: int, stop: threading.Event) -> threading.Thread:
        target: Callable[..., None]
        if isinstance(spec, ProducerSpec):
            target = run_confluent_producer if spec.client == "confluent" else run_strom_producer
            args: tuple[Any, ...] = (self.history, self.bootstrap, self.topic, self.partitions, spec,
                                     self.seed * 1000 + index, stop)
        else:
            target = run_confluent_consumer if spec.client == "confluent" else run_strom_consumer
            args = (self.history, self.bootstrap, self.topic, spec, stop)
        return threading.Thread(target=target, args=args, name=f"jepsen-{spec.name}", daemon=True)
