"""Replication under SIGKILL (issue 18, tests 1, 6 and 9): what an acks=all client was told
survives a broker's death, whichever broker it is.

- **Kill trials**: 3 brokers, a topic with RF 3 and ``min.insync.replicas=2`` (the broker's
  default, so ``__consumer_offsets`` has it too, with RF 3), idempotent acks=all producers
  (librdkafka and Strom's client) and a two-member group run while each trial SIGKILLs a
  broker (in turn the leader of a partition, the controller, a follower, the group's
  coordinator), waits for the cluster to move on without it and starts it again. The
  Jepsen checker (``tests.support.jepsen``) must find nothing lost, duplicated or
  inconsistent and no regressed commit; the consumers poll and commit after the last
  fault; each restarted broker is back in every ISR; and after a clean stop every replica
  of every partition holds the same batches (base offset, leader epoch, CRC).
  ``STROM_REPLICATION_TRIALS`` (default 10) sets the trials, ``STROM_REPLICATION_SEED``
  the seed: ``for s in 1 2 3; do STROM_REPLICATION_SEED=$s STROM_REPLICATION_TRIALS=40
  .venv/bin/python -m pytest tests/cluster/test_replication_kills.py -k trials; done``.
- **Last replica standing**: with unclean election off, a partition whose only in-sync
  replica died stays offline while the other replicas are up, and comes back, with all it
  acknowledged, when that replica does.
- **Compatibility on a replicated cluster**: the group-commit-restart-resume scenario of
  every client (tests/compat) against 3 brokers with RF 3 topics, the "restart" being a
  controlled restart of the group's coordinator.

Every wait is on ZooKeeper state (after a sync) or what clients see, never a sleep; the
ZooKeeper session timeout is 3 s (tickTime 500, so it is not raised: checked) and
``replica.lag.time.max.ms`` 2 s, so a trial takes a few seconds.
"""

from __future__ import annotations

import importlib
import inspect
import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from strom.cluster.zk_client import KafkaZkClient
from strom.cluster.zk_data import LeaderAndIsr
from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from strom.protocol.records.header import iter_batches
from tests.support.cluster import StromCluster
from tests.support.jepsen import ConsumerSpec, History, ProducerSpec, Workload
from tests.support.spark_session import spark as spark
from tests.support.zookeeper import zookeeper as zookeeper

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.zookeeper

SESSION_TIMEOUT_MS = 3000
TRIALS = int(os.environ.get("STROM_REPLICATION_TRIALS", "10"))
SEED = int(os.environ.get("STROM_REPLICATION_SEED", "18"))
OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 3
BROKERS = [1, 2, 3]
REPLICATED = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": "2000",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "unclean.leader.election.enable": "false",
    # The last broker of a stopping cluster cannot hand its leaderships to anyone: it retries
    # its controlled shutdown (Kafka's 3 x 5 s) before stopping anyway; 3 x 0.5 s here.
    "controlled.shutdown.retry.backoff.ms": "500",
}


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> Iterator[StromCluster]:
    with StromCluster(tmp_path, f"{zookeeper.connect_string}/kills-{uuid.uuid4().hex[:8]}",
                      overrides=REPLICATED) as started:
        yield started


def _states(cluster: StromCluster, topic: str, partitions: int) -> dict[int, LeaderAndIsr]:
    cluster.zk.sync()
    states = cluster.zk.get_partition_states({(topic, p) for p in range(partitions)})
    return {tp[1]: state.leader_and_isr for tp, state in states.items()}


def _fully_replicated(cluster: StromCluster, topics: dict[str, int]) -> bool:
    """Every partition of ``topics`` led, with every broker in its ISR (ZooKeeper's word)."""
    for topic, partitions in topics.items():
        states = _states(cluster, topic, partitions)
        if len(states) < partitions or any(s.leader < 0 or sorted(s.isr) != BROKERS for s in states.values()):
            return False
    return True


def _create(cluster: StromCluster, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3, config=config or {})],
                        operation_timeout=60)[topic].result(60)
    cluster.wait_until(lambda: _fully_replicated(cluster, {topic: partitions}), what=f"{topic} fully replicated")


