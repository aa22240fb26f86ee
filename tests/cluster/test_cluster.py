"""Cluster mode end to end: a real ZooKeeper, three ``strom serve`` processes, real clients.

Everything is observed from outside, as an operator or a client would: Metadata over the
wire, ZooKeeper's znodes, what clients can produce and consume. Waits are bounded waits
on conditions (generous: two loaded cores), never sleeps standing in for synchronisation.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from tests.support.cluster import SESSION_TIMEOUT_MS, StromCluster
from tests.support.zookeeper import zookeeper as zookeeper

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> Iterator[StromCluster]:
    with StromCluster(tmp_path, f"{zookeeper.connect_string}/c-{uuid.uuid4().hex[:8]}") as started:
        yield started


def _create_topic(cluster: StromCluster, name: str, partitions: int) -> None:
    """Through confluent-kafka's admin client, bootstrapped from one broker only."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.brokers[2].bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    cluster.wait_until(lambda: all(leader >= 0 for leader in cluster.leaders(name).values())
                       and len(cluster.leaders(name)) == partitions, what=f"leaders for every partition of {name}")


def test_a_topic_spreads_over_every_broker_and_every_broker_says_so(cluster: StromCluster) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    # CreateTopics is answered once every new partition has a leader in the answering
    # broker's (the controller's) metadata, as Kafka's ZooKeeper mode (DelayedCreatePartitions).
    admin = AdminClient({"bootstrap.servers": cluster.brokers[2].bootstrap})
    admin.create_topics([NewTopic("spread", 12, 1)], operation_timeout=30)["spread"].result(30)
    at_once = cluster.leaders("spread", via=cluster.controller_id())
    assert len(at_once) == 12 and all(leader >= 0 for leader in at_once.values())
    _create_topic(cluster, "spread-too", 3)  # the helper's path as well
    leaders = cluster.leaders("spread")
    assert sorted(set(leaders.values())) == [1, 2, 3]
    controller = cluster.controller_id()
    for node_id in (1, 2, 3):  # the same answer from every broker, once UpdateMetadata reached it
        cluster.wait_until(lambda node_id=node_id: cluster.leaders("spread", via=node_id) == leaders,
                           what=f"broker {node_id}'s metadata")
        response = cluster.metadata(via=node_id)
        assert sorted(b.node_id for b in response.brokers) == [1, 2, 3]
        assert response.controller_id == controller
    # The partition states in ZooKeeper are what Metadata reports (Kafka's znode JSON).
    states = cluster.zk.get_partition_states({("spread", p) for p in range(12)})
    assert {tp[1]: state.leader_and_isr.leader for tp, state in states.items()} == leaders


def test_clients_produce_and_consume_from_a_one_broker_bootstrap(cluster: StromCluster) -> None:
    from confluent_kafka import Consumer, Producer

    _create_topic(cluster, "orders", 12)
    bootstrap = cluster.brokers[3].bootstrap  # one broker named; clients find the others
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(1200):
        producer.produce("orders", key=f"k{i}".encode(), value=f"confluent-{i}".encode())
    assert producer.flush(60) == 0

    from kafka import KafkaProducer

    kp = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(600):
        kp.send("orders", key=f"p{i}".encode(), value=f"kafka-python-{i}".encode())
    kp.flush(60)
    kp.close()

    from strom.client import Producer as StromProducer

    with StromProducer({"bootstrap.servers": bootstrap}) as sp:
        for i in range(600):
            sp.send("orders", key=f"s{i}".encode(), value=f"strom-{i}".encode())
        sp.flush()

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "orders-readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    seen: set[bytes] = set()
    partitions: set[int] = set()
    deadline = time.monotonic() + 90
    while len(seen) < 2400 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None or message.error():
            continue
        seen.add(message.value())
        partitions.add(message.partition())
    consumer.close()
    assert len(seen) == 2400
    assert partitions == set(range(12))


def test_a_group_is_coordinated_by_its_offsets_partition_leader_and_commits_survive_its_restart(
        cluster: StromCluster) -> None:
    from kafka import KafkaConsumer, TopicPartition

    _create_topic(cluster, "ledger", 4)
    group = "ledger-readers"
    consumer = KafkaConsumer(bootstrap_servers=cluster.brokers[1].bootstrap, group_id=group,
                             enable_auto_commit=False)
    consumer.assign([TopicPartition("ledger", p) for p in range(4)])
    from kafka.structs import OffsetAndMetadata

    consumer.commit({TopicPartition("ledger", p): OffsetAndMetadata(10 + p, "", -1) for p in range(4)})
    consumer.close()
    # The coordinator is the leader of the group's __consumer_offsets partition (Java's hashCode).
    offsets_partition = _java_hash(group) % 6
    coordinator = cluster.leaders("__consumer_offsets")[offsets_partition]
    for node_id in (1, 2, 3):
        assert cluster.find_coordinator(group, via=node_id) == coordinator

    cluster.terminate(coordinator)
    cluster.restart(coordinator)
    cluster.wait_until(lambda: cluster.leaders("__consumer_offsets")[offsets_partition] >= 0,
                       what="the offsets partition led again")

    def committed() -> dict[int, int]:
        reader = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False)
        try:
            return {p: reader.committed(TopicPartition("ledger", p)) for p in range(4)}
        finally:
            reader.close()

    assert cluster.wait_until(lambda: committed() == {p: 10 + p for p in range(4)},
                              what="the committed offsets, read back after the restart")


