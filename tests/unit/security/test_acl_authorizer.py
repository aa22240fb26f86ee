"""The ACL authorizer decides as Kafka's (AclAuthorizerTest / StandardAuthorizerTest cases):
super users, DENY over ALLOW, wildcard principal, host and resource, PREFIXED patterns,
implied Describe/DescribeConfigs for ALLOW only, ``allow.everyone.if.no.acl.found`` only
for a resource without ACLs, authorizeByResourceType; and the ACLs kept in the data
directory's file survive a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

import pytest

from strom.security.acl.authorizer import AclAuthorizer
from strom.security.acl.model import (
    ANY_BINDING,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from strom.security.acl.store import FileAclStore

Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "192.168.1.10", "192.168.1.11"


def acl(principal: str, op: Op, permission: AclPermissionType = ALLOW, name: str = "orders",
        kind: ResourceType = TOPIC, pattern: PatternType = LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(kind, name, pattern), AccessControlEntry(principal, host, op, permission))


class Make(Protocol):
    def __call__(self, *bindings: AclBinding, super_users: tuple[str, ...] = (),
                 allow_everyone: bool = False) -> AclAuthorizer: ...


@pytest.fixture
def make(tmp_path: Path) -> Make:
    made = iter(range(1000))

    def build(*bindings: AclBinding, super_users: tuple[str, ...] = (), allow_everyone: bool = False) -> AclAuthorizer:
        data_dir = tmp_path / f"broker-{next(made)}"  # each a fresh data directory (the first is tmp_path's broker-0)
        data_dir.mkdir()
        authorizer = AclAuthorizer(FileAclStore(str(data_dir)), super_users,
                                   allow_everyone_if_no_acl_found=allow_everyone)
        authorizer.load()
        assert authorizer.create_acls(bindings) == [None] * len(bindings)
        return authorizer
    return build


def can(authorizer: AclAuthorizer, principal: str, op: Op, name: str = "orders", kind: ResourceType = TOPIC,
        host: str = HOST) -> bool:
    return authorizer.authorize(principal, host, op, kind, name)


def test_no_acls_denies_unless_allow_everyone(make: Make) -> None:
    assert not can(make(), ALICE, Op.READ)
    assert can(make(allow_everyone=True), ALICE, Op.READ)


def test_allow_everyone_applies_only_to_a_resource_without_acls(make: Make) -> None:
    authorizer = make(acl(BOB, Op.READ), allow_everyone=True)
    assert not can(authorizer, ALICE, Op.READ)  # the topic has ACLs, none for alice
    assert can(authorizer, ALICE, Op.READ, name="other")  # no ACL matches "other"
    assert not can(make(acl(BOB, Op.READ, name="*"), allow_everyone=True), ALICE, Op.READ, name="other")


def test_allow_and_deny(make: Make) -> None:
    authorizer = make(acl(ALICE, Op.READ), acl(BOB, Op.WRITE))
    assert can(authorizer, ALICE, Op.READ)
    assert not can(authorizer, ALICE, Op.WRITE)
    assert not can(authorizer, BOB, Op.READ)
    assert can(authorizer, BOB, Op.WRITE)
    assert not can(authorizer, ALICE, Op.READ, kind=GROUP)  # another resource type


def test_deny_beats_allow(make: Make) -> None:
    assert not can(make(acl(ALICE, Op.READ), acl(ALICE, Op.READ, DENY)), ALICE, Op.READ)
    assert not can(make(acl(ALICE, Op.ALL), acl(ALICE, Op.READ, DENY)), ALICE, Op.READ)
    assert not can(make(acl(ALICE, Op.READ), acl("User:*", Op.ALL, DENY)), ALICE, Op.READ)
    assert not can(make(acl(ALICE, Op.READ), acl(ALICE, Op.READ, DENY, name="ord", pattern=PREFIXED)), ALICE, Op.READ)
    assert not can(make(acl(ALICE, Op.READ, name="*"), acl(ALICE, Op.READ, DENY)), ALICE, Op.READ)
    assert not can(make(acl(ALICE, Op.READ), acl(ALICE, Op.READ, DENY, host=HOST)), ALICE, Op.READ)
    assert can(make(acl(ALICE, Op.READ), acl(ALICE, Op.READ, DENY, host=OTHER_HOST)), ALICE, Op.READ)


def test_super_users_pass_even_a_deny(make: Make) -> None:
    authorizer = make(acl(ALICE, Op.ALL, DENY, name="*"), super_users=(ALICE,))
    assert can(authorizer, ALICE, Op.ALTER, name="anything")
    assert can(authorizer, ALICE, Op.CLUSTER_ACTION, name="kafka-cluster", kind=CLUSTER)
    assert not can(authorizer, "User:ALICE", Op.READ)  # principals are case sensitive


def test_wildcard_principal_host_and_resource(make: Make) -> None:
    assert can(make(acl("User:*", Op.READ)), ALICE, Op.READ)
    authorizer = make(acl(ALICE, Op.READ, host=HOST))
    assert can(authorizer, ALICE, Op.READ, host=HOST)
    assert not can(authorizer, ALICE, Op.READ, host=OTHER_HOST)
    everything = make(acl(ALICE, Op.WRITE, name="*"))
    assert can(everything, ALICE, Op.WRITE, name="any-topic")
    assert not can(everything, ALICE, Op.WRITE, name="any-group", kind=GROUP)


def test_prefixed_patterns(make: Make) -> None:
    authorizer = make(acl(ALICE, Op.READ, name="pay", pattern=PREFIXED),
                      acl(BOB, Op.READ, name="payments.eu.", pattern=PREFIXED))
    assert can(authorizer, ALICE, Op.READ, name="pay")
    assert can(authorizer, ALICE, Op.READ, name="payments.eu.orders")
    assert not can(authorizer, ALICE, Op.READ, name="pa")
    assert not can(authorizer, ALICE, Op.READ, name="xpayments")
    assert can(authorizer, BOB, Op.READ, name="payments.eu.orders")
    assert not can(authorizer, BOB, Op.READ, name="payments.us.orders")
    # a PREFIXED "*" is a prefix like any other, not a wildcard
    star = make(acl(ALICE, Op.READ, name="*", pattern=PREFIXED))
    assert not can(star, ALICE, Op.READ, name="orders")
    assert can(star, ALICE, Op.READ, name="*orders")


def test_all_matches_every_operation(make: Make) -> None:
    authorizer = make(acl(ALICE, Op.ALL))
    assert all(can(authorizer, ALICE, op) for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER_CONFIGS, Op.DESCRIBE))


@pytest.mark.parametrize("op", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_allow_implies_describe(make: Make, op: Op) -> None:
    authorizer = make(acl(ALICE, op))
    assert can(authorizer, ALICE, Op.DESCRIBE)
    assert not can(authorizer, ALICE, Op.DESCRIBE_CONFIGS)


def test_implications(make: Make) -> None:
    assert can(make(acl(ALICE, Op.ALTER_CONFIGS)), ALICE, Op.DESCRIBE_CONFIGS)
    assert not can(make(acl(ALICE, Op.ALTER_CONFIGS)), ALICE, Op.DESCRIBE)
    assert not can(make(acl(ALICE, Op.CREATE)), ALICE, Op.DESCRIBE)
    assert not can(make(acl(ALICE, Op.DESCRIBE)), ALICE, Op.READ)
    # implied for ALLOW only: a DENY Read does not deny Describe
    authorizer = make(acl(ALICE, Op.ALL), acl(ALICE, Op.READ, DENY))
    assert not can(authorizer, ALICE, Op.READ)
    assert can(authorizer, ALICE, Op.DESCRIBE)
    assert not can(make(acl(ALICE, Op.READ), acl(ALICE, Op.DESCRIBE, DENY)), ALICE, Op.DESCRIBE)


def test_changes_reach_decisions_at_once(make: Make) -> None:
    """The answer cache is dropped on every change."""
    authorizer = make(acl(ALICE, Op.READ))
    assert can(authorizer, ALICE, Op.READ)
    authorizer.create_acls([acl(ALICE, Op.READ, DENY)])
    assert not can(authorizer, ALICE, Op.READ)
    removed = authorizer.delete_acls([AclBindingFilter(
        ResourcePatternFilter(TOPIC, "orders", LITERAL),
        AccessControlEntryFilter(ALICE, None, Op.ANY, DENY))])
    assert removed == [[acl(ALICE, Op.READ, DENY)]]
    assert can(authorizer, ALICE, Op.READ)


def test_by_resource_type(make: Make) -> None:
    """Kafka's authorizeByResourceType cases (AuthorizerInterfaceDefaultTest)."""
    def any_topic(*bindings: AclBinding, super_users: tuple[str, ...] = (), allow_everyone: bool = False) -> bool:
        return make(*bindings, super_users=super_users, allow_everyone=allow_everyone).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    assert not any_topic()
    assert any_topic(allow_everyone=True)
    assert any_topic(super_users=(ALICE,))
    assert any_topic(acl(ALICE, Op.WRITE, name="t1"))
    assert any_topic(acl(ALICE, Op.ALL, name="t1"))
    assert not any_topic(acl(ALICE, Op.READ, name="t1"))  # no implication here
    assert not any_topic(acl(BOB, Op.WRITE, name="t1"))
    assert any_topic(acl("User:*", Op.WRITE, name="t1"))
    assert not any_topic(acl(ALICE, Op.WRITE, name="t1"), acl(ALICE, Op.WRITE, DENY, name="t1"))
    assert not any_topic(acl(ALICE, Op.WRITE, name="t1"), acl(ALICE, Op.WRITE, DENY, name="t", pattern=PREFIXED))
    assert any_topic(acl(ALICE, Op.WRITE, name="t1"), acl(ALICE, Op.WRITE, DENY, name="t2"))
    assert not any_topic(acl(ALICE, Op.WRITE, name="t1"), acl(ALICE, Op.WRITE, DENY, name="*"))
    assert any_topic(acl(ALICE, Op.WRITE, name="t", pattern=PREFIXED), acl(ALICE, Op.WRITE, DENY, name="t"))
    assert not any_topic(acl(ALICE, Op.WRITE, name="t1", pattern=PREFIXED),
                         acl(ALICE, Op.WRITE, DENY, name="t", pattern=PREFIXED))
    assert any_topic(acl(ALICE, Op.WRITE, name="*"), acl(ALICE, Op.WRITE, DENY, name="t1"))
    assert not any_topic(acl(ALICE, Op.WRITE, name="t1", host=OTHER_HOST))