def _batches(directory: Path) -> list[tuple[int, int, int]]:
    """(base offset, partition leader epoch, CRC) of every batch in a partition directory."""
    found: list[tuple[int, int, int]] = []
    for segment in sorted(directory.glob("*.log")):
        found += [(h.base_offset, h.partition_leader_epoch, h.crc) for _, h in iter_batches(segment.read_bytes())]
    return found


def test_the_session_timeout_asked_for_is_the_one_zookeeper_grants(zookeeper: ZooKeeperEnsemble) -> None:
    """What the issue asks to report: ZooKeeper (tickTime 500) neither raises nor lowers 3 s."""
    client = KafkaZkClient(zookeeper.connect_string, session_timeout_ms=SESSION_TIMEOUT_MS,
                           connection_timeout_ms=30_000)
    client.connect()
    try:
        negotiated = client.kazoo._session_timeout  # kazoo keeps the server's answer here
    finally:
        client.close()
    print(f"negotiated ZooKeeper session timeout: {negotiated} ms")
    assert negotiated == SESSION_TIMEOUT_MS


class _Trials:
    """SIGKILL one broker per trial, in turn the leader of a random partition, the controller,
    a follower, the group's coordinator; wait for the cluster to fail over (the victim gone
    from ZooKeeper, no partition led by it), start it again and wait until it is back in
    every ISR."""

    ROLES = ("leader", "controller", "follower", "coordinator")

    def __init__(self, cluster: StromCluster, topic: str, partitions: int, group: str, rng: random.Random) -> None:
        self.cluster = cluster
        self.group = group
        self.topics = {topic: partitions, OFFSETS: OFFSETS_PARTITIONS}
        self.topic = topic
        self.partitions = partitions
        self.rng = rng
        self.killed: list[tuple[str, int]] = []
        self.restarts = 0
        self.durations: list[float] = []

    def victim(self, role: str) -> int:
        states = _states(self.cluster, self.topic, self.partitions)
        state = states[self.rng.randrange(self.partitions)]
        if role == "leader":
            return state.leader
        if role == "controller":
            return self.cluster.controller_id()
        if role == "coordinator":  # the leader of the group's __consumer_offsets partition
            return self.coordinator()
        return self.rng.choice([b for b in state.isr if b != state.leader])

    def coordinator(self) -> int:
        """The group's coordinator (-1, an answer from a broker still learning, is waited out)."""
        found: int = self.cluster.wait_until(lambda: max(self.cluster.find_coordinator(self.group), 0),
                                             what=f"{self.group}'s coordinator")
        return found

    def wait_for_failover(self, victim: int) -> None:
        cluster = self.cluster
        cluster.wait_until(lambda: victim not in cluster.zk.get_all_brokers(), what=f"broker {victim} expired")
        cluster.wait_until(lambda: all(s.leader not in (-1, victim) for topic, n in self.topics.items()
                                       for s in _states(cluster, topic, n).values()),
                           what=f"every partition led by a broker other than {victim}")

    def run(self, trials: int) -> None:
        cluster = self.cluster
        for trial in range(trials):
            began = time.monotonic()
            role = self.ROLES[trial % len(self.ROLES)]
            victim = self.victim(role)
            assert victim in BROKERS, f"no {role} to kill: {victim}"
            cluster.kill(victim)
            self.killed.append((role, victim))
            self.wait_for_failover(victim)
            cluster.restart(victim)
            self.restarts += 1
            cluster.wait_until(lambda: _fully_replicated(cluster, self.topics),
                               what=f"broker {victim} back in every ISR")
            self.durations.append(time.monotonic() - began)


def _consumers_went_on(history: History, names: list[str], mark: int) -> bool:
    with history._lock:
        polled = {poll.session.rsplit("-", 1)[0] for poll in history.polls[mark:]}
    return set(names) <= polled


