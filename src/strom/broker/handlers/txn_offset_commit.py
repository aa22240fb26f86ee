"""TxnOffsetCommit (28): a transactional producer's consumed offsets, sent to the group
coordinator inside its transaction (``sendOffsetsToTransaction``).

The offsets are written to the group's ``__consumer_offsets`` partition as the
producer's transactional batch and stay pending (invisible to OffsetFetch; RequireStable
fetches answer UNSTABLE_OFFSET_COMMIT) until the transaction's marker lands there; see
``GroupCoordinator.commit_transactional_offsets``. v3 carries the consumer's group
metadata (KIP-447): generation, member id and instance id, checked as Kafka does.
Topics the broker does not know get UNKNOWN_TOPIC_OR_PARTITION (Kafka 3.9 checks the
topic, not the partition). v0-v4, as Kafka 3.9: v4 only adds TRANSACTION_ABORTABLE, which
older versions get as INVALID_TXN_STATE; v0-v1 clients get COORDINATOR_LOAD_IN_PROGRESS
as COORDINATOR_NOT_AVAILABLE, which they retry.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.broker.group.group_metadata import OffsetAndMetadata
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.txn_offset_commit_request import TxnOffsetCommitRequest
from strom.protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = TxnOffsetCommitRequest
VERSIONS = range(0, 5)
LOAD_IN_PROGRESS_FROM = 2  # older clients know COORDINATOR_NOT_AVAILABLE only
TRANSACTION_ABORTABLE_FROM = 4  # KIP-890


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, TxnOffsetCommitRequest)
    version = request.api_version
    now = time.time_ns() // 1_000_000
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    refusal: ErrorCode | None = None  # ACLs: Write on the transactional id, Read on the group, then on each topic
    if (authorizer := broker.authorizer) is not None:
        if not allowed(authorizer, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            refusal = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not allowed(authorizer, AclOperation.READ, ResourceType.GROUP, body.group_id):
            refusal = ErrorCode.GROUP_AUTHORIZATION_FAILED
    for topic in body.topics:
        known = broker.metadata.get(topic.name) is not None
        topic_refusal = refusal or (ErrorCode.TOPIC_AUTHORIZATION_FAILED if authorizer is not None and not allowed(
            authorizer, AclOperation.READ, ResourceType.TOPIC, topic.name) else None)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic_refusal is not None:
                errors[tp] = topic_refusal
            elif not known:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                leader_epoch = p.committed_leader_epoch if version >= 2 else -1
                offsets[tp] = OffsetAndMetadata(p.committed_offset, leader_epoch, p.committed_metadata or "", now)
    if offsets:
        errors.update(await broker.group_coordinator.commit_transactional_offsets(
            body.group_id, body.producer_id, body.producer_epoch,
            body.member_id if version >= 3 else "",
            body.group_instance_id if version >= 3 else None,
            body.generation_id if version >= 3 else -1,
            offsets, body.transactional_id,
        ))
    return TxnOffsetCommitResponse(topics=tuple(
        TxnOffsetCommitResponseTopic(topic.name, tuple(
            TxnOffsetCommitResponsePartition(p.partition_index, answered_error(errors[(topic.name, p.partition_index)], version))
            for p in topic.partitions
        ))
        for topic in body.topics
    ))


def answered_error(error: ErrorCode, version: int) -> ErrorCode:
    """The error as a client of ``version`` is told it (Kafka's rewrites for old versions)."""
    if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < LOAD_IN_PROGRESS_FROM:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error == ErrorCode.TRANSACTION_ABORTABLE and version < TRANSACTION_ABORTABLE_FROM:
        return ErrorCode.INVALID_TXN_STATE
    return error
