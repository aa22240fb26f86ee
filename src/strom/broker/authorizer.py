"""What a client may do to a resource: the answer to the ``*_authorized_operations`` fields.

Metadata, DescribeCluster, DescribeGroups and DescribeTopicPartitions can ask for the
operations the requesting principal may perform on each resource, as a 32-bit field
with bit ``n`` set for ``AclOperation`` code ``n`` (Kafka's ``Utils.to32BitField``).
Admin tools read it to show permissions, so answering nothing reads as "no
permissions".

With no authorizer configured (Kafka's default) every request is allowed, so the answer
is every operation that applies to the resource type — Kafka's
``AclEntry.supportedOperations``: 8 for a topic, 7 for the cluster, 3 for a group. With
``authorizer.class.name`` set (``build_authorizer``), the principal's ACLs narrow it
(``strom.security.acl``), and the checks handlers make start here (``allowed``...).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from strom.broker import request_context
from strom.protocol.error_codes import ErrorCode
from strom.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from collections.abc import Iterable

    from strom.broker.broker import Broker
    from strom.broker.config import BrokerConfig
    from strom.security.acl.authorizer import AclAuthorizer

__all__ = ["CLUSTER_NAME", "AclOperation", "ResourceType", "authorized_operations", "build_authorizer"]
logger = logging.getLogger(__name__)

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

# The field's value when the request did not ask (the schemas' default, INT32_MIN).
OPERATIONS_NOT_REQUESTED: Final = -(2**31)


def to_bit_field(operations: frozenset[AclOperation]) -> int:
    """Bit ``code`` set for each operation, as Kafka's ``Utils.to32BitField``."""
    return sum(1 << operation for operation in operations)


_ALL_SUPPORTED: Final = {kind: to_bit_field(ops) for kind, ops in SUPPORTED_OPERATIONS.items()}


def authorized_operations(resource_type: ResourceType, name: str, *, requested: bool = True,
                          authorizer: AclAuthorizer | None = None) -> int:
    """The operations the request's principal may perform on the resource ``name`` of
    ``resource_type``, as a bit field; ``OPERATIONS_NOT_REQUESTED`` when the request did not ask.

    With no authorizer, everything the resource type supports whatever the name; with one,
    each supported operation the principal's ACLs allow (Kafka's ``AuthHelper.authorizedOperations``).
    """
    if not requested:
        return OPERATIONS_NOT_REQUESTED
    if authorizer is None:
        return _ALL_SUPPORTED[resource_type]
    principal, host = request_context.principal.get(), client_address()
    return to_bit_field(frozenset(operation for operation in SUPPORTED_OPERATIONS[resource_type]
                                  if authorizer.authorize(principal, host, operation, resource_type, name)))


def cluster_operations(authorizer: AclAuthorizer | None, *, requested: bool) -> int:
    """Metadata's and DescribeCluster's ``cluster_authorized_operations``: as Kafka's
    ``AuthHelper``, 0 for a principal that may not Describe the cluster."""
    if requested and authorizer is not None and not allowed_on_cluster(authorizer, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, requested=requested, authorizer=authorizer)


def client_address() -> str:
    """The client's IP as ACLs name hosts (the connection keeps Kafka's "/host" form)."""
    return request_context.client_host.get().removeprefix("/")