def test_kill_trials_lose_nothing_and_replicas_end_identical(cluster: StromCluster) -> None:
    topic, partitions = "kills", 3
    _create(cluster, topic, partitions)
    producers = [ProducerSpec("confluent-p", "confluent", rate=150.0), ProducerSpec("strom-p", "strom", rate=150.0)]
    consumers = [ConsumerSpec("member-a", group="kills-group", commit_every=20),
                 ConsumerSpec("member-b", group="kills-group", commit_every=20)]
    workload = Workload(cluster.bootstrap, topic, partitions, producers, consumers, seed=SEED)
    history = workload.history
    trials = _Trials(cluster, topic, partitions, "kills-group", random.Random(SEED))
    after_faults: dict[str, int] = {}

    def faults(stop: threading.Event) -> None:
        # The group is up (so is __consumer_offsets, RF 3) and both members read before any fault.
        cluster.wait_until(lambda: _consumers_went_on(history, ["member-a", "member-b"], 0),
                           what="both members polling")
        cluster.wait_until(lambda: _fully_replicated(cluster, {OFFSETS: OFFSETS_PARTITIONS}),
                           what=f"{OFFSETS} fully replicated")
        trials.run(TRIALS)
        mark, commits = len(history.polls), len(history.commits)
        cluster.wait_until(lambda: _consumers_went_on(history, ["member-a", "member-b"], mark),
                           what="both members polling after the last fault")
        cluster.wait_until(lambda: any(c.outcome == "ok" for c in history.commits[commits:]),
                           what="a commit acknowledged after the last fault")
        after_faults["polls"] = len(history.polls) - mark

    report = workload.run(duration_s=1.0, during=faults)
    unknown = Counter((send.process, send.error) for send in history.sends if send.outcome == "info")
    print(f"trials: {trials.killed}; seconds each: {[round(d, 1) for d in trials.durations]}; {report.summary()}; "
          f"outcome unknown (info) by producer and error: {dict(unknown)}")
    assert len(trials.killed) == trials.restarts == TRIALS
    assert {role for role, _ in trials.killed} == set(_Trials.ROLES[:TRIALS])
    assert report.valid, report.summary()
    assert report.counts["ok"] > 0 and report.counts["commits-ok"] > 0
    assert history.final_committed is not None and not report.regressed_commits
    assert after_faults["polls"] > 0

    # Identical replicas: every broker in every ISR again, then a clean stop and the bytes compared.
    cluster.wait_until(lambda: _fully_replicated(cluster, {topic: partitions}), what="every ISR full")
    cluster.stop()
    for partition in range(partitions):
        logs = {b: _batches(cluster.brokers[b].data_dir / f"{topic}-{partition}") for b in BROKERS}
        assert logs[1], f"partition {partition} is empty"
        assert logs[1] == logs[2] == logs[3], f"replicas of {topic}-{partition} differ: {_first_difference(logs)}"


def _first_difference(logs: dict[int, list[tuple[int, int, int]]]) -> str:
    lengths = {b: len(batches) for b, batches in logs.items()}
    for index, entries in enumerate(zip(*logs.values(), strict=False)):
        if len(set(entries)) > 1:
            return f"batch {index}: {dict(zip(logs, entries, strict=True))}; batches per broker {lengths}"
    return f"batches per broker {lengths}"


def _produce(cluster: StromCluster, topic: str, values: list[str], timeout_ms: int = 30_000) -> dict[str, str]:
    """Send ``values`` with acks=all to partition 0; value -> "" if acknowledged, else the error."""
    from confluent_kafka import Producer

    outcomes: dict[str, str] = {}

    def delivered(error: Any, message: Any) -> None:
        outcomes[bytes(message.value() or b"").decode()] = "" if error is None else error.name()

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": timeout_ms, "request.timeout.ms": min(timeout_ms, 5000)})
    for value in values:
        producer.produce(topic, value.encode(), partition=0, on_delivery=delivered)
    producer.flush(timeout_ms / 1000 + 30)
    return outcomes


def _read(cluster: StromCluster, topic: str) -> list[str]:
    """Partition 0 from its start to its high watermark."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=60)[1]
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[str] = []
        deadline = time.monotonic() + 60
        while len(values) < end and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(bytes(message.value() or b"").decode())
        return values
    finally:
        consumer.close()


def _held_for(seconds: float, read: Callable[[], object], expected: object) -> None:
    """``read()`` stays ``expected`` for ``seconds``: an absence (no election) is only seen over time."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert read() == expected
        time.sleep(0.2)


def _wait_for_no_leader(cluster: StromCluster, topic: str, via: int) -> None:
    cluster.wait_until(lambda: cluster.leaders(topic, via=via) == {0: -1}, what=f"broker {via} reporting no leader")


