"""DeleteAcls (31): every ACL each filter matches is removed and listed under the filter;
Alter on the cluster; SECURITY_DISABLED without an authorizer; v0 filters LITERAL patterns."""

from __future__ import annotations

import pytest

from strom.broker import request_context
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.create_acls_request import CreateAclsRequest
from strom.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from strom.security.acl.model import AclOperation as Op
from strom.security.acl.model import AclPermissionType as Permission
from strom.security.acl.model import PatternType as P
from strom.security.acl.model import ResourceType as R
from tests.support.acl import HARNESS_ACLS_ON as ACLS_ON
from tests.support.acl import SAMPLE_ACLS as ACLS
from tests.support.acl import every_acl as everything
from tests.support.broker_harness import BrokerHarness, BrokerRunner


def matched(response: object) -> list[list[tuple[int, str, int, str]]]:
    return [sorted((m.resource_type, m.resource_name, m.pattern_type, m.principal) for m in r.matching_acls)
            for r in response.filter_results]  # type: ignore[attr-defined]


def test_each_filter_lists_what_it_removed(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.request(CreateAclsRequest(ACLS), version=3)
        response = await h.request(DeleteAclsRequest((
            DeleteAclsFilter(R.TOPIC, "orders", P.MATCH, None, None, Op.ANY, Permission.ALLOW),
            DeleteAclsFilter(R.ANY, None, P.ANY, "User:a", None, Op.ANY, Permission.ANY),
            DeleteAclsFilter(R.TOPIC, None, P.ANY, None, None, Op.UNKNOWN, Permission.ANY),
        )), version=3)
        assert [(r.error_code, r.error_message) for r in response.filter_results] == [
            (0, None), (0, None), (ErrorCode.INVALID_REQUEST, "Filters contain UNKNOWN elements")]
        assert matched(response) == [
            [(R.TOPIC, "ord", P.PREFIXED, "User:b"), (R.TOPIC, "orders", P.LITERAL, "User:a")],
            [(R.TOPIC, "orders", P.LITERAL, "User:a"), (R.GROUP, "orders", P.LITERAL, "User:a")],
            []]
        assert await everything(h) == [(R.TOPIC, "*", P.LITERAL, "User:c", Op.DESCRIBE, Permission.DENY)]

    broker.run(scenario, ACLS_ON)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_older_versions(broker: BrokerRunner, version: int) -> None:
    """v0 has no pattern type: its filters are LITERAL, so a prefixed ACL stays."""
    async def scenario(h: BrokerHarness) -> None:
        await h.request(CreateAclsRequest(ACLS), version=3)
        pattern = P.LITERAL if version == 0 else P.ANY  # v0 cannot send one: it is decoded as LITERAL
        response = await h.request(DeleteAclsRequest((
            DeleteAclsFilter(R.TOPIC, None, pattern, None, None, Op.ANY, Permission.ANY),)), version=version)
        literal = [(R.TOPIC, "*", P.LITERAL, "User:c"), (R.TOPIC, "orders", P.LITERAL, "User:a")]
        prefixed = [(R.TOPIC, "ord", P.PREFIXED, "User:b")]
        assert matched(response) == [literal if version == 0 else sorted(literal + prefixed)]

    broker.run(scenario, ACLS_ON)


def test_alter_on_the_cluster_is_needed(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.request(CreateAclsRequest(ACLS), version=3)
        request_context.principal.set("User:a")
        response = await h.request(DeleteAclsRequest((
            DeleteAclsFilter(R.ANY, None, P.ANY, None, None, Op.ANY, Permission.ANY),)), version=3)
        assert [(r.error_code, r.matching_acls) for r in response.filter_results] == [
            (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ())]
        request_context.principal.set("User:ANONYMOUS")
        assert len(await everything(h)) == len(ACLS)

    broker.run(scenario, ACLS_ON)


def test_security_disabled_without_an_authorizer(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(DeleteAclsRequest((
            DeleteAclsFilter(R.ANY, None, P.ANY, None, None, Op.ANY, Permission.ANY),)), version=3)
        assert [r.error_code for r in response.filter_results] == [ErrorCode.SECURITY_DISABLED]

    broker.run(scenario)
