"""SCRAM credentials in a cluster: kept where Kafka's ZooKeeper-mode brokers keep them
(``/config/users/<user>`` and a ``/config/changes`` notice, Kafka's JSON byte for byte), written
by the active controller only (another broker answers NOT_CONTROLLER), and seen by every
broker: a user added or removed through the controller authenticates, or stops, everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from strom.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
)
from strom.protocol.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from strom.security.sasl.scram import SCRAM_SHA_512, ScramCredential
from tests.support.cluster import StromCluster
from tests.support.netproxy import reserved_ports
from tests.support.sasl import RawConnection, sasl_overrides, scram_authenticate
from tests.support.zookeeper import zookeeper

__all__ = ["zookeeper"]

SALT = b"cluster-salt"


SASL_BOOTSTRAPS: dict[int, str] = {}  # node id -> its SASL_PLAINTEXT listener


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperEnsemble, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromCluster]:
    directory: Path = tmp_path_factory.mktemp("sasl-cluster")
    running = StromCluster(directory, zookeeper.connect_string + "/sasl", brokers=2, overrides=sasl_overrides())
    with reserved_ports(2 * len(running.brokers)) as ports:
        pass
    for index, (node_id, broker) in enumerate(running.brokers.items()):
        plain_port, sasl_port = ports[2 * index], ports[2 * index + 1]
        broker.fixed_listeners = f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
        SASL_BOOTSTRAPS[node_id] = f"127.0.0.1:{sasl_port}"
    with running:
        yield running


def alter(cluster: StromCluster, node_id: int, request: AlterUserScramCredentialsRequest
          ) -> AlterUserScramCredentialsResponse:
    with RawConnection(cluster.brokers[node_id].bootstrap) as connection:
        response = connection.request(request, 0)
    assert isinstance(response, AlterUserScramCredentialsResponse)
    return response


def authenticates(cluster: StromCluster, node_id: int, password: str) -> bool:
    with RawConnection(SASL_BOOTSTRAPS[node_id]) as connection:
        return scram_authenticate(connection, "SCRAM-SHA-512", "erin", password).error_code == 0  # type: ignore[attr-defined]


def test_a_credential_made_on_the_controller_is_kafkas_znode_and_works_on_every_broker(cluster: StromCluster) -> None:
    controller = cluster.wait_until(lambda: cluster.controller_id() if cluster.controller_id() > 0 else None)
    other = next(node_id for node_id in cluster.brokers if node_id != controller)
    upsert = AlterUserScramCredentialsRequest(upsertions=(ScramCredentialUpsertion(
        "erin", SCRAM_SHA_512.kip554_type, 4096, SALT, SCRAM_SHA_512.salted_password(b"erin-secret", SALT, 4096)),))
    refused = alter(cluster, other, upsert)
    assert [(r.user, r.error_code) for r in refused.results] == [("erin", ErrorCode.NOT_CONTROLLER)]
    assert [(r.user, r.error_code) for r in alter(cluster, controller, upsert).results] == [("erin", 0)]

    data, _ = cluster.zk.kazoo.get("/config/users/erin")
    expected = SCRAM_SHA_512.credential("erin-secret", SALT, 4096).to_kafka_string()
    assert data == b'{"version":1,"config":{"SCRAM-SHA-512":"' + expected.encode() + b'"}}'
    assert ScramCredential.from_kafka_string(json.loads(data)["config"]["SCRAM-SHA-512"]).iterations == 4096
    notices = [cluster.zk.kazoo.get(f"/config/changes/{child}")[0]
               for child in cluster.zk.kazoo.get_children("/config/changes")]
    assert b'{"version":2,"entity_path":"users/erin"}' in notices

    for node_id in cluster.brokers:  # the other broker learns it from the notice
        cluster.wait_until(lambda node_id=node_id: authenticates(cluster, node_id, "erin-secret"),
                           what=f"erin authenticating on broker {node_id}")
        assert not authenticates(cluster, node_id, "not-erin-secret")
    with RawConnection(cluster.brokers[other].bootstrap) as connection:
        described = connection.request(DescribeUserScramCredentialsRequest(users=None), 0)
    assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in described.results] == [("erin", [(2, 4096)])]  # type: ignore[attr-defined]

    delete = AlterUserScramCredentialsRequest(deletions=(ScramCredentialDeletion("erin", SCRAM_SHA_512.kip554_type),))
    assert [r.error_code for r in alter(cluster, controller, delete).results] == [0]
    cluster.wait_until(lambda: not authenticates(cluster, other, "erin-secret"), what="erin refused on the other broker")