def test_the_last_replica_standing_alone_brings_its_partition_back(cluster: StromCluster) -> None:
    topic = "last-standing"
    _create(cluster, topic, 1, {"min.insync.replicas": "1", "unclean.leader.election.enable": "false"})
    leader = _states(cluster, topic, 1)[0].leader
    followers = [b for b in BROKERS if b != leader]
    shared = _produce(cluster, topic, [f"shared-{i}" for i in range(100)])
    assert set(shared.values()) == {""}, shared

    for follower in followers:  # both followers die
        cluster.kill(follower)
    cluster.wait_until(lambda: not set(followers) & set(cluster.zk.get_all_brokers()), what="the followers expired")
    # As Kafka's: a dead follower as far along as the leader is not out of sync until the
    # leader's log moves on; these appends wait replica.lag.time.max.ms for the shrink, then
    # min.insync.replicas=1 lets the leader alone acknowledge them.
    alone = _produce(cluster, topic, [f"alone-{i}" for i in range(100)])
    assert set(alone.values()) == {""}, alone
    cluster.wait_until(lambda: _states(cluster, topic, 1)[0].isr == (leader,), what=f"the ISR shrunk to {leader}")

    cluster.kill(leader)  # the last in-sync replica, and the last broker (so the controller) too
    cluster.wait_until(lambda: leader not in cluster.zk.get_all_brokers(), what=f"broker {leader} expired")
    for follower in followers:
        cluster.restart(follower)
    cluster.wait_until(lambda: set(followers) <= set(cluster.zk.get_all_brokers()), what="the followers back")
    cluster.wait_until(lambda: cluster.controller_id() in followers, what="a controller among the followers")
    for follower in followers:  # each knows it is offline (its Metadata), and no election happens
        _wait_for_no_leader(cluster, topic, follower)
    # ZooKeeper: no leader, the last ISR kept (Kafka's: the sole member stays in it).
    cluster.wait_until(lambda: _states(cluster, topic, 1)[0].leader == -1, what="no leader in ZooKeeper")
    offline = _states(cluster, topic, 1)[0]
    assert offline.isr == (leader,), offline
    _held_for(SESSION_TIMEOUT_MS / 1000 + 1, lambda: _states(cluster, topic, 1)[0], offline)
    refused = _produce(cluster, topic, ["while-offline"], timeout_ms=3000)
    assert refused["while-offline"] != "", "a produce to an offline partition was acknowledged"

    cluster.restart(leader)  # the last replica standing leads again, with everything it acknowledged
    cluster.wait_until(lambda: _states(cluster, topic, 1)[0].leader == leader, what=f"{leader} leading again")
    cluster.wait_until(lambda: _fully_replicated(cluster, {topic: 1}), what="the followers back in the ISR")
    values = _read(cluster, topic)
    acknowledged = [v for v, error in {**shared, **alone}.items() if not error]
    assert sorted(values) == sorted(acknowledged), f"lost: {set(acknowledged) - set(values)}"


# -- the compatibility scenarios on a replicated cluster (issue 18, test 9) --------------------
class _ClusterAsBroker:
    """What a tests/compat scenario uses of its ``BrokerProcess`` (``bootstrap``, ``restart``),
    answered by a 3-broker cluster: ``restart`` is a controlled restart (SIGTERM, start) of
    the group's coordinator, so the scenario's commits must survive a coordinator move on
    the replicated ``__consumer_offsets``."""

    def __init__(self, cluster: StromCluster, group: str) -> None:
        self.cluster = cluster
        self.group = group
        self.restarted: list[int] = []

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def restart(self) -> None:
        cluster = self.cluster
        coordinator = cluster.wait_until(lambda: (c := cluster.find_coordinator(self.group)) > 0 and c,
                                         what=f"{self.group}'s coordinator")
        assert cluster.terminate(coordinator) == 0
        cluster.restart(coordinator)
        self.restarted.append(coordinator)
        cluster.wait_until(lambda: _fully_replicated(cluster, _all_topics(cluster)), what="every ISR full again")


def _all_topics(cluster: StromCluster) -> dict[str, int]:
    cluster.zk.sync()
    assignments = cluster.zk.get_topic_assignments(cluster.zk.get_all_topics())
    return {topic: len(assignment.partitions) for topic, assignment in assignments.items()}


