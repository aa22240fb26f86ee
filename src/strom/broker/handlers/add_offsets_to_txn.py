"""AddOffsetsToTxn (25): a transactional producer will commit a group's offsets in its transaction.

Kafka's ``handleAddOffsetsToTxnRequest``: AddPartitionsToTxn with the one partition of
``__consumer_offsets`` that holds the group's offsets (the group coordinator's
``partition_for``), so the transaction's marker lands there too and the group's pending
offsets (TxnOffsetCommit) become committed or are dropped with it. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2. v4 (TV2's) is not served.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.broker.metadata_cache import TopicError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from strom.protocol.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

logger = logging.getLogger(__name__)

REQUEST = AddOffsetsToTxnRequest
VERSIONS = range(0, 4)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, AddOffsetsToTxnRequest)
    if (authorizer := broker.authorizer) is not None:  # ACLs: Write on the transactional id, Read on the group
        if not allowed(authorizer, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not allowed(authorizer, AclOperation.READ, ResourceType.GROUP, body.group_id):
            return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not broker.config.cluster_mode:  # one node: the marker needs the partition to exist
        try:
            broker.group_coordinator.ensure_offsets_topic()
        except TopicError as exc:
            logger.error("cannot create %s: %s", OFFSETS_TOPIC, exc)
            return AddOffsetsToTxnResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    partition = broker.group_coordinator.manager.partition_for(body.group_id)
    error = await broker.transaction_coordinator.add_partitions(
        body.transactional_id, body.producer_id, body.producer_epoch, frozenset({(OFFSETS_TOPIC, partition)}))
    if error == ErrorCode.PRODUCER_FENCED and request.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(error_code=error)
