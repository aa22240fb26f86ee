"""What a client may do to a resource: the answer to the ``*_authorized_operations`` fields.

Metadata, DescribeCluster, DescribeGroups and DescribeTopicPartitions can ask for the
operations the requesting principal may perform on each resource, as a 32-bit field
with bit ``n`` set for ``AclOperation`` code ``n`` (Kafka's ``Utils.to32BitField``).
Admin tools read it to show permissions, so answering nothing reads as "no
permissions".

With no authorizer configured (Kafka's default, and Strom's until ACLs exist) every
request is allowed, so the answer is every operation that applies to the resource
type — Kafka's ``AclEntry.supportedOperations``: 8 for a topic, 7 for the cluster, 3
for a group. When ACLs arrive this module is where the principal's ACLs narrow it.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class AclOperation(IntEnum):
    """Kafka's ``AclOperation`` codes (the bit positions of the authorized-operations field)."""

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


_Op = AclOperation
SUPPORTED_OPERATIONS: Final[dict[ResourceType, frozenset[AclOperation]]] = {
    ResourceType.TOPIC: frozenset({_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE,
                                   _Op.ALTER, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_Op.READ, _Op.DESCRIBE, _Op.DELETE}),
    ResourceType.CLUSTER: frozenset({_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS,
                                     _Op.ALTER_CONFIGS, _Op.IDEMPOTENT_WRITE, _Op.ALTER,
                                     _Op.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_Op.DESCRIBE}),
    ResourceType.USER: frozenset({_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS}),
}

CLUSTER_NAME: Final = "kafka-cluster"  # the one CLUSTER resource's name, as Kafka's
# The field's value when the request did not ask (the schemas' default, INT32_MIN).
OPERATIONS_NOT_REQUESTED: Final = -(2**31)


def to_bit_field(operations: frozenset[AclOperation]) -> int:
    """Bit ``code`` set for each operation, as Kafka's ``Utils.to32BitField``."""
    return sum(1 << operation for operation in operations)


_ALL_SUPPORTED: Final = {kind: to_bit_field(ops) for kind, ops in SUPPORTED_OPERATIONS.items()}


def authorized_operations(resource_type: ResourceType, name: str, *, requested: bool = True) -> int:
    """The operations allowed on the resource ``name`` of ``resource_type``, as a bit field;
    ``OPERATIONS_NOT_REQUESTED`` when the request did not ask.

    No authorizer is configured, so it is everything the resource type supports
    whatever the name (Kafka's ``AuthHelper.authorizedOperations`` without an authorizer).
    """
    if not requested:
        return OPERATIONS_NOT_REQUESTED
    return _ALL_SUPPORTED[resource_type]
