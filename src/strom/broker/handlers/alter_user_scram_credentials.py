"""AlterUserScramCredentials (51, KIP-554): add, replace and delete users' SCRAM credentials.

The client sends the salt and ``SaltedPassword = Hi(password, salt, i)``; the broker derives
and keeps the stored key and server key (strom.security.sasl.credential_store), never the
password, and the next authentication uses them. Kafka's checks (``ZkAdminManager``), each
failing the user's whole alteration with one result per user: an unknown mechanism
``UNSUPPORTED_SASL_MECHANISM`` (33); an empty user name, an empty salt or salted password, or
iterations outside 4096..16384 ``UNACCEPTABLE_CREDENTIAL`` (93); one user and mechanism
altered twice in a request ``DUPLICATE_RESOURCE`` (92); deleting a credential that does not
exist ``RESOURCE_NOT_FOUND`` (91). A user without errors has all its alterations applied.
Before any of that, as Kafka's KafkaApis: a cluster's broker that is not the active controller
answers ``NOT_CONTROLLER`` (the admin client retries at the controller), and with an authorizer
the principal needs Alter on the cluster (else ``CLUSTER_AUTHORIZATION_FAILED``), for every user.
The store is written off the event loop (a file fsync'd, or ZooKeeper in a cluster).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, allowed_on_cluster
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from strom.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from strom.security.sasl.scram import BY_TYPE, MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = AlterUserScramCredentialsRequest
VERSIONS = range(0, 1)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, AlterUserScramCredentialsRequest)
    alterations = [(d.name, d.mechanism) for d in body.deletions] + [(u.name, u.mechanism) for u in body.upsertions]
    refusal = _refusal(broker)
    if refusal is not None:
        return AlterUserScramCredentialsResponse(results=tuple(
            AlterUserScramCredentialsResult(user, refusal, refusal.message)
            for user in dict.fromkeys(name for name, _ in alterations)))
    store = broker.sasl.credentials
    twice = {key for key, count in Counter(alterations).items() if count > 1}
    errors: dict[str, tuple[ErrorCode, str]] = {}

    def refuse(user: str, code: ErrorCode, message: str) -> None:
        errors.setdefault(user, (code, message))

    for user, mechanism in alterations:
        if mechanism not in BY_TYPE:
            refuse(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif not user:
            refuse(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif (user, mechanism) in twice:
            refuse(user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    for upsertion in body.upsertions:
        if upsertion.iterations < MIN_ITERATIONS:
            refuse(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif upsertion.iterations > MAX_ITERATIONS:
            refuse(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif not upsertion.salt or not upsertion.salted_password:
            refuse(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    for deletion in body.deletions:
        if deletion.mechanism in BY_TYPE and store.get(deletion.name, BY_TYPE[deletion.mechanism].mechanism_name) is None:
            refuse(deletion.name, ErrorCode.RESOURCE_NOT_FOUND,
                   "Attempt to delete a user credential that does not exist")
    changes: dict[str, dict[str, ScramCredential | None]] = {}
    for deletion in body.deletions:
        if deletion.name not in errors:
            changes.setdefault(deletion.name, {})[BY_TYPE[deletion.mechanism].mechanism_name] = None
    for upsertion in body.upsertions:
        if upsertion.name not in errors:
            scram = BY_TYPE[upsertion.mechanism]
            changes.setdefault(upsertion.name, {})[scram.mechanism_name] = scram.credential_from_salted_password(
                upsertion.salted_password, upsertion.salt, upsertion.iterations)
    results: list[AlterUserScramCredentialsResult] = []
    for user in dict.fromkeys(name for name, _ in alterations):
        if user in errors:
            code, message = errors[user]
            results.append(AlterUserScramCredentialsResult(user, code, message))
            continue
        try:
            await asyncio.to_thread(store.set_user, user, changes[user])
        except OSError as exc:
            results.append(AlterUserScramCredentialsResult(user, ErrorCode.UNKNOWN_SERVER_ERROR,
                                                           f"the credentials could not be stored: {exc}"))
            continue
        results.append(AlterUserScramCredentialsResult(user, ErrorCode.NONE, None))
    return AlterUserScramCredentialsResponse(results=tuple(results))


def _refusal(broker: Broker) -> ErrorCode | None:
    if not broker.is_controller():
        return ErrorCode.NOT_CONTROLLER
    authorizer = broker.authorizer
    if authorizer is not None and not allowed_on_cluster(authorizer, AclOperation.ALTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None
