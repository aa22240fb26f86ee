"""Cluster mode under failure: a paused controller, ZooKeeper's own failures.

Real ZooKeeper (a 3-node ensemble where the test is about ZooKeeper), brokers as
processes; faults are real signals. Each test checks the state it cares about (the
controller, epochs, leaders) from ZooKeeper and from Metadata, as an operator would.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strom.cluster.zk_data import LeaderIsrAndControllerEpoch
from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from tests.support.cluster import SESSION_TIMEOUT_MS, StromCluster
from tests.support.zookeeper import zookeeper as zookeeper
from tests.support.zookeeper import zookeeper_ensemble as zookeeper_ensemble


def _create(cluster: StromCluster, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    for node_id in cluster.live():
        cluster.wait_until(lambda node_id=node_id: (ls := cluster.leaders(topic, via=node_id))
                           and len(ls) == partitions and all(v >= 0 for v in ls.values()),
                           what=f"leaders of {topic} known to broker {node_id}")


def _states(cluster: StromCluster, topic: str, partitions: int) -> list[LeaderIsrAndControllerEpoch]:
    cluster.zk.sync()
    return list(cluster.zk.get_partition_states({(topic, p) for p in range(partitions)}).values())


def _snapshot(cluster: StromCluster, topic: str, partitions: int) -> tuple[int, int, dict[int, int], dict[int, int]]:
    """(controller, controller epoch, broker epochs, partition leader epochs) from ZooKeeper."""
    zk = cluster.zk
    zk.sync()
    states = zk.get_partition_states({(topic, p) for p in range(partitions)})
    brokers = zk.get_all_brokers()
    return (cluster.controller_id(), cluster.controller_epoch(), {i: b.epoch for i, b in brokers.items()},
            {tp[1]: s.leader_and_isr.leader_epoch for tp, s in states.items()})


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> Iterator[StromCluster]:
    with StromCluster(tmp_path, f"{zookeeper.connect_string}/c-{uuid.uuid4().hex[:8]}") as started:
        yield started


def test_a_controller_paused_past_its_session_is_replaced_and_resigns_when_it_wakes(cluster: StromCluster) -> None:
    _create(cluster, "paused", 6)
    zombie = cluster.controller_id()
    epoch = cluster.controller_epoch()
    cluster.pause(zombie)
    try:
        successor = cluster.wait_until(lambda: (c := cluster.controller_id()) not in (-1, zombie) and c,
                                       timeout=SESSION_TIMEOUT_MS / 1000 + 30, what="a new controller")
        new_epoch = cluster.controller_epoch()
        assert new_epoch > epoch
        # Its registration expired with its session: the new controller takes its partitions offline.
        cluster.wait_until(lambda: zombie not in cluster.zk.get_all_brokers(), what="the zombie deregistered")
        cluster.wait_until(lambda: any(s.leader_and_isr.leader == -1 for s in _states(cluster, "paused", 6)),
                           what="the zombie's partitions offline")
    finally:
        cluster.resume(zombie)
    # Awake, it learns its session is gone, registers again (a bounced broker to the new
    # controller) and leads its partitions again, under the new controller's epoch.
    cluster.wait_until(lambda: zombie in cluster.zk.get_all_brokers(), timeout=60, what="the zombie back")
    cluster.wait_until(lambda: all(s.leader_and_isr.leader >= 0 for s in _states(cluster, "paused", 6)),
                       timeout=60, what="every partition led again")
    cluster.wait_until(lambda: all(v >= 0 for v in cluster.leaders("paused", via=successor).values()),
                       timeout=60, what="Metadata saying so")
    assert cluster.controller_id() == successor
    assert cluster.controller_epoch() == new_epoch  # the zombie neither won again nor bumped it
    states = cluster.zk.get_partition_states({("paused", p) for p in range(6)})
    assert max(s.controller_epoch for s in states.values()) == new_epoch
    for node_id in (1, 2, 3):  # every broker, the zombie too, names the successor
        cluster.wait_until(lambda node_id=node_id: cluster.metadata(via=node_id).controller_id == successor,
                           what=f"broker {node_id} naming the new controller")
    # What the zombie would have sent had it acted before learning: a LeaderAndIsr in its old
    # epoch is refused by every broker, which has seen the successor's.
    for node_id in (1, 2, 3):
        assert _leader_and_isr_from(cluster, node_id, zombie, epoch) == 11  # STALE_CONTROLLER_EPOCH


def _leader_and_isr_from(cluster: StromCluster, node_id: int, controller_id: int, controller_epoch: int) -> int:
    """Send broker ``node_id`` a LeaderAndIsr (v7) as controller ``controller_id`` in ``controller_epoch``
    making it lead partition 0 of "paused" at a high leader epoch; the top-level error code."""
    from strom.protocol.headers import decode_response, encode_request
    from strom.protocol.messages.leader_and_isr_request import (
        LeaderAndIsrPartitionState,
        LeaderAndIsrRequest,
        LeaderAndIsrTopicState,
    )
    from tests.support.broker_process import raw_request

    info = cluster.zk.get_broker(node_id)
    assert info is not None
    state = LeaderAndIsrPartitionState(partition_index=0, controller_epoch=controller_epoch, leader=node_id,
                                       leader_epoch=1000, isr=(node_id,), replicas=(node_id,))
    request = LeaderAndIsrRequest(controller_id=controller_id, controller_epoch=controller_epoch,
                                  broker_epoch=info.epoch, topic_states=(
                                      LeaderAndIsrTopicState(topic_name="paused", partition_states=(state,)),))
    answer = raw_request(cluster.brokers[node_id], encode_request(request, 7, correlation_id=3, client_id="zombie"))
    assert answer is not None
    _, response = decode_response(answer, LeaderAndIsrRequest.API_KEY, 7)
    return int(response.error_code)


def _unchanged_for(seconds: float, read: Callable[[], object], expected: object) -> None:
    """``read()`` keeps equal to ``expected`` for ``seconds`` (an absence is only seen over time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert read() == expected
        time.sleep(0.5)


def test_losing_the_zookeeper_leader_changes_no_leadership(
        tmp_path: Path, zookeeper_ensemble: Callable[[int], ZooKeeperEnsemble]) -> None:
    ensemble = zookeeper_ensemble(3)
    with StromCluster(tmp_path, ensemble.connect_string + "/strom") as cluster:
        _create(cluster, "steady", 6)
        before = _snapshot(cluster, "steady", 6)
        leader = ensemble.leader()
        assert leader is not None
        ensemble.kill(leader)
        cluster.wait_until(lambda: ensemble.leader() is not None, what="a new ZooKeeper leader")
        _unchanged_for(SESSION_TIMEOUT_MS / 1000 + 2, lambda: _snapshot(cluster, "steady", 6), before)
        assert all(p.alive() for p in cluster.brokers.values())


def test_the_whole_ensemble_down_for_less_than_the_session_timeout_changes_nothing(
        tmp_path: Path, zookeeper_ensemble: Callable[[int], ZooKeeperEnsemble]) -> None:
    ensemble = zookeeper_ensemble(3)
    with StromCluster(tmp_path, ensemble.connect_string + "/strom") as cluster:
        _create(cluster, "steady", 6)
        before = _snapshot(cluster, "steady", 6)
        for node_id in ensemble.nodes:
            ensemble.pause(node_id)
        time.sleep(SESSION_TIMEOUT_MS / 1000 / 3)  # the outage itself: a third of the session timeout
        for node_id in ensemble.nodes:
            ensemble.resume(node_id)
        cluster.wait_until(lambda: ensemble.leader() is not None, what="the ensemble serving again")
        _unchanged_for(SESSION_TIMEOUT_MS / 1000 + 2, lambda: _snapshot(cluster, "steady", 6), before)
        # And the cluster still works: a produce to every partition is acknowledged.
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for p in range(6):
            producer.produce("steady", value=b"after the outage", partition=p)
        assert producer.flush(60) == 0