def test_describe_and_delete_filters(make: Make) -> None:
    literal, prefixed, wildcard = (acl(ALICE, Op.READ), acl(ALICE, Op.WRITE, name="ord", pattern=PREFIXED),
                                   acl(BOB, Op.READ, name="*"))
    group = acl(ALICE, Op.READ, name="orders", kind=GROUP)
    authorizer = make(literal, prefixed, wildcard, group)
    assert sorted(authorizer.acls(ANY_BINDING), key=repr) == sorted([literal, prefixed, wildcard, group], key=repr)
    match = AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH), ANY_BINDING.entry)
    assert sorted(authorizer.acls(match), key=repr) == sorted([literal, prefixed, wildcard], key=repr)
    by_alice = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                                AccessControlEntryFilter(ALICE, None, Op.ANY, AclPermissionType.ANY))
    both = authorizer.delete_acls([by_alice, match])  # an ACL two filters match is reported for both
    assert sorted(both[0], key=repr) == sorted([literal, prefixed, group], key=repr)
    assert sorted(both[1], key=repr) == sorted([literal, prefixed, wildcard], key=repr)
    assert authorizer.acls(ANY_BINDING) == []


def test_creations_are_validated_one_by_one(make: Make) -> None:
    authorizer = make()
    errors = authorizer.create_acls([acl(ALICE, Op.READ), acl(ALICE, Op.READ, name="x", kind=CLUSTER),
                                     acl(ALICE, Op.READ)])  # a duplicate is no error
    assert errors == [None, "The only valid name for the CLUSTER resource is kafka-cluster", None]
    assert authorizer.acls(ANY_BINDING) == [acl(ALICE, Op.READ)]


