"""ZkAclStore: a cluster's ACLs where Kafka's ZooKeeper-mode brokers keep them, so every
broker decides from the same ACLs and Kafka's tools (kafka-acls.sh --authorizer-properties
zookeeper.connect=...) read and write them (Kafka's ``ZkData`` ACL znodes).

- a LITERAL pattern's entries in ``/kafka-acl/<ResourceType>/<name>``, another pattern type's
  in ``/kafka-acl-extended/<patterntype lower-case>/<ResourceType>/<name>`` (``Topic``,
  ``Group``, ``Cluster``, ``TransactionalId``, ``DelegationToken``, ``User``), each
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``;
  a pattern left with no entry has its znode deleted, as Kafka does;
- a change is written on the znode's version (read, change, conditional set or create;
  retried when another broker got there first, as ``AclAuthorizer.updateResourceAcls``),
  then announced by a sequential ``acl_changes_<seq>`` node: under ``/kafka-acl-changes`` for
  a literal pattern, holding ``TOPIC:<name>`` (the resource type's enum name, ``:``, the
  name); under ``/kafka-acl-extended-changes`` for the others, holding
  ``{"version":1,"resourceType":"TOPIC","name":"<name>","patternType":"PREFIXED"}``;
- every broker watches both change paths and re-reads the patterns the notifications newer
  than the last it saw name (``changes``, ``read``). Old notifications are not deleted
  (Kafka removes them after 15 minutes).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from strom.security.acl.model import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_kafka_name,
    kafka_name,
)
from strom.security.acl.store import AclStoreError, Change, entries_from_json, entries_to_json

if TYPE_CHECKING:
    from strom.cluster.zk_client import KafkaZkClient

logger = logging.getLogger(__name__)

LITERAL_ROOT: Final = "/kafka-acl"
EXTENDED_ROOT: Final = "/kafka-acl-extended"
LITERAL_CHANGES: Final = "/kafka-acl-changes"
EXTENDED_CHANGES: Final = "/kafka-acl-extended-changes"
CHANGE_PREFIX: Final = "acl_changes_"
STORED_PATTERNS: Final = (PatternType.LITERAL, PatternType.PREFIXED)
WRITE_ATTEMPTS: Final = 10


def acl_root(pattern_type: PatternType) -> str:
    return LITERAL_ROOT if pattern_type == PatternType.LITERAL else f"{EXTENDED_ROOT}/{pattern_type.name.lower()}"


def acl_path(pattern: ResourcePattern) -> str:
    return f"{acl_root(pattern.pattern_type)}/{kafka_name(pattern.resource_type)}/{pattern.name}"


def encode_acls(entries: frozenset[AccessControlEntry]) -> bytes:
    return json.dumps(entries_to_json(entries), separators=(",", ":")).encode()


def decode_acls(data: bytes) -> frozenset[AccessControlEntry]:
    try:
        return entries_from_json(json.loads(data) if data else {})
    except (ValueError, KeyError, TypeError) as exc:
        raise AclStoreError(f"unreadable ACL znode data {data[:200]!r}: {exc}") from None


def changes_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES if pattern_type == PatternType.LITERAL else EXTENDED_CHANGES


def encode_change(pattern: ResourcePattern) -> bytes:
    """The notification's data (Kafka's ``LiteralAclChangeStore``/``ExtendedAclChangeStore``)."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps({"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
                       "patternType": pattern.pattern_type.name}, separators=(",", ":")).encode()


def decode_change(changes: str, data: bytes) -> ResourcePattern:
    """The pattern a notification under ``changes`` names (names read case-insensitively, as
    Kafka's ``fromString``)."""
    text = data.decode()
    if changes == LITERAL_CHANGES:
        kind, separator, name = text.partition(":")
        if not separator:
            raise ValueError(f"expected ResourceType:ResourceName, got {text!r}")
        return ResourcePattern(from_kafka_name(ResourceType, kind), name, PatternType.LITERAL)
    event = json.loads(text)
    if event.get("version", 1) > 1:
        raise ValueError(f"unsupported ACL change event version {event['version']}")
    return ResourcePattern(from_kafka_name(ResourceType, event["resourceType"]), event["name"],
                           from_kafka_name(PatternType, event["patternType"]))


