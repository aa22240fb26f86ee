"""CreateAcls (30): each creation answered on its own, Kafka's validation (INVALID_REQUEST),
Alter on the cluster, SECURITY_DISABLED without an authorizer; v0 is LITERAL."""

from __future__ import annotations

import pytest

from strom.broker import request_context
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.create_acls_request import CreateAclsRequest
from strom.security.acl.model import AclOperation as Op
from strom.security.acl.model import AclPermissionType as Permission
from strom.security.acl.model import PatternType
from strom.security.acl.model import ResourceType as R
from tests.support.acl import HARNESS_ACLS_ON as ACLS_ON
from tests.support.acl import creation
from tests.support.acl import every_acl as everything
from tests.support.broker_harness import BrokerHarness, BrokerRunner


def test_each_creation_is_validated_as_kafka(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(CreateAclsRequest((
            creation(),
            creation(pattern=PatternType.MATCH),
            creation(pattern=PatternType.ANY),
            creation(kind=R.ANY),
            creation(operation=Op.ANY),
            creation(permission=Permission.ANY),
            creation(kind=R.CLUSTER, name="other"),
            creation(name=""),
            creation(principal="nobody"),
            creation(operation=99),  # an unknown code reads as UNKNOWN
            creation(kind=R.GROUP, name="g", pattern=PatternType.PREFIXED, operation=Op.DELETE),
        )), version=3)
        assert [(r.error_code, r.error_message) for r in response.results[:9]] == [
            (0, None),
            (ErrorCode.INVALID_REQUEST, "Invalid patternType MATCH"),
            (ErrorCode.INVALID_REQUEST, "Invalid patternType ANY"),
            (ErrorCode.INVALID_REQUEST, "Invalid resourceType ANY"),
            (ErrorCode.INVALID_REQUEST, "Invalid operation ANY"),
            (ErrorCode.INVALID_REQUEST, "Invalid permissionType ANY"),
            (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
            (ErrorCode.INVALID_REQUEST, "Invalid empty resource name"),
            (ErrorCode.INVALID_REQUEST, response.results[8].error_message),
        ]
        assert [r.error_code for r in response.results[9:]] == [ErrorCode.INVALID_REQUEST, 0]
        assert await everything(h) == [(R.TOPIC, "t", PatternType.LITERAL, "User:a", Op.READ, Permission.ALLOW),
                                       (R.GROUP, "g", PatternType.PREFIXED, "User:a", Op.DELETE, Permission.ALLOW)]

    broker.run(scenario, ACLS_ON)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_every_version(broker: BrokerRunner, version: int) -> None:
    """v0 carries no pattern type: the ACL is LITERAL."""
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(CreateAclsRequest((creation(principal="User:*"),)), version=version)
        assert [r.error_code for r in response.results] == [0]
        assert await everything(h) == [(R.TOPIC, "t", PatternType.LITERAL, "User:*", Op.READ, Permission.ALLOW)]

    broker.run(scenario, ACLS_ON)


def test_alter_on_the_cluster_is_needed(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        request_context.principal.set("User:alice")
        refused = await h.request(CreateAclsRequest((creation(), creation(name="u"))), version=3)
        assert [r.error_code for r in refused.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
        request_context.principal.set("User:ANONYMOUS")
        granted = CreateAclsRequest((creation(R.CLUSTER, "kafka-cluster", principal="User:alice", operation=Op.ALTER),))
        assert [r.error_code for r in (await h.request(granted, version=3)).results] == [0]
        request_context.principal.set("User:alice")
        assert [r.error_code for r in (await h.request(CreateAclsRequest((creation(),)), version=3)).results] == [0]

    broker.run(scenario, ACLS_ON)


def test_security_disabled_without_an_authorizer(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(CreateAclsRequest((creation(), creation(name="u"))), version=3)
        assert [(r.error_code, r.error_message) for r in response.results] == [
            (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")] * 2

    broker.run(scenario)
