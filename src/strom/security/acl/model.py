"""ACLs as Kafka models them (KIP-11, KIP-290): "principal P is Allowed/Denied operation O
from host H on any resource matching pattern RP".

A stored ACL is an ``AclBinding``: a ``ResourcePattern`` (resource type, name, LITERAL or
PREFIXED; LITERAL ``*`` is the wildcard) and an ``AccessControlEntry`` (principal, host,
operation, permission). Describe and delete requests carry an ``AclBindingFilter``, whose
fields may be ANY (every value), MATCH (the patterns that would apply to a resource of that
name) or null (anything): ``matches`` is Kafka's ``ResourcePatternFilter.matches`` and
``AccessControlEntryFilter.matches``. The enum codes are the wire's; the names written to
storage are Kafka's (``SecurityUtils``: ``Read``, ``IdempotentWrite``, ``TransactionalId``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final, TypeVar


class AclOperation(IntEnum):
    """Kafka's ``AclOperation`` codes (also the bit positions of authorized-operations fields)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(IntEnum):
    """Kafka's ``ResourceType`` codes, as ACL and config requests carry them."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    """LITERAL and PREFIXED are stored; ANY and MATCH exist only in filters."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


E = TypeVar("E", bound=IntEnum)

WILDCARD_RESOURCE: Final = "*"  # a LITERAL pattern named "*" matches every name
WILDCARD_HOST: Final = "*"
WILDCARD_PRINCIPAL: Final = "User:*"
CLUSTER_NAME: Final = "kafka-cluster"  # the one CLUSTER resource's name, as Kafka's


def _enum_of(kind: type[E], code: int) -> E:
    """The member for ``code``; an unknown code is UNKNOWN, as Kafka's ``fromCode``."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def operation(code: int) -> AclOperation:
    return _enum_of(AclOperation, code)


def resource_type(code: int) -> ResourceType:
    return _enum_of(ResourceType, code)


def permission_type(code: int) -> AclPermissionType:
    return _enum_of(AclPermissionType, code)


def pattern_type(code: int) -> PatternType:
    return _enum_of(PatternType, code)


def kafka_name(member: IntEnum) -> str:
    """Kafka's camel-case name (``IDEMPOTENT_WRITE`` -> ``IdempotentWrite``), as ZooKeeper's JSON
    and the ACL znode paths write it."""
    return "".join(part.capitalize() for part in member.name.split("_"))


def from_kafka_name(kind: type[E], name: str) -> E:
    """The member whose Kafka name is ``name`` (case-insensitive, as ``fromString``)."""
    wanted = name.replace("_", "").lower()
    for member in kind:
        if member.name.replace("_", "").lower() == wanted:
            return member
    raise ValueError(f"unknown {kind.__name__} {name!r}")


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None  # None: any name
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``: MATCH selects the patterns that apply to a
        resource named ``name`` (its literal, the wildcard, its prefixes); ANY any pattern type
        with exactly this name."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if wanted == PatternType.ANY or wanted == pattern.pattern_type:
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:  # MATCH
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)

    def has_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None  # None: any
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        """Kafka's ``AccessControlEntryFilter.matches``: null and ANY match everything, the rest
        must be equal (a filter on ALL finds only ACLs on ALL)."""
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation == AclOperation.ANY or self.operation == entry.operation)
                and (self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type))

    def has_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def has_unknown(self) -> bool:
        """Kafka refuses a request whose filter has an UNKNOWN element (an unknown code too)."""
        return self.pattern.has_unknown() or self.entry.has_unknown()


ANY_BINDING: Final = AclBindingFilter(
    ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
    AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))


def binding_error(binding: AclBinding) -> str | None:
    """Why Kafka refuses to create ``binding`` (INVALID_REQUEST), or None: the checks of Kafka's
    ``AclApis.handleCreateAcls`` and ``AclControlManager.validateNewAcl``."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type == ResourceType.UNKNOWN or pattern.pattern_type == PatternType.UNKNOWN or (
            entry.operation == AclOperation.UNKNOWN or entry.permission_type == AclPermissionType.UNKNOWN):
        return "CreatableAcls contain unknown elements"
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {pattern.resource_type.name}"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {pattern.pattern_type.name}"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {entry.permission_type.name}"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Invalid empty resource name"
    if ":" not in entry.principal:
        return f"Could not parse principal from `{entry.principal}` (no colon is present separating the " \
               "principal type from the principal name)"
    return None


def filter_from_codes(resource_type_code: int, name: str | None, pattern_type_code: int, principal: str | None,
                      host: str | None, operation_code: int, permission_code: int) -> AclBindingFilter:
    """A filter from a DescribeAcls/DeleteAcls request's fields (unknown codes read as UNKNOWN)."""
    return AclBindingFilter(
        ResourcePatternFilter(resource_type(resource_type_code), name, pattern_type(pattern_type_code)),
        AccessControlEntryFilter(principal, host, operation(operation_code), permission_type(permission_code)))


def binding_from_codes(resource_type_code: int, name: str, pattern_type_code: int, principal: str, host: str,
                       operation_code: int, permission_code: int) -> AclBinding:
    """A binding from a CreateAcls request's fields (``binding_error`` says whether it may be stored)."""
    return AclBinding(ResourcePattern(resource_type(resource_type_code), name, pattern_type(pattern_type_code)),
                      AccessControlEntry(principal, host, operation(operation_code), permission_type(permission_code)))
