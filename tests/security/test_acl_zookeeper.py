"""A cluster's ACLs in a real ZooKeeper (``ZkAclStore``): two brokers' authorizers on one
ensemble — what one creates, the other learns from the change notification and decides the
same; deletions likewise, a pattern left empty loses its znode; the znodes are Kafka's."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator

import pytest

from strom.cluster.zk_client import KafkaZkClient
from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from strom.security.acl.authorizer import AclAuthorizer
from strom.security.acl.model import (
    ANY_BINDING,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strom.security.acl.zk_store import ZkAclStore
from tests.support.zookeeper import zk_connect, zookeeper

__all__ = ["zk_connect", "zookeeper"]
TIMEOUT_S = 30.0


class Broker:
    """One broker's ACL side: its ZooKeeper session, store and authorizer, following changes."""

    def __init__(self, connect: str) -> None:
        self.zk = KafkaZkClient(connect, session_timeout_ms=10_000, connection_timeout_ms=30_000)
        self.zk.connect()
        self.store = ZkAclStore(self.zk)
        self.authorizer = AclAuthorizer(self.store)
        self.authorizer.load()
        self.notified = threading.Event()
        self.store.watch(self.notified.set)

    def catch_up(self, until: Callable[[], bool]) -> None:
        """Apply notifications (as the broker's task does) until ``until()`` holds."""
        for _ in range(100):
            for pattern in self.store.changes():
                self.authorizer.loaded(pattern, self.store.read(pattern))
            if until():
                return
            self.notified.wait(TIMEOUT_S / 100)
            self.notified.clear()
        raise AssertionError("the change never arrived")


@pytest.fixture
def brokers(zk_connect: str, zookeeper: ZooKeeperEnsemble) -> Iterator[tuple[Broker, Broker]]:
    first, second = Broker(zk_connect), Broker(zk_connect)
    yield first, second
    first.zk.close()
    second.zk.close()


def test_two_brokers_share_acls_through_zookeeper(brokers: tuple[Broker, Broker]) -> None:
    one, two = brokers
    literal = AclBinding(ResourcePattern(ResourceType.TOPIC, "orders"),
                         AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))
    prefixed = AclBinding(ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED),
                          AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))
    assert one.authorizer.create_acls([literal, prefixed]) == [None, None]

    def alice_reads() -> bool:
        return (two.authorizer.authorize("User:alice", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "orders")
                and two.authorizer.authorize("User:alice", "10.0.0.1", AclOperation.READ, ResourceType.GROUP,
                                             "app-1"))
    assert not alice_reads()
    two.catch_up(alice_reads)

    kazoo = one.zk.kazoo
    data, _ = kazoo.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                                        "operation": "Read", "host": "*"}]}
    assert kazoo.exists("/kafka-acl-extended/prefixed/Group/app-") is not None
    assert [kazoo.get(f"/kafka-acl-changes/{child}")[0] for child in kazoo.get_children("/kafka-acl-changes")] == [
        b"TOPIC:orders"]

    # the second broker adds to the same pattern: the first's entry is kept (read, change, write)
    denial = AclBinding(literal.pattern, AccessControlEntry("User:bob", "*", AclOperation.ALL, AclPermissionType.DENY))
    assert two.authorizer.create_acls([denial]) == [None]
    one.catch_up(lambda: not one.authorizer.authorize("User:bob", "h", AclOperation.WRITE, ResourceType.TOPIC,
                                                      "orders"))
    assert sorted(b.entry.principal for b in one.authorizer.acls(ANY_BINDING)) == ["User:alice", "User:alice",
                                                                                   "User:bob"]
    restarted = AclAuthorizer(ZkAclStore(one.zk))  # a broker starting now reads them all
    restarted.load()
    assert sorted(map(repr, restarted.acls(ANY_BINDING))) == sorted(map(repr, one.authorizer.acls(ANY_BINDING)))

    two.authorizer.delete_acls([ANY_BINDING])
    one.catch_up(lambda: one.authorizer.acls(ANY_BINDING) == [])
    assert kazoo.exists("/kafka-acl/Topic/orders") is None
    assert kazoo.exists("/kafka-acl-extended/prefixed/Group/app-") is None