def _replicated_creator(original: Callable[..., None]) -> Callable[..., None]:
    """The scenarios' own topic creation (same arguments, same defaults) without their
    explicit replication factor of 1: the cluster's default.replication.factor (3) applies."""
    signature = inspect.signature(original)

    def create(*args: Any, **kwargs: Any) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        broker, topic, partitions = list(bound.arguments.values())[:3]
        config = bound.arguments.get("config") or {}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, partitions, config=config)], operation_timeout=60)[topic].result(60)
        broker.cluster.wait_until(lambda: _fully_replicated(broker.cluster, {topic: partitions}),
                                  what=f"{topic} fully replicated")

    return create


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperEnsemble) -> Iterator[StromCluster]:
    directory = tmp_path_factory.mktemp("replicated-compat")
    with StromCluster(directory, f"{zookeeper.connect_string}/compat-{uuid.uuid4().hex[:8]}",
                      overrides=REPLICATED) as started:
        yield started


# (client, module, scenario, group, topic): each client's group-commit-restart-resume scenario.
COMPAT_SCENARIOS = [
    ("confluent-kafka", "tests.compat.test_groups", "test_confluent_commit_then_restart_resumes_exactly",
     "billing", "orders"),
    ("kafka-python", "tests.compat.test_groups", "test_kafka_python_group_commit_and_resume", "analytics", "clicks"),
    ("aiokafka", "tests.compat.test_matrix_aiokafka", "test_aiokafka_group_commit_restart_resume",
     "aio-billing", "aio-orders"),
    ("kcat", "tests.compat.test_matrix_kcat", "test_kcat_group_commit_restart_resume", "kc-billing", "kc-orders"),
]


@pytest.mark.parametrize(("client", "module", "scenario", "group", "topic"), COMPAT_SCENARIOS,
                         ids=[row[0] for row in COMPAT_SCENARIOS])
def test_a_client_commits_and_resumes_across_a_coordinator_restart_on_a_replicated_cluster(
        replicated: StromCluster, monkeypatch: pytest.MonkeyPatch, client: str, module: str, scenario: str,
        group: str, topic: str) -> None:
    scenarios = importlib.import_module(module)
    for creator in ("_create", "_create_topic"):  # whichever the module uses
        if hasattr(scenarios, creator):
            monkeypatch.setattr(scenarios, creator, _replicated_creator(getattr(scenarios, creator)))
    broker = _ClusterAsBroker(replicated, group)
    getattr(scenarios, scenario)(broker)
    assert len(broker.restarted) == 1, f"{client}'s scenario restarted {broker.restarted}"
    replicas = replicated.zk.get_topic_assignments([topic])[topic].partitions
    assert replicas and all(len(r) == 3 for r in replicas.values()), replicas


def test_the_spark_source_reads_a_replicated_topic_while_its_leader_is_killed(
        spark: SparkSession, replicated: StromCluster) -> None:
    """Issue 18, test 9's Spark part: a batch read planned and run just after the leader of
    a partition is SIGKILLed (before the cluster has noticed) reads every record once."""
    from confluent_kafka import Producer

    topic, partitions, per_partition = "spark-replicated", 3, 200
    _create(replicated, topic, partitions)
    producer = Producer({"bootstrap.servers": replicated.bootstrap, "acks": "all", "enable.idempotence": True})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, f"v{p}-{i}".encode(), partition=p)
    assert producer.flush(60) == 0
    victim = _states(replicated, topic, partitions)[0].leader
    replicated.kill(victim)
    try:
        unnoticed = _states(replicated, topic, partitions)[0].leader == victim  # its session still lives
        rows = (spark.read.format("strom")
                .options(**{"kafka.bootstrap.servers": replicated.bootstrap, "subscribe": topic}).load()
                .select("partition", "offset", "value").collect())
        moved = _states(replicated, topic, partitions)[0].leader
    finally:
        replicated.restart(victim)
        replicated.wait_until(lambda: _fully_replicated(replicated, _all_topics(replicated)), what="every ISR full")
    print(f"spark read: leader {victim} killed, the read began {'before' if unnoticed else 'after'} "
          f"ZooKeeper noticed, partition 0 led by {moved} after it")
    assert moved not in (-1, victim)  # the read did cross a failover
    got = sorted((r.partition, r.offset, bytes(r.value).decode()) for r in rows)
    assert got == sorted((p, i, f"v{p}-{i}") for p in range(partitions) for i in range(per_partition))
