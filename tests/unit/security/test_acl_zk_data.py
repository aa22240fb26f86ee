"""The ZooKeeper ACL store's znodes, byte for byte what Kafka's ZooKeeper-mode brokers and
kafka-acls.sh write (``ZkData``: ``ResourceZNode``, ``LiteralAclChangeStore``,
``ExtendedAclChangeStore``), so a cluster's ACLs interoperate with Kafka's tools."""

from __future__ import annotations

import pytest

from strom.security.acl.model import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strom.security.acl.zk_store import (
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    acl_path,
    changes_path,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
)

TOPIC = ResourcePattern(ResourceType.TOPIC, "topic-1")
PREFIXED_GROUP = ResourcePattern(ResourceType.GROUP, "group-", PatternType.PREFIXED)


@pytest.mark.parametrize(("pattern", "path"), [
    (TOPIC, "/kafka-acl/Topic/topic-1"),
    (ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"), "/kafka-acl/Cluster/kafka-cluster"),
    (ResourcePattern(ResourceType.TRANSACTIONAL_ID, "*"), "/kafka-acl/TransactionalId/*"),
    (PREFIXED_GROUP, "/kafka-acl-extended/prefixed/Group/group-"),
])
def test_paths(pattern: ResourcePattern, path: str) -> None:
    assert acl_path(pattern) == path


def test_acl_znode_data() -> None:
    entries = frozenset({
        AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
        AccessControlEntry("User:bob", "10.0.0.1", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.DENY),
    })
    data = encode_acls(entries)
    assert data == (b'{"version":1,"acls":['
                    b'{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},'
                    b'{"principal":"User:bob","permissionType":"Deny","operation":"IdempotentWrite",'
                    b'"host":"10.0.0.1"}]}')
    assert decode_acls(data) == entries
    # as Kafka's kafka-acls.sh wrote it (its own key order, spaces)
    assert decode_acls(b'{"version": 1, "acls": [{"host": "*", "operation": "Describe", "principal": "User:*", '
                       b'"permissionType": "Allow"}]}') == {
        AccessControlEntry("User:*", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)}


def test_change_notifications() -> None:
    assert (changes_path(TOPIC.pattern_type), encode_change(TOPIC)) == (LITERAL_CHANGES, b"TOPIC:topic-1")
    assert (changes_path(PREFIXED_GROUP.pattern_type), encode_change(PREFIXED_GROUP)) == (
        EXTENDED_CHANGES, b'{"version":1,"resourceType":"GROUP","name":"group-","patternType":"PREFIXED"}')
    for pattern in (TOPIC, PREFIXED_GROUP, ResourcePattern(ResourceType.TOPIC, "a:b")):
        assert decode_change(changes_path(pattern.pattern_type), encode_change(pattern)) == pattern
    assert decode_change(LITERAL_CHANGES, b"Topic:topic-1") == TOPIC  # the older spelling
    with pytest.raises(ValueError):
        decode_change(LITERAL_CHANGES, b"no-separator")
