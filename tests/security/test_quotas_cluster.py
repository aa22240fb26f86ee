"""Client quotas in a cluster: kept where Kafka's ZooKeeper-mode brokers keep them
(``/config/users/<user>/clients/<client-id>``, ``/config/clients/<client-id>`` and a
``/config/changes`` notice, Kafka's JSON byte for byte), written by whichever broker is asked
and applied by every broker; a user's SCRAM credential in the same znode is kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from tests.support.cluster import StromCluster
from tests.support.quota_requests import alter_request, describe_request, described
from tests.support.reference_broker import WireClient
from tests.support.zookeeper import zookeeper

__all__ = ["zookeeper"]


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperEnsemble, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromCluster]:
    directory: Path = tmp_path_factory.mktemp("quota-cluster")
    with StromCluster(directory, zookeeper.connect_string + "/quotas", brokers=2) as running:
        yield running


def test_quotas_altered_on_one_broker_are_kafkas_znodes_and_apply_on_every_broker(cluster: StromCluster) -> None:
    kazoo = cluster.zk.kazoo
    scram = {"SCRAM-SHA-512": "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"}
    kazoo.create("/config/users/alice", json.dumps({"version": 1, "config": scram}).encode(), makepath=True)
    with WireClient(cluster.brokers[1].bootstrap) as client:
        answer = client.call(alter_request([
            ([("user", "alice")], {"consumer_byte_rate": 2048.0}),
            ([("user", "alice"), ("client-id", None)], {"producer_byte_rate": 1024.0, "request_percentage": 12.5}),
            ([("client-id", "app one")], {"producer_byte_rate": 4096.0}),
        ]), 1)
    assert [entry.error_code for entry in answer.entries] == [0, 0, 0]  # type: ignore[attr-defined]

    assert json.loads(kazoo.get("/config/users/alice")[0]) == {
        "version": 1, "config": {**scram, "consumer_byte_rate": "2048"}}
    # Keys in a java.util.Properties' iteration order, as Kafka's Jackson writes the Properties it merged.
    assert kazoo.get("/config/users/alice/clients/<default>")[0] == (
        b'{"version":1,"config":{"request_percentage":"12.5","producer_byte_rate":"1024"}}')
    assert kazoo.get("/config/clients/app%20one")[0] == b'{"version":1,"config":{"producer_byte_rate":"4096"}}'
    notices = sorted(kazoo.get_children("/config/changes"))[-3:]
    assert [json.loads(kazoo.get(f"/config/changes/{notice}")[0]) for notice in notices] == [
        {"version": 2, "entity_path": path}
        for path in ("users/alice", "users/alice/clients/<default>", "clients/app%20one")]

    expected = {
        (("user", "alice"),): {"consumer_byte_rate": 2048.0},
        (("user", "alice"), ("client-id", None)): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        (("client-id", "app one"),): {"producer_byte_rate": 4096.0},
    }
    with WireClient(cluster.brokers[2].bootstrap) as other:
        cluster.wait_until(lambda: described(other.call(describe_request([]), 1)) == expected, 30,
                           "broker 2 applying broker 1's quotas")
        removed = other.call(alter_request([([("client-id", "app one")], {"producer_byte_rate": None})]), 1)
        assert [entry.error_code for entry in removed.entries] == [0]  # type: ignore[attr-defined]
    del expected[(("client-id", "app one"),)]
    with WireClient(cluster.brokers[1].bootstrap) as client:
        cluster.wait_until(lambda: described(client.call(describe_request([]), 1)) == expected, 30,
                           "broker 1 applying broker 2's removal")
    assert kazoo.get("/config/clients/app%20one")[0] == b'{"version":1,"config":{}}'  # kept, as Kafka
