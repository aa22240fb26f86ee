"""DescribeAcls (29): the ACLs a filter matches, grouped by resource pattern (Kafka's ``AclApis``).

Needs Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED); with no authorizer configured
the answer is SECURITY_DISABLED. The filter's fields may be null (anything), ANY, and for
the pattern type MATCH (every pattern that applies to the named resource); v0 has no
pattern type, so its filter is LITERAL. Kafka refuses a filter with an UNKNOWN element
while parsing the request (the connection closes); Strom answers INVALID_REQUEST.
Every codec version is served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, allowed_on_cluster
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.describe_acls_request import DescribeAclsRequest
from strom.protocol.messages.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from strom.security.acl.model import AclBinding, ResourcePattern, filter_from_codes

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DescribeAclsRequest
VERSIONS = range(0, 4)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DescribeAclsRequest)
    authorizer = broker.authorizer
    if authorizer is None:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message="No Authorizer is configured on the broker")
    if not allowed_on_cluster(authorizer, AclOperation.DESCRIBE):
        return DescribeAclsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message="Cluster authorization failed.")
    acl_filter = filter_from_codes(body.resource_type_filter, body.resource_name_filter, body.pattern_type_filter,
                                   body.principal_filter, body.host_filter, body.operation, body.permission_type)
    if acl_filter.has_unknown():
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST,
                                    error_message="DescribeAclsRequest contains UNKNOWN elements")
    return DescribeAclsResponse(error_code=ErrorCode.NONE, error_message=None,
                                resources=resources(authorizer.acls(acl_filter)))


def resources(bindings: list[AclBinding]) -> tuple[DescribeAclsResource, ...]:
    """The bindings grouped by pattern, as Kafka's ``DescribeAclsResponse.aclsResources``."""
    by_pattern: dict[ResourcePattern, list[AclDescription]] = {}
    for binding in bindings:
        entry = binding.entry
        by_pattern.setdefault(binding.pattern, []).append(
            AclDescription(entry.principal, entry.host, entry.operation, entry.permission_type))
    return tuple(DescribeAclsResource(pattern.resource_type, pattern.name, pattern.pattern_type, tuple(acls))
                 for pattern, acls in by_pattern.items())