class ZkAclStore:
    """The ``AclStore`` of a cluster's broker (format in the module docstring). Blocking:
    called from a worker thread by the broker, directly by tests."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self._zk = zk
        self._last_seen: dict[str, int] = {}
        for path in (LITERAL_ROOT, f"{EXTENDED_ROOT}/prefixed", LITERAL_CHANGES, EXTENDED_CHANGES):
            zk.kazoo.ensure_path(path)  # as Kafka's createAclPaths: watches need the change paths
        for changes in (LITERAL_CHANGES, EXTENDED_CHANGES):  # notifications before now are in load()
            self._last_seen[changes] = max((_sequence(child) for child in self._children(changes)), default=-1)

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        found: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern_type in STORED_PATTERNS:
            root = acl_root(pattern_type)
            for type_name in self._children(root):
                try:
                    resource_type = from_kafka_name(ResourceType, type_name)
                except ValueError:
                    logger.warning("ACLs under %s/%s ignored: not a resource type", root, type_name)
                    continue
                for name in self._children(f"{root}/{type_name}"):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    if entries := self.read(pattern):
                        found[pattern] = entries
        return found

    def read(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """``pattern``'s entries as ZooKeeper holds them now (empty if none)."""
        try:
            data, _ = self._zk.kazoo.get(acl_path(pattern))
        except NoNodeError:
            return frozenset()
        return decode_acls(data)

    def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]:
        kazoo = self._zk.kazoo
        path = acl_path(pattern)
        for _ in range(WRITE_ATTEMPTS):
            try:
                data, stat = kazoo.get(path)
                current, version = decode_acls(data), stat.version
            except NoNodeError:
                current, version = frozenset(), None
            entries = change(current)
            if entries == current:
                return current
            try:
                if not entries:
                    kazoo.delete(path, version=version if version is not None else -1)
                elif version is None:
                    kazoo.create(path, encode_acls(entries), makepath=True)
                else:
                    kazoo.set(path, encode_acls(entries), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                continue  # another broker changed it first: again, from what it wrote
            kazoo.create(f"{changes_path(pattern.pattern_type)}/{CHANGE_PREFIX}", encode_change(pattern),
                         sequence=True, makepath=True)
            return entries
        raise OSError(f"{path} kept changing while it was written")

    def watch(self, notify: Callable[[], None]) -> None:
        """``notify()`` (on kazoo's thread: it must not block) whenever a change path gets a
        notification; ``changes`` then says which patterns to read again."""
        def changed(_children: list[str]) -> bool:
            notify()
            return True  # keep watching

        for changes in (LITERAL_CHANGES, EXTENDED_CHANGES):
            self._zk.watch_children(changes, changed)

    def changes(self) -> list[ResourcePattern]:
        """The patterns named by the notifications newer than the last seen (marked seen)."""
        named: list[ResourcePattern] = []
        for changes in (LITERAL_CHANGES, EXTENDED_CHANGES):
            newer = sorted((sequence, child) for child in self._children(changes)
                           if (sequence := _sequence(child)) > self._last_seen[changes])
            for sequence, child in newer:
                self._last_seen[changes] = sequence
                try:
                    data, _ = self._zk.kazoo.get(f"{changes}/{child}")
                    named.append(decode_change(changes, data))
                except NoNodeError:
                    continue
                except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
                    logger.warning("ACL change notification %s/%s ignored: %s", changes, child, exc)
        return named

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._zk.kazoo.get_children(path))
        except NoNodeError:
            return []


def _sequence(child: str) -> int:
    try:
        return int(child.removeprefix(CHANGE_PREFIX)) if child.startswith(CHANGE_PREFIX) else -1
    except ValueError:
        return -1
