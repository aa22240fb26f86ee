"""The ACL authorizer: Kafka's ``AclAuthorizer`` / ``StandardAuthorizer`` decision, indexed.

A request is allowed when (Kafka's order, the same in both of its authorizers):

1. its principal is a super user (``super.users``);
2. otherwise the ACLs whose pattern matches the resource are gathered — the literal name,
   the literal ``*`` and every PREFIXED pattern the name starts with — keeping those whose
   principal is the request's or ``User:*`` and whose host is the client's or ``*``;
3. a DENY on the operation (or ALL) refuses, whatever ALLOWs exist;
4. an ALLOW on the operation (or ALL) allows; ALLOW Read/Write/Delete/Alter also allows
   Describe and ALLOW AlterConfigs allows DescribeConfigs (implied for ALLOW only: DENY
   Read does not deny Describe);
5. otherwise, if no ACL at all matched the resource (for any principal),
   ``allow.everyone.if.no.acl.found`` decides; else refused.

The check must cost microseconds with thousands of ACLs (issue 20), so nothing is
scanned: ACLs are indexed by resource type, then by literal name and by prefix, and a
name is looked up at each prefix length that some PREFIXED pattern of its type has, and
in each pattern found only the entries of the principal and of ``User:*`` are read. The
answers are cached per (principal, host, operation, resource), the cache dropped on any
change (changes are rare, checks are per request).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Final

from strom.security.acl.model import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    binding_error,
)
from strom.security.acl.store import AclStore, Change

logger = logging.getLogger(__name__)

_DENY: Final = AclPermissionType.DENY
_ALL: Final = AclOperation.ALL
_DESCRIBE: Final = AclOperation.DESCRIBE
_DESCRIBE_CONFIGS: Final = AclOperation.DESCRIBE_CONFIGS
IMPLIES_DESCRIBE: Final = frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                                     AclOperation.ALTER, AclOperation.DESCRIBE})
IMPLIES_DESCRIBE_CONFIGS: Final = frozenset({AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS})
_CACHE_LIMIT: Final = 65536  # answers kept; dropped whole when full (a principal set is small)

ByPrincipal = dict[str, tuple[AccessControlEntry, ...]]  # a pattern's entries by principal


class AclAuthorizer:
    """Decides from the ACLs in its store; every change goes through it (and to the store)."""

    def __init__(self, store: AclStore, super_users: Iterable[str] = (), *,
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # Indexed by the resource type's code (a list: an enum's hash is a Python call), then by
        # literal name or prefix, then by principal ("User:*" is one key like the others).
        self._literal: list[dict[str, ByPrincipal]] = [{} for _ in ResourceType]
        self._prefixed: list[dict[str, ByPrincipal]] = [{} for _ in ResourceType]
        self._prefix_lengths: list[tuple[int, ...]] = [() for _ in ResourceType]
        # Answers by resource type and operation code, then (principal, host, name).
        self._answers: list[list[dict[tuple[str, str, str], bool]]] = self._no_answers()

    def load(self) -> None:
        """Read every ACL from the store (at start, and when a watched store changes)."""
        self._acls = {pattern: entries for pattern, entries in self.store.load().items() if entries}
        self._reindex()

    def loaded(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        """One pattern's entries as the store now has them (a change another broker made)."""
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)
        self._reindex()

    # -- decisions ------------------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """May ``principal`` connecting from ``host`` (an IP, no leading "/") do ``operation``
        on the resource ``name`` of ``resource_type``?"""
        if principal in self.super_users:
            return True
        answers = self._answers[resource_type][operation]
        key = (principal, host, name)
        answer = answers.get(key)
        if answer is None:
            answer = self._decide(principal, host, operation, resource_type, name)
            if len(answers) >= _CACHE_LIMIT:
                answers.clear()
            answers[key] = answer
        return answer

    def _decide(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                name: str) -> bool:
        """Every pattern that applies to the resource (literal, ``*``, prefixes), the entries
        of the principal and of ``User:*`` in each."""
        literal = self._literal[resource_type]
        matching = [found for found in (literal.get(name), literal.get(WILDCARD_RESOURCE)) if found is not None]
        if name == WILDCARD_RESOURCE and len(matching) == 2:
            matching.pop()
        if lengths := self._prefix_lengths[resource_type]:
            prefixed = self._prefixed[resource_type]
            size = len(name)
            for length in lengths:
                if length > size:
                    break
                if (found := prefixed.get(name[:length])) is not None:
                    matching.append(found)
        if not matching:
            return self.allow_everyone_if_no_acl_found
        allowed = False
        for by_principal in matching:
            for entries in (by_principal.get(principal), by_principal.get(WILDCARD_PRINCIPAL)):
                if entries is None:
                    continue
                for entry in entries:
                    if entry.host != host and entry.host != WILDCARD_HOST:
                        continue
                    acl_operation = entry.operation
                    if entry.permission_type is _DENY:
                        if acl_operation is operation or acl_operation is _ALL:
                            return False
                    elif not allowed:
                        allowed = (acl_operation is operation or acl_operation is _ALL
                                   or (operation is _DESCRIBE and acl_operation in IMPLIES_DESCRIBE)
                                   or (operation is _DESCRIBE_CONFIGS and acl_operation in IMPLIES_DESCRIBE_CONFIGS))
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May ``principal`` do ``operation`` on *some* resource of ``resource_type``? Kafka's
        ``Authorizer.authorizeByResourceType`` (KIP-679: an idempotent producer needs Write on
        any topic): an ALLOW not overridden by a DENY on the same literal name, on a prefix of
        it, or on ``*``. No implied operations here, as Kafka."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):  # super users, allow.everyone
            return True
        denied_literals: set[str] = set()
        denied_prefixes: set[str] = set()
        allowed: list[tuple[PatternType, str]] = []
        for pattern, entries in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            for entry in entries:
                if (entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL) or (
                        entry.host != host and entry.host != WILDCARD_HOST) or (
                        entry.operation is not operation and entry.operation is not _ALL):
                    continue
                if entry.permission_type is _DENY:
                    if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE:
                        return False
                    (denied_literals if pattern.pattern_type == PatternType.LITERAL else denied_prefixes).add(
                        pattern.name)
                else:
                    allowed.append((pattern.pattern_type, pattern.name))
        if any(kind == PatternType.LITERAL and name == WILDCARD_RESOURCE for kind, name in allowed):
            return True
        for kind, name in allowed:
            if kind == PatternType.LITERAL and name in denied_literals:
                continue
            if not any(name[:length] in denied_prefixes for length in range(1, len(name) + 1)):
                return True
        return False

    # -- the ACL APIs ---------------------------------------------------------------------
    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs ``acl_filter`` matches (DescribeAcls)."""
        return [binding for binding in self._bindings() if acl_filter.matches(binding)]

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[str | None]:
        """Add each binding (CreateAcls); per binding, why it was refused (INVALID_REQUEST) or None.
        Adding an ACL that exists already succeeds, as Kafka."""
        errors, changes = self._creations(bindings)
        self._update(changes)
        return errors

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove every ACL a filter matches (DeleteAcls); per filter, the ACLs it matched."""
        matched, changes = self._removals(filters)
        self._update(changes)
        return matched

    # The handlers' versions: the store's writes (an fsync, ZooKeeper round trips) in a worker
    # thread, the decisions' state changed on the event loop only.
    async def create_acls_async(self, bindings: Sequence[AclBinding]) -> list[str | None]:
        errors, changes = self._creations(bindings)
        await self._update_async(changes)
        return errors

    async def delete_acls_async(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        matched, changes = self._removals(filters)
        await self._update_async(changes)
        return matched

    def _creations(self, bindings: Sequence[AclBinding]) -> tuple[list[str | None], dict[ResourcePattern, Change]]:
        errors = [binding_error(binding) for binding in bindings]
        added: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding, error in zip(bindings, errors, strict=True):
            if error is None:
                added.setdefault(binding.pattern, set()).add(binding.entry)
        return errors, {pattern: partial(_with, frozenset(entries)) for pattern, entries in added.items()}

    def _removals(self, filters: Sequence[AclBindingFilter]
                  ) -> tuple[list[list[AclBinding]], dict[ResourcePattern, Change]]:
        current = self._bindings()
        matched = [[binding for binding in current if acl_filter.matches(binding)] for acl_filter in filters]
        removed: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for bindings in matched:
            for binding in bindings:
                removed.setdefault(binding.pattern, set()).add(binding.entry)
        return matched, {pattern: partial(_without, frozenset(entries)) for pattern, entries in removed.items()}

    def _bindings(self) -> list[AclBinding]:
        return [AclBinding(pattern, entry) for pattern, entries in self._acls.items() for entry in entries]

    def _update(self, changes: dict[ResourcePattern, Change]) -> None:
        """Each pattern's change made in the store first (a failed write changes nothing here),
        then kept as the store answers (with what other brokers stored meanwhile)."""
        for pattern, change in changes.items():
            self._keep(pattern, self.store.update(pattern, change))
        if changes:
            self._reindex()

    async def _update_async(self, changes: dict[ResourcePattern, Change]) -> None:
        for pattern, change in changes.items():
            self._keep(pattern, await asyncio.to_thread(self.store.update, pattern, change))
        if changes:
            self._reindex()

    def _keep(self, pattern: ResourcePattern, stored: frozenset[AccessControlEntry]) -> None:
        if stored:
            self._acls[pattern] = stored
        else:
            self._acls.pop(pattern, None)

    def _reindex(self) -> None:
        literal: list[dict[str, ByPrincipal]] = [{} for _ in ResourceType]
        prefixed: list[dict[str, ByPrincipal]] = [{} for _ in ResourceType]
        for pattern, entries in self._acls.items():
            index = literal if pattern.pattern_type == PatternType.LITERAL else prefixed
            by_principal: dict[str, list[AccessControlEntry]] = {}
            for entry in sorted(entries, key=lambda entry: entry.permission_type is not _DENY):  # DENYs first
                by_principal.setdefault(entry.principal, []).append(entry)
            index[pattern.resource_type][pattern.name] = {who: tuple(acl) for who, acl in by_principal.items()}
        self._literal, self._prefixed = literal, prefixed
        self._prefix_lengths = [tuple(sorted({len(name) for name in names})) for names in prefixed]
        self._answers = self._no_answers()

    @staticmethod
    def _no_answers() -> list[list[dict[tuple[str, str, str], bool]]]:
        return [[{} for _ in AclOperation] for _ in ResourceType]


def _with(added: frozenset[AccessControlEntry], current: frozenset[AccessControlEntry]
          ) -> frozenset[AccessControlEntry]:
    return current | added


def _without(removed: frozenset[AccessControlEntry], current: frozenset[AccessControlEntry]
             ) -> frozenset[AccessControlEntry]:
    return current - removed
