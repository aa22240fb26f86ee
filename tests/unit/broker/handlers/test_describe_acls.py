"""DescribeAcls (29): the ACLs a filter matches, by resource pattern; Describe on the cluster;
SECURITY_DISABLED without an authorizer; v0 filters LITERAL patterns."""

from __future__ import annotations

import pytest

from strom.broker import request_context
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.create_acls_request import CreateAclsRequest
from strom.protocol.messages.describe_acls_request import DescribeAclsRequest
from strom.security.acl.model import AclOperation as Op
from strom.security.acl.model import AclPermissionType as Permission
from strom.security.acl.model import PatternType as P
from strom.security.acl.model import ResourceType as R
from tests.support.acl import HARNESS_ACLS_ON as ACLS_ON
from tests.support.acl import SAMPLE_ACLS as ACLS
from tests.support.broker_harness import BrokerHarness, BrokerRunner


async def described(h: BrokerHarness, request: DescribeAclsRequest, version: int = 3) -> list[tuple[str, int, str]]:
    response = await h.request(request, version=version)
    assert (response.error_code, response.error_message) == (0, None)
    return sorted((r.resource_name, r.pattern_type, a.principal) for r in response.resources for a in r.acls)


@pytest.mark.parametrize(("request_filter", "expected"), [
    (DescribeAclsRequest(R.ANY, None, P.ANY, None, None, Op.ANY, Permission.ANY),
     [("*", P.LITERAL, "User:c"), ("ord", P.PREFIXED, "User:b"), ("orders", P.LITERAL, "User:a"),
      ("orders", P.LITERAL, "User:a")]),
    (DescribeAclsRequest(R.TOPIC, "orders", P.MATCH, None, None, Op.ANY, Permission.ANY),
     [("*", P.LITERAL, "User:c"), ("ord", P.PREFIXED, "User:b"), ("orders", P.LITERAL, "User:a")]),
    (DescribeAclsRequest(R.TOPIC, "orders", P.LITERAL, None, None, Op.ANY, Permission.ANY),
     [("orders", P.LITERAL, "User:a")]),
    (DescribeAclsRequest(R.TOPIC, None, P.PREFIXED, None, None, Op.ANY, Permission.ANY),
     [("ord", P.PREFIXED, "User:b")]),
    (DescribeAclsRequest(R.ANY, None, P.ANY, "User:a", None, Op.READ, Permission.ALLOW),
     [("orders", P.LITERAL, "User:a"), ("orders", P.LITERAL, "User:a")]),
    (DescribeAclsRequest(R.ANY, None, P.ANY, None, "*", Op.ANY, Permission.DENY), [("*", P.LITERAL, "User:c")]),
    (DescribeAclsRequest(R.ANY, None, P.ANY, None, "10.0.0.1", Op.ANY, Permission.ANY), []),
])
def test_filters(broker: BrokerRunner, request_filter: DescribeAclsRequest, expected: list[tuple[str, int, str]]
                 ) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.request(CreateAclsRequest(ACLS), version=3)
        assert await described(h, request_filter) == expected

    broker.run(scenario, ACLS_ON)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_older_versions(broker: BrokerRunner, version: int) -> None:
    """v0 has no pattern type: its filter is LITERAL, so prefixed ACLs are not seen."""
    async def scenario(h: BrokerHarness) -> None:
        await h.request(CreateAclsRequest(ACLS), version=3)
        pattern = P.LITERAL if version == 0 else P.ANY  # v0 cannot send one: it is decoded as LITERAL
        request = DescribeAclsRequest(R.TOPIC, None, pattern, None, None, Op.ANY, Permission.ANY)
        found = await described(h, request, version)
        expected = [("*", P.LITERAL, "User:c"), ("orders", P.LITERAL, "User:a")]
        assert found == (expected if version == 0 else sorted([*expected, ("ord", P.PREFIXED, "User:b")]))

    broker.run(scenario, ACLS_ON)


def test_refusals(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        unknown = await h.request(DescribeAclsRequest(R.UNKNOWN, None, P.ANY, None, None, Op.ANY, Permission.ANY),
                                  version=3)
        assert unknown.error_code == ErrorCode.INVALID_REQUEST
        request_context.principal.set("User:nobody")
        refused = await h.request(DescribeAclsRequest(R.ANY, None, P.ANY, None, None, Op.ANY, Permission.ANY),
                                  version=3)
        assert (refused.error_code, refused.resources) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ())

    broker.run(scenario, ACLS_ON)


def test_security_disabled_without_an_authorizer(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(DescribeAclsRequest(R.ANY, None, P.ANY, None, None, Op.ANY, Permission.ANY),
                                   version=3)
        assert (response.error_code, response.error_message) == (ErrorCode.SECURITY_DISABLED,
                                                                  "No Authorizer is configured on the broker")

    broker.run(scenario)
