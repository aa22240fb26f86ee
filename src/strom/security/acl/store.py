"""Where ACLs are kept: a small seam so one node keeps them in a file and a cluster in
ZooKeeper (Kafka's ``/kafka-acl`` znodes, ``strom.security.acl.zk_store``).

The unit of storage is a resource pattern and its set of entries, as Kafka's znode per
resource: ``update`` changes one pattern's entries from what the store holds now (another
broker may have changed them: ZooKeeper's store retries on the znode's version, as Kafka's
``AclAuthorizer.updateResourceAcls``), an empty set removing the pattern.

``FileAclStore`` format (``<data dir>/acls.json``), Kafka's znode JSON per resource::

    {"version": 1, "resources": [
      {"resourceType": "Topic", "patternType": "LITERAL", "name": "orders",
       "acls": [{"principal": "User:alice", "permissionType": "Allow",
                 "operation": "Read", "host": "*"}]}]}

Written whole to a temporary file, fsynced and renamed over the old one, so a crash
leaves the old set or the new one, never a mix; read once at start.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Protocol

from strom.security.acl.model import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_kafka_name,
    kafka_name,
)

ACL_FILE: Final = "acls.json"
VERSION: Final = 1


class AclStoreError(Exception):
    """The stored ACLs cannot be read (the message names the file or znode)."""


class AclStore(Protocol):
    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every stored pattern and its entries."""
        ...

    def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]:
        """Store ``change(current entries)`` as ``pattern``'s entries (empty: remove the pattern);
        what is stored now."""
        ...


Change = Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]


def entries_to_json(entries: Iterable[AccessControlEntry]) -> dict[str, Any]:
    """Kafka's ACL znode data: ``{"version":1,"acls":[...]}`` (``AclEntry.toJsonCompatibleMap``)."""
    return {"version": VERSION, "acls": [
        {"principal": e.principal, "permissionType": kafka_name(e.permission_type),
         "operation": kafka_name(e.operation), "host": e.host}
        for e in sorted(entries, key=_entry_order)]}


def entries_from_json(document: Mapping[str, Any]) -> frozenset[AccessControlEntry]:
    return frozenset(
        AccessControlEntry(acl["principal"], acl["host"], from_kafka_name(AclOperation, acl["operation"]),
                           from_kafka_name(AclPermissionType, acl["permissionType"]))
        for acl in document.get("acls", ()))


def _entry_order(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return entry.principal, entry.host, entry.operation, entry.permission_type


class FileAclStore:
    """One node's ACLs in ``<data dir>/acls.json`` (format in the module docstring)."""

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, ACL_FILE)
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._writing = threading.Lock()  # updates come from worker threads, one file write at a time

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        try:
            with open(self.path, encoding="utf-8") as file:
                document = json.load(file)
            self._acls = {
                ResourcePattern(from_kafka_name(ResourceType, resource["resourceType"]), resource["name"],
                                from_kafka_name(PatternType, resource["patternType"])): entries_from_json(resource)
                for resource in document["resources"]}
        except FileNotFoundError:
            self._acls = {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise AclStoreError(f"cannot read the ACLs in {self.path}: {exc}") from None
        return dict(self._acls)

    def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]:
        with self._writing:
            return self._update(pattern, change)

    def _update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]:
        entries = change(self._acls.get(pattern, frozenset()))
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)
        resources = [{"resourceType": kafka_name(p.resource_type), "patternType": p.pattern_type.name,
                      "name": p.name, **entries_to_json(e)}
                     for p, e in sorted(self._acls.items(), key=lambda item: (item[0].resource_type, item[0].name,
                                                                               item[0].pattern_type))]
        self._write({"version": VERSION, "resources": resources})
        return entries

    def _write(self, document: dict[str, Any]) -> None:
        temporary = self.path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(document, file, indent=1)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
        directory = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
