"""ACLs for the security tests: a broker running the ACL authorizer with SASL PLAIN principals,
a raw connection authenticated as one of them, and ACLs made and read through the ACL APIs.

The broker (``acl_broker``) has a PLAINTEXT listener (every client there is ``User:ANONYMOUS``)
and a SASL_PLAINTEXT one whose PLAIN users are ``USERS``; ``User:admin`` is a super user, so
the tests set up topics, groups and ACLs as admin, then ask as the principals under test.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from strom.protocol.messages.create_acls_response import CreateAclsResponse
from strom.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from strom.protocol.messages.create_topics_response import CreateTopicsResponse
from strom.protocol.messages.describe_acls_request import DescribeAclsRequest
from strom.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from strom.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from strom.security.acl.model import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.support.broker_harness import BrokerHarness
from tests.support.sasl import RawConnection, SaslBroker, plain_jaas, sasl_overrides

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret",
         "dave": "dave-secret"}
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def acl_overrides(extra: dict[str, str] | None = None) -> dict[str, str]:
    return sasl_overrides(mechanisms="PLAIN") | {
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
    } | (extra or {})


@contextmanager
def acl_broker(data_dir: Path, extra: dict[str, str] | None = None) -> Iterator[SaslBroker]:
    with SaslBroker(data_dir, acl_overrides(extra)) as broker:
        yield broker


@contextmanager
def connection_as(broker: SaslBroker, user: str | None) -> Iterator[RawConnection]:
    """A raw connection as ``User:<user>`` (SASL PLAIN), or ``User:ANONYMOUS`` (PLAINTEXT) for None."""
    if user is None:
        with RawConnection(broker.bootstrap) as connection:
            yield connection
        return
    with RawConnection(broker.sasl_bootstrap) as connection:
        handshake = connection.request(SaslHandshakeRequest("PLAIN"), 1)
        assert handshake.error_code == 0  # type: ignore[attr-defined]
        token = f"\0{user}\0{USERS[user]}".encode()
        authenticated = connection.request(SaslAuthenticateRequest(token), 2)
        assert authenticated.error_code == 0, authenticated  # type: ignore[attr-defined]
        yield connection


def request_as(broker: SaslBroker, user: str | None, body: Message, version: int) -> Message:
    with connection_as(broker, user) as connection:
        return connection.request(body, version)


Acl = tuple[ResourceType, str, PatternType, str, AclOperation, AclPermissionType]


def allow(principal: str, operation: AclOperation, kind: ResourceType, name: str,
          pattern: PatternType = PatternType.LITERAL) -> Acl:
    return kind, name, pattern, principal, operation, AclPermissionType.ALLOW


def deny(principal: str, operation: AclOperation, kind: ResourceType, name: str,
         pattern: PatternType = PatternType.LITERAL) -> Acl:
    return kind, name, pattern, principal, operation, AclPermissionType.DENY


def create_acls(broker: SaslBroker, acls: Sequence[Acl], user: str = "admin") -> list[int]:
    """CreateAcls (v3) as ``user``; each creation's error code."""
    creations = tuple(AclCreation(kind, name, pattern, principal, "*", operation, permission)
                      for kind, name, pattern, principal, operation, permission in acls)
    response = request_as(broker, user, CreateAclsRequest(creations), 3)
    assert isinstance(response, CreateAclsResponse)
    return [result.error_code for result in response.results]


def create_topics(broker: SaslBroker, names: Sequence[str], partitions: int = 1) -> None:
    response = request_as(broker, "admin", CreateTopicsRequest(tuple(
        CreatableTopic(name, partitions, 1) for name in names), timeout_ms=10000), 7)
    assert isinstance(response, CreateTopicsResponse)
    assert {t.name: t.error_code for t in response.topics} == dict.fromkeys(names, ErrorCode.NONE)


# -- in-process (tests/support/broker_harness.py): the harness's principal is User:ANONYMOUS ------
HARNESS_ACLS_ON = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                   "super.users": "User:ANONYMOUS"}


def creation(kind: int = ResourceType.TOPIC, name: str = "t", pattern: int = PatternType.LITERAL,
             principal: str = "User:a", operation: int = AclOperation.READ,
             permission: int = AclPermissionType.ALLOW) -> AclCreation:
    return AclCreation(kind, name, pattern, principal, "*", operation, permission)


SAMPLE_ACLS = (creation(ResourceType.TOPIC, "orders"),
               creation(ResourceType.TOPIC, "ord", PatternType.PREFIXED, "User:b", AclOperation.WRITE),
               creation(ResourceType.TOPIC, "*", PatternType.LITERAL, "User:c", AclOperation.DESCRIBE,
                        AclPermissionType.DENY),
               creation(ResourceType.GROUP, "orders", PatternType.LITERAL, "User:a"))


async def every_acl(h: BrokerHarness) -> list[tuple[int, str, int, str, int, int]]:
    """Every ACL the broker has (DescribeAcls v3, an all-ANY filter), sorted."""
    response = await h.request(DescribeAclsRequest(1, None, 1, None, None, 1, 1), version=3)
    return sorted((r.resource_type, r.resource_name, r.pattern_type, a.principal, a.operation, a.permission_type)
                  for r in response.resources for a in r.acls)
