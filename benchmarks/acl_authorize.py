"""ACL authorization micro-benchmark: one ``AclAuthorizer.authorize`` call with 1,000 ACLs loaded.

    .venv/bin/python benchmarks/acl_authorize.py [--acls 1000] [--rounds 7]

Issue 20's goal is at most 5 µs of authorization per request with 1,000 ACLs. The ACLs
are a realistic mix over 1,000 principals: per principal a LITERAL topic ACL, and every
tenth a PREFIXED topic ACL (prefix lengths 3 to 12), a group ACL and a DENY, plus a
wildcard ``User:*`` Describe on ``*``. Measured, each the best of ``--rounds`` timeit runs:

- ``cached``: the same (principal, host, operation, resource) again, as a producer's
  Produce requests for one topic are (the authorizer keeps answers until an ACL changes);
- ``uncached``: the decision itself (index look-ups: literal, ``*``, every prefix length),
  the answer cache dropped before each call;
- ``denied`` uncached: a principal with no matching ACL, the longest path (every pattern
  gathered, no early answer);
- ``a Produce's check``: what the Produce handler runs for a one-topic request
  (``strom.broker.authorizer.refused``: the principal and host from the request context,
  the cached answer, the refused set).
No broker runs: the end-to-end cost on a Produce is a later row of benchmarks/broker.py.
"""

from __future__ import annotations

import argparse
import tempfile
import timeit

from strom.broker import request_context
from strom.broker.authorizer import refused
from strom.security.acl.authorizer import AclAuthorizer
from strom.security.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strom.security.acl.store import FileAclStore

TOPIC = ResourceType.TOPIC
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acls(count: int) -> list[AclBinding]:
    found: list[AclBinding] = [AclBinding(ResourcePattern(TOPIC, "*"), AccessControlEntry(
        "User:*", "*", AclOperation.DESCRIBE, ALLOW))]
    i = 0
    while len(found) < count:
        user = f"User:app-{i}"
        found.append(AclBinding(ResourcePattern(TOPIC, f"tenant-{i}.orders"),
                                AccessControlEntry(user, "*", AclOperation.WRITE, ALLOW)))
        if i % 10 == 0:
            prefix = f"tenant-{i}."[: 3 + i % 10 + (i // 10) % 10]
            found += [
                AclBinding(ResourcePattern(TOPIC, prefix, PatternType.PREFIXED),
                           AccessControlEntry(user, "*", AclOperation.READ, ALLOW)),
                AclBinding(ResourcePattern(ResourceType.GROUP, f"group-{i}"),
                           AccessControlEntry(user, "*", AclOperation.READ, ALLOW)),
                AclBinding(ResourcePattern(TOPIC, f"tenant-{i}.secrets"),
                           AccessControlEntry(user, "10.0.0.9", AclOperation.ALL, DENY)),
            ]
        i += 1
    return found[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        authorizer = AclAuthorizer(FileAclStore(data_dir))
        bindings = acls(args.acls)
        authorizer.create_acls(bindings)
        user, host, op, name = "User:app-500", "10.0.0.1", AclOperation.WRITE, "tenant-500.orders"
        assert authorizer.authorize(user, host, op, TOPIC, name)
        assert not authorizer.authorize("User:nobody", host, op, TOPIC, name)

        def uncached(principal: str) -> None:
            authorizer._answers[TOPIC][op].clear()
            authorizer.authorize(principal, host, op, TOPIC, name)

        runs = {
            "cached": lambda: authorizer.authorize(user, host, op, TOPIC, name),
            "uncached": lambda: uncached(user),
            "denied (uncached)": lambda: uncached("User:nobody"),
        }
        number = 100_000
        print(f"{len(bindings)} ACLs; authorize() per call, best of {args.rounds} x {number}:")
        for label, call in runs.items():
            best = min(timeit.repeat(call, number=number, repeat=args.rounds)) / number
            print(f"  {label:<20} {best * 1e6:6.2f} µs")
        request_context.principal.set(user)
        request_context.client_host.set(f"/{host}")
        names = (name,)
        check = min(timeit.repeat(lambda: refused(authorizer, op, TOPIC, names), number=number,
                                  repeat=args.rounds)) / number
        label = "a Produce's check"
        print(f"  {label:<20} {check * 1e6:6.2f} µs")
        clear_only = min(timeit.repeat(authorizer._answers[TOPIC][AclOperation.WRITE].clear, number=number, repeat=args.rounds)) / number
        print(f"  (dropping the cache alone: {clear_only * 1e6:.2f} µs, included in the uncached rows)")


if __name__ == "__main__":
    main()
