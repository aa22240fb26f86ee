"""``strom acl list|create|delete``: Kafka's ACLs over DescribeAcls, CreateAcls and DeleteAcls.

The resource and principal options are ``kafka-acls.sh``'s (``--topic``, ``--group``,
``--cluster``, ``--transactional-id``, ``--resource-pattern-type``,
``--allow-principal``/``--deny-principal``, ``--operation``, ``--host``); the numbers on
the wire are Kafka's (``strom.security.acl.model``), so the command works with any broker
that has an authorizer. ``list`` prints one row per ACL with Kafka's enum names.
"""

from __future__ import annotations

import argparse
from typing import Any

from strom.commands.common import (
    CommandError,
    add_client_options,
    check,
    print_json,
    print_table,
    request_any,
    run,
)

COLUMNS = ("RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN-TYPE", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
_OPERATIONS = ("all", "read", "write", "create", "delete", "alter", "describe", "cluster_action",
               "describe_configs", "alter_configs", "idempotent_write", "create_tokens", "describe_tokens")


def add_parser(commands: Any) -> None:
    acl = commands.add_parser("acl", help="list, create and delete ACLs")
    verbs = acl.add_subparsers(dest="verb", required=True)
    listing = verbs.add_parser("list", help="ACLs matching a resource and/or principal (default: all)")
    create = verbs.add_parser("create", help="add ACLs: principals x operations on one resource")
    delete = verbs.add_parser("delete", help="remove the ACLs matching the options")
    for verb, name in ((listing, "list"), (create, "create"), (delete, "delete")):
        resource = verb.add_mutually_exclusive_group(required=name == "create")
        resource.add_argument("--topic")
        resource.add_argument("--group")
        resource.add_argument("--transactional-id")
        resource.add_argument("--cluster", action="store_true")
        verb.add_argument("--resource-pattern-type", default="literal" if name == "create" else "any",
                          choices=["literal", "prefixed"] if name == "create" else ["any", "match", "literal",
                                                                                    "prefixed"])
        verb.add_argument("--principal" if name == "list" else "--allow-principal", action="append", default=[],
                          dest="allow", metavar="User:NAME")
        if name != "list":
            verb.add_argument("--deny-principal", action="append", default=[], dest="deny", metavar="User:NAME")
            verb.add_argument("--operation", action="append", default=[], choices=_OPERATIONS, type=str.lower)
            verb.add_argument("--host", default="*" if name == "create" else None)
        add_client_options(verb)
    listing.set_defaults(run=lambda args: run("acl list", lambda: _list(args)))
    create.set_defaults(run=lambda args: run("acl create", lambda: _create(args)))
    delete.set_defaults(run=lambda args: run("acl delete", lambda: _delete(args)))


def _resource(args: argparse.Namespace) -> tuple[int, str | None]:
    from strom.security.acl.model import ResourceType

    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, "kafka-cluster"
    return ResourceType.ANY, None


def _row(resource_type: int, name: str, pattern: int, principal: str, host: str, operation: int,
         permission: int) -> tuple[str, ...]:
    from strom.security.acl.model import AclOperation, AclPermissionType, PatternType, ResourceType

    return (ResourceType(resource_type).name, name, PatternType(pattern).name, principal, host,
            AclOperation(operation).name, AclPermissionType(permission).name)


def _show(args: argparse.Namespace, rows: list[tuple[str, ...]]) -> None:
    if args.format == "json":
        keys = [column.lower().replace("-", "_") for column in COLUMNS]
        for row in rows:
            print_json(dict(zip(keys, row, strict=True)))
    else:
        print_table(COLUMNS, rows)


async def _list(args: argparse.Namespace) -> int:
    from strom.protocol.messages.describe_acls_request import DescribeAclsRequest
    from strom.security.acl.model import PatternType

    kind, name = _resource(args)
    principals = args.allow or [None]
    rows: list[tuple[str, ...]] = []
    for principal in principals:
        response = await request_any(args, DescribeAclsRequest(
            kind, name, PatternType[args.resource_pattern_type.upper()], principal, None, 1, 1))
        check(response.error_code, response.error_message)
        rows += [_row(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                      a.permission_type) for r in response.resources for a in r.acls]
    _show(args, sorted(set(rows)))
    return 0


def _entries(args: argparse.Namespace) -> list[tuple[str, int, int]]:
    from strom.security.acl.model import AclOperation, AclPermissionType

    operations = [AclOperation[op.upper()] for op in args.operation]
    principals = [(p, AclPermissionType.ALLOW) for p in args.allow] + [(p, AclPermissionType.DENY) for p in args.deny]
    return [(p, permission, op) for p, permission in principals for op in operations]


async def _create(args: argparse.Namespace) -> int:
    from strom.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
    from strom.security.acl.model import PatternType

    kind, name = _resource(args)
    entries = _entries(args)
    if not entries:
        raise CommandError("give --allow-principal or --deny-principal and at least one --operation", 2)
    pattern = PatternType[args.resource_pattern_type.upper()]
    creations = tuple(AclCreation(kind, name or "", pattern, principal, args.host, operation, permission)
                      for principal, permission, operation in entries)
    response = await request_any(args, CreateAclsRequest(creations))
    for result in response.results:
        check(result.error_code, result.error_message)
    _show(args, [_row(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                      c.permission_type) for c in creations])
    return 0


async def _delete(args: argparse.Namespace) -> int:
    from strom.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
    from strom.security.acl.model import AclOperation, AclPermissionType, PatternType

    kind, name = _resource(args)
    pattern = PatternType[args.resource_pattern_type.upper()]
    if kind == 1 and not (args.allow or args.deny):
        raise CommandError("refusing to delete every ACL: name a resource or a principal", 2)
    principals: list[tuple[str | None, int]] = [
        *((p, AclPermissionType.ALLOW) for p in args.allow), *((p, AclPermissionType.DENY) for p in args.deny)]
    operations = [AclOperation[op.upper()] for op in args.operation] or [AclOperation.ANY]
    entries = [(principal, permission, operation) for principal, permission in principals or [
        (None, AclPermissionType.ANY)] for operation in operations]
    filters = tuple(DeleteAclsFilter(kind, name, pattern, principal, args.host, operation, permission)
                    for principal, permission, operation in entries)
    response = await request_any(args, DeleteAclsRequest(filters))
    rows: list[tuple[str, ...]] = []
    for result in response.filter_results:
        check(result.error_code, result.error_message)
        rows += [_row(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                      m.permission_type) for m in result.matching_acls]
    _show(args, sorted(set(rows)))
    return 0
