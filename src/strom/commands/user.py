"""``strom user list|describe|set-password|delete``: SCRAM credentials (KIP-554).

As ``kafka-configs.sh --entity-type users --add-config 'SCRAM-SHA-256=[password=…]'``,
the password never crosses the wire: the command draws a random salt and sends the
salted password, PBKDF2-HMAC of the password over ``--iterations`` rounds (RFC 5802's
``Hi``), which is what the broker stores and what a SCRAM login proves knowledge of.
"""

from __future__ import annotations

import argparse
import hashlib
import secrets
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

MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}  # Kafka's ScramMechanism ids
_NAMES = {number: name for name, (number, _) in MECHANISMS.items()}
MIN_ITERATIONS = 4096  # Kafka's minimum (ScramMechanism.minIterations)


def add_parser(commands: Any) -> None:
    user = commands.add_parser("user", help="SCRAM users: list, describe, set a password, delete")
    verbs = user.add_subparsers(dest="verb", required=True)
    listing = verbs.add_parser("list", help="users that have SCRAM credentials")
    describe = verbs.add_parser("describe", help="a user's SCRAM mechanisms and iterations")
    describe.add_argument("users", nargs="+", metavar="USER")
    password = verbs.add_parser("set-password", help="create or replace a user's SCRAM credential")
    password.add_argument("user", metavar="USER")
    password.add_argument("--password", required=True)
    password.add_argument("--iterations", type=int, default=MIN_ITERATIONS)
    delete = verbs.add_parser("delete", help="remove a user's SCRAM credential")
    delete.add_argument("user", metavar="USER")
    for verb in (password, delete):
        verb.add_argument("--mechanism", default="SCRAM-SHA-256", choices=sorted(MECHANISMS), type=str.upper)
    for verb in (listing, describe, password, delete):
        add_client_options(verb)
    listing.set_defaults(run=lambda args: run("user list", lambda: _describe(args, None)))
    describe.set_defaults(run=lambda args: run("user describe", lambda: _describe(args, args.users)))
    password.set_defaults(run=lambda args: run("user set-password", lambda: _set_password(args)))
    delete.set_defaults(run=lambda args: run("user delete", lambda: _delete(args)))


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][1], password.encode(), salt, iterations)


async def _describe(args: argparse.Namespace, users: list[str] | None) -> int:
    from strom.protocol.messages.describe_user_scram_credentials_request import (
        DescribeUserScramCredentialsRequest,
        UserName,
    )

    wanted = None if users is None else tuple(UserName(name) for name in users)
    response = await request_any(args, DescribeUserScramCredentialsRequest(wanted))
    check(response.error_code, response.error_message)
    rows = []
    for result in response.results:
        check(result.error_code, result.error_message)
        rows += [(result.user, _NAMES.get(info.mechanism, str(info.mechanism)), info.iterations)
                 for info in result.credential_infos]
    rows.sort()
    if args.format == "json":
        for name, mechanism, iterations in rows:
            print_json({"user": name, "mechanism": mechanism, "iterations": iterations})
    else:
        print_table(("USER", "MECHANISM", "ITERATIONS"), rows)
    return 0


async def _alter(args: argparse.Namespace, request: Any) -> None:
    response = await request_any(args, request)
    for result in response.results:
        check(result.error_code, result.error_message)


async def _set_password(args: argparse.Namespace) -> int:
    from strom.protocol.messages.alter_user_scram_credentials_request import (
        AlterUserScramCredentialsRequest,
        ScramCredentialUpsertion,
    )

    if args.iterations < MIN_ITERATIONS:
        raise CommandError(f"--iterations must be at least {MIN_ITERATIONS}", 2)
    salt = secrets.token_bytes(32)
    upsertion = ScramCredentialUpsertion(args.user, MECHANISMS[args.mechanism][0], args.iterations, salt,
                                         salted_password(args.mechanism, args.password, salt, args.iterations))
    await _alter(args, AlterUserScramCredentialsRequest((), (upsertion,)))
    _done(args, "set")
    return 0


async def _delete(args: argparse.Namespace) -> int:
    from strom.protocol.messages.alter_user_scram_credentials_request import (
        AlterUserScramCredentialsRequest,
        ScramCredentialDeletion,
    )

    deletion = ScramCredentialDeletion(args.user, MECHANISMS[args.mechanism][0])
    await _alter(args, AlterUserScramCredentialsRequest((deletion,), ()))
    _done(args, "deleted")
    return 0


def _done(args: argparse.Namespace, what: str) -> None:
    if args.format == "json":
        print_json({"user": args.user, "mechanism": args.mechanism, what: True})
    else:
        print(f"{args.mechanism} credential for user '{args.user}' {what}.")