def test_acls_survive_a_restart_in_kafkas_json(tmp_path: Path, make: Make) -> None:
    make(acl(ALICE, Op.IDEMPOTENT_WRITE, name="kafka-cluster", kind=CLUSTER),
         acl(BOB, Op.READ, DENY, name="pay", pattern=PREFIXED, host=HOST))
    data_dir = tmp_path / "broker-0"
    document = json.loads((data_dir / "acls.json").read_text())
    assert document == {"version": 1, "resources": [
        {"resourceType": "Topic", "patternType": "PREFIXED", "name": "pay", "version": 1,
         "acls": [{"principal": BOB, "permissionType": "Deny", "operation": "Read", "host": HOST}]},
        {"resourceType": "Cluster", "patternType": "LITERAL", "name": "kafka-cluster", "version": 1,
         "acls": [{"principal": ALICE, "permissionType": "Allow", "operation": "IdempotentWrite", "host": "*"}]},
    ]}
    reloaded = AclAuthorizer(FileAclStore(str(data_dir)))
    reloaded.load()
    assert can(reloaded, ALICE, Op.IDEMPOTENT_WRITE, name="kafka-cluster", kind=CLUSTER)
    assert not can(reloaded, BOB, Op.READ, name="payroll", host=HOST)
    reloaded.delete_acls([ANY_BINDING])
    assert json.loads((data_dir / "acls.json").read_text()) == {"version": 1, "resources": []}
    assert not list(data_dir.glob("*.tmp"))


def test_many_prefixes_of_many_lengths(make: Make) -> None:
    """The prefix index looks a name up at each length some prefix has; every length counts."""
    bindings = [acl(f"User:u{i}", Op.READ, name="t" * i, pattern=PREFIXED) for i in range(1, 30)]
    authorizer = make(*bindings)
    for i in range(1, 30):
        assert can(authorizer, f"User:u{i}", Op.READ, name="t" * 40)
        assert can(authorizer, f"User:u{i}", Op.READ, name="t" * i)
        assert not can(authorizer, f"User:u{i}", Op.READ, name="t" * (i - 1))
