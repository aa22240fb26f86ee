"""ACL filters (Describe/DeleteAcls) match as Kafka's ``ResourcePatternFilter`` and
``AccessControlEntryFilter``: the cases of Kafka's ResourcePatternFilterTest and AclBindingTest."""

from __future__ import annotations

import pytest

from strom.security.acl.model import (
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
    binding_error,
    from_kafka_name,
    kafka_name,
    operation,
    pattern_type,
)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED, ANY, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH


@pytest.mark.parametrize(("filter_args", "pattern", "expected"), [
    # resource type
    ((ResourceType.ANY, "Name", LITERAL), (TOPIC, "Name", LITERAL), True),
    ((GROUP, "Name", LITERAL), (TOPIC, "Name", LITERAL), False),
    # a literal or prefixed filter: that pattern type and exactly that name
    ((TOPIC, "Name", LITERAL), (TOPIC, "Name", LITERAL), True),
    ((TOPIC, "Name", LITERAL), (TOPIC, "Name", PREFIXED), False),
    ((TOPIC, "Name", PREFIXED), (TOPIC, "Name", PREFIXED), True),
    ((TOPIC, "Name", PREFIXED), (TOPIC, "Na", PREFIXED), False),
    ((TOPIC, "Name", LITERAL), (TOPIC, "*", LITERAL), False),
    ((TOPIC, None, LITERAL), (TOPIC, "Other", LITERAL), True),
    ((TOPIC, None, LITERAL), (TOPIC, "Other", PREFIXED), False),
    # ANY: any pattern type, exactly the name
    ((TOPIC, "Name", ANY), (TOPIC, "Name", PREFIXED), True),
    ((TOPIC, "Name", ANY), (TOPIC, "Name", LITERAL), True),
    ((TOPIC, "Name", ANY), (TOPIC, "*", LITERAL), False),
    ((TOPIC, "Name", ANY), (TOPIC, "Na", PREFIXED), False),
    ((TOPIC, None, ANY), (TOPIC, "Na", PREFIXED), True),
    # MATCH: every pattern that applies to a resource of that name
    ((TOPIC, "Name", MATCH), (TOPIC, "Name", LITERAL), True),
    ((TOPIC, "Name", MATCH), (TOPIC, "*", LITERAL), True),
    ((TOPIC, "Name", MATCH), (TOPIC, "Na", PREFIXED), True),
    ((TOPIC, "Name", MATCH), (TOPIC, "Name", PREFIXED), True),
    ((TOPIC, "Name", MATCH), (TOPIC, "Names", PREFIXED), False),
    ((TOPIC, "Name", MATCH), (TOPIC, "Other", LITERAL), False),
    ((TOPIC, "Name", MATCH), (TOPIC, "*", PREFIXED), False),  # "*" is a wildcard only when literal
    ((TOPIC, None, MATCH), (TOPIC, "Other", PREFIXED), True),
])
def test_resource_pattern_filter(filter_args: tuple[ResourceType, str | None, PatternType],
                                 pattern: tuple[ResourceType, str, PatternType], expected: bool) -> None:
    assert ResourcePatternFilter(*filter_args).matches(ResourcePattern(*pattern)) is expected


ENTRY = AccessControlEntry("User:alice", "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW)


@pytest.mark.parametrize(("entry_filter", "expected"), [
    (AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY), True),
    (AccessControlEntryFilter("User:alice", "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW), True),
    (AccessControlEntryFilter("User:bob", None, AclOperation.ANY, AclPermissionType.ANY), False),
    (AccessControlEntryFilter("User:*", None, AclOperation.ANY, AclPermissionType.ANY), False),  # no wildcard in filters
    (AccessControlEntryFilter(None, "*", AclOperation.ANY, AclPermissionType.ANY), False),
    (AccessControlEntryFilter(None, None, AclOperation.WRITE, AclPermissionType.ANY), False),
    (AccessControlEntryFilter(None, None, AclOperation.ALL, AclPermissionType.ANY), False),  # ALL finds ALL only
    (AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.DENY), False),
])
def test_entry_filter(entry_filter: AccessControlEntryFilter, expected: bool) -> None:
    assert entry_filter.matches(ENTRY) is expected
    binding = AclBinding(ResourcePattern(TOPIC, "orders"), ENTRY)
    match_topic = ResourcePatternFilter(TOPIC, "orders", MATCH)
    assert AclBindingFilter(match_topic, entry_filter).matches(binding) is expected


def test_unknown_elements_and_unknown_codes() -> None:
    """An unrecognised code reads as UNKNOWN (Kafka's ``fromCode``), and a filter with one is refused."""
    assert operation(99) is AclOperation.UNKNOWN
    assert pattern_type(0) is PatternType.UNKNOWN
    known = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert not AclBindingFilter(ResourcePatternFilter(TOPIC, None, ANY), known).has_unknown()
    assert AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN, None, ANY), known).has_unknown()
    assert AclBindingFilter(ResourcePatternFilter(TOPIC, None, PatternType.UNKNOWN), known).has_unknown()
    unknown_op = AccessControlEntryFilter(None, None, AclOperation.UNKNOWN, AclPermissionType.ANY)
    assert AclBindingFilter(ResourcePatternFilter(TOPIC, None, ANY), unknown_op).has_unknown()


def _binding(kind: ResourceType = TOPIC, name: str = "t", pattern: PatternType = LITERAL, principal: str = "User:a",
             op: AclOperation = AclOperation.READ,
             permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(kind, name, pattern), AccessControlEntry(principal, "*", op, permission))


@pytest.mark.parametrize(("binding", "error"), [
    (_binding(), None),
    (_binding(pattern=PREFIXED), None),
    (_binding(ResourceType.CLUSTER, "kafka-cluster", op=AclOperation.ALTER), None),
    (_binding(ResourceType.ANY), "Invalid resourceType ANY"),
    (_binding(pattern=ANY), "Invalid patternType ANY"),
    (_binding(pattern=MATCH), "Invalid patternType MATCH"),
    (_binding(op=AclOperation.ANY), "Invalid operation ANY"),
    (_binding(permission=AclPermissionType.ANY), "Invalid permissionType ANY"),
    (_binding(ResourceType.CLUSTER, "other"), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (_binding(name=""), "Invalid empty resource name"),
])
def test_creation_is_validated_as_kafka(binding: AclBinding, error: str | None) -> None:
    assert binding_error(binding) == error


def test_a_principal_needs_its_type() -> None:
    error = binding_error(_binding(principal="alice"))
    assert error is not None and error.startswith("Could not parse principal")


@pytest.mark.parametrize(("member", "name"), [
    (AclOperation.IDEMPOTENT_WRITE, "IdempotentWrite"), (AclOperation.DESCRIBE_CONFIGS, "DescribeConfigs"),
    (AclOperation.ALL, "All"), (ResourceType.TRANSACTIONAL_ID, "TransactionalId"),
    (ResourceType.DELEGATION_TOKEN, "DelegationToken"), (AclPermissionType.ALLOW, "Allow"),
    (PatternType.PREFIXED, "Prefixed"),
])
def test_kafka_names(member: AclOperation | ResourceType | AclPermissionType | PatternType, name: str) -> None:
    """The names Kafka writes in ZooKeeper's ACL JSON and znode paths, both ways."""
    assert kafka_name(member) == name
    assert from_kafka_name(type(member), name) is member
    assert from_kafka_name(type(member), member.name) is member