def test_a_killed_controller_is_replaced_with_a_higher_epoch_and_topics_can_be_created_again(
        cluster: StromCluster) -> None:
    before = cluster.controller_id()
    epoch = cluster.controller_epoch()
    cluster.kill(before)
    started = time.monotonic()
    after = cluster.wait_until(lambda: (c := cluster.controller_id()) not in (-1, before) and c,
                               timeout=SESSION_TIMEOUT_MS / 1000 + 30, what="a new controller")
    elapsed = time.monotonic() - started
    assert cluster.controller_epoch() > epoch
    print(f"new controller {after} {elapsed:.1f} s after the kill (session timeout {SESSION_TIMEOUT_MS} ms)")
    others = [n for n in (1, 2, 3) if n != before]
    cluster.wait_until(lambda: cluster.metadata(via=others[0]).controller_id == after,
                       what="metadata naming the new controller")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.brokers[others[0]].bootstrap})
    admin.create_topics([NewTopic("after-failover", 4, 1)])["after-failover"].result(30)
    leaders = cluster.wait_until(lambda: (ls := cluster.leaders("after-failover", via=others[0]))
                                 and all(v >= 0 for v in ls.values()) and ls, what="the new topic's leaders")
    assert set(leaders.values()) <= set(others)


def test_a_broker_killed_and_restarted_at_once_gets_its_partitions_back(cluster: StromCluster) -> None:
    _create_topic(cluster, "bounce", 6)
    victim = next(n for n in (1, 2, 3) if n != cluster.controller_id())
    led = {p for p, leader in cluster.leaders("bounce").items() if leader == victim}
    assert led
    epochs_before = {tp[1]: s.leader_and_isr.leader_epoch
                     for tp, s in cluster.zk.get_partition_states({("bounce", p) for p in led}).items()}
    broker_epoch_before = cluster.zk.get_broker(victim).epoch  # type: ignore[union-attr]
    cluster.kill(victim)
    cluster.restart(victim)  # registration waits out (or replaces) its own expired node

    def back() -> bool:
        """Registered again (a new broker epoch) and leading its partitions under newer leader
        epochs: the controller saw the bounce (Metadata alone could still show the old state)."""
        info = cluster.zk.get_broker(victim)
        states = cluster.zk.get_partition_states({("bounce", p) for p in led})
        return (info is not None and info.epoch > broker_epoch_before
                and all(states[("bounce", p)].leader_and_isr.leader == victim
                        and states[("bounce", p)].leader_and_isr.leader_epoch > epochs_before[p] for p in led))

    cluster.wait_until(back, timeout=SESSION_TIMEOUT_MS / 1000 + 60,
                       what="the bounced broker leading its partitions again, with a new broker epoch")
    cluster.wait_until(lambda: all(cluster.leaders("bounce")[p] == victim for p in led), what="Metadata saying so")
    # It serves them: a produce to each of its partitions succeeds.
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for p in led:
        producer.produce("bounce", value=b"after", partition=p)
    assert producer.flush(60) == 0


def _java_hash(text: str) -> int:
    """Java's String.hashCode, made non-negative as Kafka's Utils.abs."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return h & 0x7FFFFFFF if h != -(1 << 31) else 0


def test_a_dead_brokers_partitions_are_offline_and_nothing_else_stops(cluster: StromCluster) -> None:
    """One replica per partition (part 1): its partitions wait for it (leader -1); the rest go on."""
    _create_topic(cluster, "halves", 6)
    victim = next(n for n in (1, 2, 3) if n != cluster.controller_id())
    leaders = cluster.leaders("halves")
    theirs = {p for p, leader in leaders.items() if leader == victim}
    ours = set(leaders) - theirs
    assert theirs and ours
    cluster.kill(victim)
    survivor = next(n for n in (1, 2, 3) if n != victim)
    cluster.wait_until(lambda: all(cluster.leaders("halves", via=survivor)[p] == -1 for p in theirs),
                       timeout=SESSION_TIMEOUT_MS / 1000 + 30, what="the dead broker's partitions offline")
    assert all(cluster.leaders("halves", via=survivor)[p] == leaders[p] for p in ours)
    metadata = cluster.metadata(["halves"], via=survivor)
    offline = {p.partition_index: (p.error_code, tuple(p.offline_replicas)) for p in metadata.topics[0].partitions
               if p.partition_index in theirs}
    assert offline == {p: (5, (victim,)) for p in theirs}  # LEADER_NOT_AVAILABLE, the replica listed offline
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for p in ours:
        producer.produce("halves", value=b"still here", partition=p)
    assert producer.flush(60) == 0


def test_sigterm_is_a_controlled_shutdown_and_a_clean_exit(cluster: StromCluster) -> None:
    _create_topic(cluster, "calm", 3)
    for node_id in (3, 2):  # a non-controller first, then possibly the controller: each exits cleanly
        assert cluster.terminate(node_id) == 0
        log = cluster.brokers[node_id].log_path.read_text()
        assert "controlled shutdown done" in log
        assert "stopped cleanly" in log
    assert cluster.zk.get_all_brokers().keys() == {1}
