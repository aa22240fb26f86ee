"""DescribeUserScramCredentials (50, KIP-554): each user's SCRAM mechanisms and iteration
counts, never the keys, from the broker's credential store (strom.security.sasl.credential_store).

As Kafka's ``describeUserScramCredentials``: no names (null or empty) describes every user
with a credential; a name given twice is ``DUPLICATE_RESOURCE`` (92), a user without any
credential ``RESOURCE_NOT_FOUND`` (91), each with Kafka's message. With an authorizer the
principal needs Describe on the cluster, else the response's error and each requested name's
result are ``CLUSTER_AUTHORIZATION_FAILED`` (Kafka's ``getErrorResponse``).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, allowed_on_cluster
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from strom.protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from strom.security.sasl.scram import MECHANISMS

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DescribeUserScramCredentialsRequest
VERSIONS = range(0, 1)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DescribeUserScramCredentialsRequest)
    authorizer = broker.authorizer
    if authorizer is not None and not allowed_on_cluster(authorizer, AclOperation.DESCRIBE):
        error, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED.message
        return DescribeUserScramCredentialsResponse(error_code=error, error_message=message, results=tuple(
            DescribeUserScramCredentialsResult("", error, message) for _ in body.users or ()))
    store = broker.sasl.credentials
    names = [user.name for user in body.users or ()]
    if not names:
        names = store.users()
    counts = Counter(names)
    results: list[DescribeUserScramCredentialsResult] = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(DescribeUserScramCredentialsResult(
                name, ErrorCode.DUPLICATE_RESOURCE,
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"))
            continue
        credentials = store.credentials(name)
        if not credentials:
            results.append(DescribeUserScramCredentialsResult(
                name, ErrorCode.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {name}"))
            continue
        infos = tuple(CredentialInfo(MECHANISMS[mechanism].kip554_type, credential.iterations)
                      for mechanism, credential in credentials.items())
        results.append(DescribeUserScramCredentialsResult(name, ErrorCode.NONE, None, infos))
    return DescribeUserScramCredentialsResponse(error_code=ErrorCode.NONE, error_message=None, results=tuple(results))
