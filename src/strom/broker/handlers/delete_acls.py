"""DeleteAcls (31): remove every ACL each filter matches; per filter, the ACLs it matched
(Kafka's ``AclApis``: an ACL two filters match is listed under both).

Needs Alter on the cluster (every filter result CLUSTER_AUTHORIZATION_FAILED); with no
authorizer every filter result is SECURITY_DISABLED. Filters are DescribeAcls's (null,
ANY, MATCH); v0 has no pattern type, so its filters are LITERAL. A filter with an UNKNOWN
element (Kafka closes the connection while parsing) gets INVALID_REQUEST and removes nothing.
Every codec version is served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, allowed_on_cluster
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.delete_acls_request import DeleteAclsRequest
from strom.protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from strom.security.acl.model import AclBinding, filter_from_codes

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DeleteAclsRequest
VERSIONS = range(0, 4)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DeleteAclsRequest)
    authorizer = broker.authorizer
    if authorizer is None:
        return _all(body, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not allowed_on_cluster(authorizer, AclOperation.ALTER):
        return _all(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    filters = [filter_from_codes(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                 f.principal_filter, f.host_filter, f.operation, f.permission_type)
               for f in body.filters]
    known = [acl_filter for acl_filter in filters if not acl_filter.has_unknown()]
    deleted = iter(await authorizer.delete_acls_async(known))
    return DeleteAclsResponse(filter_results=tuple(
        DeleteAclsFilterResult(ErrorCode.INVALID_REQUEST, "Filters contain UNKNOWN elements") if acl_filter.has_unknown()
        else DeleteAclsFilterResult(ErrorCode.NONE, None, tuple(_matching(binding) for binding in next(deleted)))
        for acl_filter in filters))


def _matching(binding: AclBinding) -> DeleteAclsMatchingAcl:
    pattern, entry = binding.pattern, binding.entry
    return DeleteAclsMatchingAcl(ErrorCode.NONE, None, pattern.resource_type, pattern.name, pattern.pattern_type,
                                 entry.principal, entry.host, entry.operation, entry.permission_type)


def _all(body: DeleteAclsRequest, error: ErrorCode, message: str) -> DeleteAclsResponse:
    return DeleteAclsResponse(filter_results=tuple(DeleteAclsFilterResult(error, message) for _ in body.filters))
