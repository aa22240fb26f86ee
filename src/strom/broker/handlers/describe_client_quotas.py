"""DescribeClientQuotas (48): the configured client quotas whose entity matches a filter.

Each filter component names an entity type (``user``, ``client-id``, ``ip``) and a match:
exact (a name), default (the ``<default>`` entity) or any (the type is present,
whatever its name); ``strict`` leaves out entities with other types too. A bad filter
answers the whole request with Kafka's error and message (``INVALID_REQUEST``, or
``UNSUPPORTED_VERSION`` for an unknown entity or match type) and null entries, as
Kafka's ``ClientQuotasImage.describe``. Entities come back with every quota they have,
a default's name null. With ACLs, DescribeConfigs on the cluster is needed
(CLUSTER_AUTHORIZATION_FAILED, null entries). v0-1 (v1 flexible), as Kafka 3.9.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, allowed_on_cluster
from strom.broker.quota import QuotaError, QuotaFilter
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from strom.protocol.messages.describe_client_quotas_response import (
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DescribeClientQuotasRequest
VERSIONS = range(0, 2)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DescribeClientQuotasRequest)
    if (authorizer := broker.authorizer) is not None and not allowed_on_cluster(authorizer,
                                                                                AclOperation.DESCRIBE_CONFIGS):
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return DescribeClientQuotasResponse(error_code=refused, error_message=refused.message, entries=None)
    try:
        quota_filter = QuotaFilter.parse(((c.entity_type, c.match_type, c.match) for c in body.components),
                                         body.strict)
    except QuotaError as exc:
        return DescribeClientQuotasResponse(error_code=exc.error_code, error_message=str(exc), entries=None)
    entries = tuple(
        EntryData(entity=tuple(EntityData(kind, name) for kind, name in entity.parts().items()),
                  values=tuple(ValueData(key, value) for key, value in sorted(values.items())))
        for entity, values in broker.quotas.describe(quota_filter)
    )
    return DescribeClientQuotasResponse(error_code=0, error_message=None, entries=entries)