# The checks handlers make. Each is called only where ``broker.authorizer`` is set, so a broker
# without ACLs pays one attribute test per request and nothing more.
def allowed(authorizer: AclAuthorizer, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    """May the request's principal do ``operation`` on the resource?"""
    return authorizer.authorize(request_context.principal.get(), client_address(), operation, resource_type, name)


def allowed_on_cluster(authorizer: AclAuthorizer, operation: AclOperation) -> bool:
    return allowed(authorizer, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def allowed_on_some(authorizer: AclAuthorizer, operation: AclOperation, resource_type: ResourceType) -> bool:
    """May the principal do ``operation`` on some resource of the type (Kafka's ``authorizeByResourceType``)?"""
    return authorizer.authorize_by_resource_type(request_context.principal.get(), client_address(), operation,
                                                 resource_type)


def refused(authorizer: AclAuthorizer | None, operation: AclOperation, resource_type: ResourceType,
            names: Iterable[str]) -> frozenset[str]:
    """The names among ``names`` the principal may not ``operation`` (none without an authorizer)."""
    if authorizer is None:
        return NONE_REFUSED
    return frozenset(name for name in names if not allowed(authorizer, operation, resource_type, name))


NONE_REFUSED: Final[frozenset[str]] = frozenset()


# Kafka's ConfigResource.Type codes (DescribeConfigs, AlterConfigs): not ACL resource types.
CONFIG_TOPIC: Final = 2
CONFIG_BROKERS: Final = frozenset({4, 8})  # BROKER, BROKER_LOGGER: the cluster's


def config_refusal(authorizer: AclAuthorizer, operation: AclOperation, config_resource_type: int,
                   name: str) -> ErrorCode | None:
    """The error for a config resource the principal may not ``operation`` (DescribeConfigs or
    AlterConfigs), None when allowed: a topic's are the topic's, a broker's the cluster's."""
    if config_resource_type == CONFIG_TOPIC:
        return None if allowed(authorizer, operation, ResourceType.TOPIC, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if config_resource_type in CONFIG_BROKERS:
        return None if allowed_on_cluster(authorizer, operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None  # a type Kafka does not know: the handler answers it


def cluster_action_allowed(broker: Broker) -> bool:
    """The controller's and other brokers' requests (ClusterAction on the cluster)."""
    return broker.authorizer is None or allowed_on_cluster(broker.authorizer, AclOperation.CLUSTER_ACTION)


KNOWN_AUTHORIZERS: Final = ("kafka.security.authorizer.AclAuthorizer",
                            "org.apache.kafka.metadata.authorizer.StandardAuthorizer")


def build_authorizer(config: BrokerConfig) -> AclAuthorizer | None:
    """The ACL authorizer ``authorizer.class.name`` asks for, its ACLs loaded; None when unset.

    Any name turns on the one authorizer Strom has, which decides as both of Kafka's do
    (``ConfigError`` for a ``super.users`` entry that is not a principal or unreadable ACLs).
    """
    name = config.authorizer_class_name.strip()
    if not name:
        return None
    from strom.broker.config import ConfigError
    from strom.security.acl.authorizer import AclAuthorizer
    from strom.security.acl.store import AclStoreError, FileAclStore

    super_users = [user.strip() for user in config.super_users.split(";") if user.strip()]
    for user in super_users:
        if ":" not in user:
            raise ConfigError(f"invalid value {config.super_users!r} for super.users: {user!r} is not a principal "
                              "(expected <type>:<name>, e.g. User:admin, separated by ';')")
    kind = "" if name in KNOWN_AUTHORIZERS else " (not one of Kafka's: Strom's ACL authorizer decides as they do)"
    logger.info("authorizer.class.name %s: ACL authorization on%s; super users: %s", name, kind,
                ", ".join(super_users) or "none")
    authorizer = AclAuthorizer(FileAclStore(config.data_dir), super_users,
                               allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found)
    if config.cluster_mode:  # ZooKeeper's ACLs, once connected (start_cluster_acls); none until then
        return authorizer
    try:
        authorizer.load()
    except AclStoreError as exc:
        raise ConfigError(str(exc)) from None
    return authorizer


def start_cluster_acls(broker: Broker) -> None:
    """A cluster's broker keeps ACLs in ZooKeeper (``strom.security.acl.zk_store``): read them
    all once its cluster side is connected, then follow the ACL change notifications."""
    authorizer = broker.authorizer
    if authorizer is None or broker.cluster is None:
        return
    import asyncio

    from strom.security.acl.zk_store import ZkAclStore

    store = ZkAclStore(broker.cluster.zk)
    authorizer.store = store
    authorizer.load()
    loop = asyncio.get_running_loop()

    async def apply_changes() -> None:
        try:
            for pattern in await asyncio.to_thread(store.changes):
                authorizer.loaded(pattern, await asyncio.to_thread(store.read, pattern))
        except Exception as exc:  # ZooKeeper unreachable: the next notification tries again
            logger.warning("ACL changes not read from ZooKeeper: %s", exc)

    def changed() -> None:  # on kazoo's thread
        if not loop.is_closed():
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(apply_changes()))

    store.watch(changed)
