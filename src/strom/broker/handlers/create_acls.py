"""CreateAcls (30): add ACLs, each creation answered on its own (Kafka's ``AclApis``).

Needs Alter on the cluster (every result CLUSTER_AUTHORIZATION_FAILED); with no
authorizer every result is SECURITY_DISABLED. A creation Kafka would not store gets
INVALID_REQUEST with Kafka's message (``strom.security.acl.model.binding_error``): a
pattern type other than LITERAL/PREFIXED (ANY and MATCH are for filters), an ANY resource
type, operation or permission, a cluster not named ``kafka-cluster``, an empty name, a
principal without its type. (Kafka closes the connection on an UNKNOWN element, found while
parsing; Strom answers INVALID_REQUEST.) v0 carries no pattern type: LITERAL.
Every codec version is served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, allowed_on_cluster
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.create_acls_request import CreateAclsRequest
from strom.protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from strom.security.acl.model import binding_from_codes

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = CreateAclsRequest
VERSIONS = range(0, 4)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, CreateAclsRequest)
    authorizer = broker.authorizer
    if authorizer is None:
        return _all(body, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not allowed_on_cluster(authorizer, AclOperation.ALTER):
        return _all(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    bindings = [binding_from_codes(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                                   c.operation, c.permission_type) for c in body.creations]
    errors = await authorizer.create_acls_async(bindings)
    return CreateAclsResponse(results=tuple(
        AclCreationResult(ErrorCode.NONE, None) if error is None else AclCreationResult(ErrorCode.INVALID_REQUEST, error)
        for error in errors))


def _all(body: CreateAclsRequest, error: ErrorCode, message: str) -> CreateAclsResponse:
    return CreateAclsResponse(results=tuple(AclCreationResult(error, message) for _ in body.creations))
