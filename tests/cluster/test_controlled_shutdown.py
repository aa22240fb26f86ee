"""A SIGTERM'd broker's controlled shutdown moves the leadership of replicated partitions.

Three ``strom serve`` processes and a real ZooKeeper. The facts are read from ZooKeeper,
where the controller writes them (leaders, leader epochs, ISRs), and from Metadata, as an
operator would see them; data does not move here (ISRs stay full because no replica has
had time to fall behind ``replica.lag.time.max.ms``, set long).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.cluster.zk_data import LeaderAndIsr
from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from tests.support.cluster import StromCluster
from tests.support.zookeeper import zookeeper as zookeeper

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> Iterator[StromCluster]:
    with StromCluster(tmp_path, f"{zookeeper.connect_string}/c-{uuid.uuid4().hex[:8]}",
                      overrides={"replica.lag.time.max.ms": "600000"}) as started:
        yield started


def _states(cluster: StromCluster, topic: str, partitions: int) -> dict[int, LeaderAndIsr]:
    cluster.zk.sync()
    states = cluster.zk.get_partition_states({(topic, p) for p in range(partitions)})
    return {tp[1]: state.leader_and_isr for tp, state in states.items()}


def test_sigterm_moves_leadership_to_an_in_sync_replica_and_leaves_the_isrs(cluster: StromCluster) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("moved", 3, 3)])["moved"].result(30)
    cluster.wait_until(lambda: len(s := _states(cluster, "moved", 3)) == 3 and all(v.leader >= 0 for v in s.values()),
                       what="the topic's leaders")
    before = _states(cluster, "moved", 3)
    controller = cluster.controller_id()
    victim = next(state.leader for state in before.values() if state.leader != controller)

    assert cluster.terminate(victim) == 0
    assert "controlled shutdown done" in cluster.brokers[victim].log_path.read_text()
    after = _states(cluster, "moved", 3)
    for partition, old in before.items():
        new = after[partition]
        assert victim not in new.isr and len(new.isr) == 2, (partition, old, new)
        assert new.leader_epoch == old.leader_epoch + 1, (partition, old, new)  # one change each, no more
        if old.leader == victim:
            assert new.leader in old.isr and new.leader != victim
        else:
            assert new.leader == old.leader
    survivor = next(b for b in cluster.live() if b != victim)
    cluster.wait_until(lambda: cluster.leaders("moved", via=survivor) == {p: s.leader for p, s in after.items()},
                       what="Metadata naming the new leaders")
