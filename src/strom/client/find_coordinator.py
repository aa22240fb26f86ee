"""FindCoordinator: which broker coordinates a group (or, later, a transactional id).

The consumer's ``CoordinatorLink`` and the admin client both ask this, and both go
through ``find_coordinator``: one place that builds the request for the version the
broker speaks (v4+ batches keys, KIP-699; Strom sends one key at a time, as the Java
consumer does) and reads whichever answer shape comes back. A failure is a
``KafkaError`` with the broker's code; retrying is the caller's policy (the link
retries until ``request.timeout.ms``, the admin client finds the coordinator again
on a coordinator error).
"""

from __future__ import annotations

from typing import Final

from strom.client.cluster import BrokerInfo
from strom.client.connection import BrokerConnection
from strom.client.errors import KafkaError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.find_coordinator_response import FindCoordinatorResponse

GROUP_KEY_TYPE: Final = 0
TRANSACTION_KEY_TYPE: Final = 1
_KEY_KINDS: Final = {GROUP_KEY_TYPE: "group", TRANSACTION_KEY_TYPE: "transactional id"}


def find_coordinator_request(version: int, key: str, key_type: int = GROUP_KEY_TYPE) -> FindCoordinatorRequest:
    """The request for ``key`` in the shape of ``version``."""
    if version >= 4:  # KIP-699: keys batched
        return FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,))
    return FindCoordinatorRequest(key_type=key_type, key=key)


def coordinator_from(response: FindCoordinatorResponse, version: int, key: str,
                     key_type: int = GROUP_KEY_TYPE) -> BrokerInfo:
    """The coordinator in an answer of ``version``, or the ``KafkaError`` it reports."""
    if version >= 4:
        if not response.coordinators:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "FindCoordinator answered no key")
        found = response.coordinators[0]
        code, message, node_id, host, port = (found.error_code, found.error_message, found.node_id,
                                              found.host, found.port)
    else:
        code, message, node_id, host, port = (response.error_code, response.error_message, response.node_id,
                                              response.host, response.port)
    if code:
        what = f"coordinator of {_KEY_KINDS.get(key_type, 'key')} {key!r}"
        raise KafkaError(code, f"{what}: {message}" if message else what)
    return BrokerInfo(node_id, host, port)


async def find_coordinator(connection: BrokerConnection, key: str, key_type: int = GROUP_KEY_TYPE,
                           timeout_ms: int | None = None) -> BrokerInfo:
    """Ask the broker at the end of ``connection`` which broker coordinates ``key``."""
    version = connection.version_for(FindCoordinatorRequest.API_KEY, FindCoordinatorRequest.VALID_VERSIONS)
    response = await connection.send(find_coordinator_request(version, key, key_type), version=version,
                                     timeout_ms=timeout_ms)
    assert isinstance(response, FindCoordinatorResponse)
    return coordinator_from(response, version, key, key_type)
