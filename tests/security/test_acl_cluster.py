"""ACLs in a cluster: CreateAcls on one broker lands in Kafka's ZooKeeper znodes and every
other broker applies it from the change notification (DescribeAcls there shows it);
DeleteAcls likewise. The brokers' own requests to each other (PLAINTEXT, User:ANONYMOUS) pass
as a super user, as a Kafka cluster's inter-broker principal must.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from strom.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from strom.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from strom.protocol.messages.describe_acls_request import DescribeAclsRequest
from strom.security.acl.model import AclOperation as Op
from strom.security.acl.model import AclPermissionType as Permission
from strom.security.acl.model import PatternType as P
from strom.security.acl.model import ResourceType as R
from tests.support.cluster import StromCluster
from tests.support.reference_broker import WireClient
from tests.support.zookeeper import zookeeper

__all__ = ["zookeeper"]
EVERY_ACL = DescribeAclsRequest(R.ANY, None, P.ANY, None, None, Op.ANY, Permission.ANY)


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperEnsemble, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StromCluster]:
    directory: Path = tmp_path_factory.mktemp("acl-cluster")
    overrides = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}
    with StromCluster(directory, zookeeper.connect_string + "/acls", brokers=2, overrides=overrides) as running:
        yield running


def _described(client: WireClient) -> list[tuple[str, int, str, int]]:
    response: Any = client.call(EVERY_ACL, 3)
    assert response.error_code == 0
    return sorted((r.resource_name, r.pattern_type, a.principal, a.operation) for r in response.resources for a in r.acls)


def test_acls_made_on_one_broker_apply_on_the_other(cluster: StromCluster) -> None:
    with WireClient(cluster.brokers[1].bootstrap) as client:
        created: Any = client.call(CreateAclsRequest((
            AclCreation(R.TOPIC, "orders", P.LITERAL, "User:alice", "*", Op.READ, Permission.ALLOW),
            AclCreation(R.GROUP, "app-", P.PREFIXED, "User:alice", "*", Op.READ, Permission.ALLOW),
        )), 3)
        assert [r.error_code for r in created.results] == [0, 0]
    kazoo = cluster.zk.kazoo
    assert json.loads(kazoo.get("/kafka-acl/Topic/orders")[0]) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    assert kazoo.exists("/kafka-acl-extended/prefixed/Group/app-") is not None
    expected = [("app-", P.PREFIXED, "User:alice", Op.READ), ("orders", P.LITERAL, "User:alice", Op.READ)]
    with WireClient(cluster.brokers[2].bootstrap) as other:
        cluster.wait_until(lambda: _described(other) == expected, 30, "broker 2 applying broker 1's ACLs")
        deleted: Any = other.call(DeleteAclsRequest((
            DeleteAclsFilter(R.TOPIC, None, P.ANY, None, None, Op.ANY, Permission.ANY),)), 3)
        assert [len(r.matching_acls) for r in deleted.filter_results] == [1]
    with WireClient(cluster.brokers[1].bootstrap) as client:
        cluster.wait_until(lambda: _described(client) == expected[:1], 30, "broker 1 applying broker 2's deletion")
    assert kazoo.exists("/kafka-acl/Topic/orders") is None
