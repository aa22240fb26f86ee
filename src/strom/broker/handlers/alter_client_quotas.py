"""AlterClientQuotas (49): set or remove client quotas, applied at once and kept across restarts.

Each entry is judged alone, as Kafka's controller does: an entity that is empty, repeats
a type, has an unknown type or an empty name, or an op with an unknown key, a value that
is not positive or not whole for a byte rate, gets ``INVALID_REQUEST`` with Kafka's
message, and the valid entries still apply. ``validate_only`` checks and changes nothing.
The applied quotas are written before the answer, to the data directory on a single node
(``strom.broker.quota.store``) or, in a cluster, to ZooKeeper as Kafka's ZooKeeper-mode
brokers do (any broker may write them; every broker follows the change notifications),
and the quota managers use them from the next request; if they cannot be stored, nothing
is applied and the valid entries answer UNKNOWN_SERVER_ERROR. With ACLs, AlterConfigs
on the cluster is needed (every entry CLUSTER_AUTHORIZATION_FAILED). v0-1 (v1 flexible), as Kafka 3.9.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, allowed_on_cluster
from strom.broker.quota import QuotaChange, QuotaEntity, QuotaError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.alter_client_quotas_request import AlterClientQuotasRequest, EntryData
from strom.protocol.messages.alter_client_quotas_response import (
    AlterClientQuotasResponse,
    EntityData,
)
from strom.protocol.messages.alter_client_quotas_response import EntryData as EntryResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = AlterClientQuotasRequest
VERSIONS = range(0, 2)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, AlterClientQuotasRequest)
    if (authorizer := broker.authorizer) is not None and not allowed_on_cluster(authorizer, AclOperation.ALTER_CONFIGS):
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return AlterClientQuotasResponse(entries=tuple(
            EntryResponse(error_code=refused, error_message=refused.message,
                          entity=tuple(EntityData(e.entity_type, e.entity_name) for e in entry.entity))
            for entry in body.entries))
    parsed = [_change(entry) for entry in body.entries]
    changes = [change for change in parsed if isinstance(change, QuotaChange)]
    applied = iter(await broker.quotas.alter(changes, body.validate_only) if changes else ())
    results = [change if isinstance(change, QuotaError) else next(applied) for change in parsed]
    return AlterClientQuotasResponse(entries=tuple(
        EntryResponse(error_code=0 if error is None else error.error_code,
                      error_message=None if error is None else str(error),
                      entity=tuple(EntityData(e.entity_type, e.entity_name) for e in entry.entity))
        for entry, error in zip(body.entries, results, strict=True)
    ))


def _change(entry: EntryData) -> QuotaChange | QuotaError:
    try:
        entity = QuotaEntity.from_parts((e.entity_type, e.entity_name) for e in entry.entity)
    except QuotaError as exc:
        return exc
    return QuotaChange(entity, {op.key: None if op.remove else op.value for op in entry.ops})
