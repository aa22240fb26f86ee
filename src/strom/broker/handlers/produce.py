"""Produce (0): append each partition's batches as sent; acks=0 gets no answer at all.

acks=1 is answered once the leader's log has the records (and, with
``flush.messages=1``, its disk); acks=-1 once the high watermark passes them — the ISR
has them — which on one node is at once. The partitions come from
``ReplicaManager.partition_or_error`` and the wait from its purgatory.

This is the broker's hottest path (one request per batch at linger 0), so the answer
is built with the generated codec's twin classes (``_New_*``, see
``tools/codegen/emit.py``): the same frozen dataclasses, built with plain slot stores
instead of ``object.__setattr__`` per field — 0.6 µs instead of 3.3 µs for a
one-partition answer. Every field is positional there, defaults included.

A request with a transactional id (v3+) first has its transactional batches verified
with the transaction coordinator (KIP-890 part 1, ``strom.broker.transaction.verification``);
the appends follow with no ``await`` between, each batch carrying its verification. A
plain or idempotent request (no transactional id) goes straight to the appends.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, cast

from strom.broker.authorizer import AclOperation, ResourceType, allowed, refused
from strom.broker.log_throttle import LogThrottle
from strom.broker.transaction.verification import Refusal
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.produce_request import PartitionProduceData, ProduceRequest
from strom.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
    _New_PartitionProduceResponse,
    _New_ProduceResponse,
    _New_TopicProduceResponse,
)
from strom.protocol.topic_partition import TopicPartition
from strom.storage.errors import KafkaStorageError, RecordValidationError, StorageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from strom.broker.broker import Broker
    from strom.broker.partition import Partition
    from strom.broker.replica_manager import ReplicaManager
    from strom.broker.transaction.verification import Verification
    from strom.protocol.headers import Request

logger = logging.getLogger(__name__)
# A full disk refuses every produce: one line per message per 10 s, the rest counted.
_refusals = LogThrottle(logger)

REQUEST = ProduceRequest
VERSIONS = range(0, 12)

_BUFFERS = (bytes, bytearray, memoryview)
ONE_V2_BATCH_FROM = 3  # Produce v3+: one record batch v2 per partition
_INT32 = struct.Struct(">i")
_LOG_OVERHEAD = 12  # base offset (8) and batch length (4) precede the length's bytes
_MAGIC_AT = 16
_NO_LEADER = LeaderIdAndEpoch()  # the schema's default: no current_leader to report
CURRENT_LEADER_FROM = 10  # KIP-951: refusals name the current leader and its endpoint

# The twins, typed as what they build (a cast here rather than one per call).
_new_response = cast("Callable[..., ProduceResponse]", _New_ProduceResponse)
_new_topic_response = cast("Callable[..., TopicProduceResponse]", _New_TopicProduceResponse)
_new_partition_response = cast("Callable[..., PartitionProduceResponse]", _New_PartitionProduceResponse)


async def handle(broker: Broker, request: Request) -> Message | None:
    body = request.body
    assert isinstance(body, ProduceRequest)
    acks = body.acks
    if acks not in (0, 1, -1):
        error = ErrorCode.INVALID_REQUIRED_ACKS
        return ProduceResponse(responses=tuple(
            TopicProduceResponse(t.name, tuple(_refused(p.index, error) for p in t.partition_data))
            for t in body.topic_data
        ))
    replica_manager = broker.replica_manager
    responses = []
    topic_data = body.topic_data
    if (authorizer := broker.authorizer) is not None:  # ACLs; without an authorizer, this one test
        transactional_id = body.transactional_id
        if transactional_id is not None and not allowed(authorizer, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                        transactional_id):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            return ProduceResponse(responses=tuple(
                TopicProduceResponse(t.name, tuple(_refused(p.index, error) for p in t.partition_data))
                for t in topic_data)) if acks else None
        if hidden := refused(authorizer, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in topic_data)):
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # Write on each topic; the others are appended
            responses = [TopicProduceResponse(t.name, tuple(_refused(p.index, error) for p in t.partition_data))
                         for t in topic_data if t.name in hidden]
            topic_data = tuple(t for t in topic_data if t.name not in hidden)
    replicating: list[tuple[Partition, int]] = []
    not_led: list[TopicPartition] = []  # refused with NOT_LEADER_OR_FOLLOWER (rare: no cost otherwise)
    one_batch = request.api_version >= ONE_V2_BATCH_FROM
    if body.transactional_id is not None and broker.transaction_verifier.enabled:  # plain: one test
        verifications = await broker.transaction_verifier.verify_produce(
            body.transactional_id, request.api_version, topic_data)
        for topic in topic_data:  # no await from here to the last append (KAFKA-14884)
            name = topic.name
            partitions = [_append(replica_manager, name, data, acks, replicating, not_led, one_batch, verified)
                          if not isinstance(verified := verifications.get((name, data.index)), Refusal)
                          else _refused(data.index, verified.error, message=verified.message)
                          for data in topic.partition_data]
            responses.append(_new_topic_response(name, tuple(partitions)))
    else:
        for topic in topic_data:
            name = topic.name
            partitions = [_append(replica_manager, name, data, acks, replicating, not_led, one_batch)
                          for data in topic.partition_data]
            responses.append(_new_topic_response(name, tuple(partitions)))
    if broker.metrics is not None:  # Prometheus (issue 21): bytes and records in per topic
        broker.metrics.produced(body.topic_data, responses)
    throttle_ms = broker.quotas.record_produce(request, _size(body)) if broker.quotas.produce.enabled else 0
    if acks == 0:  # a throttled one is muted all the same (KIP-219)
        return None
    if replicating:  # acks=-1 and the ISR has not got everything yet (a cluster only)
        errors = await replica_manager.wait_for_replication(replicating, body.timeout_ms / 1000)
        responses = [_after_replication(topic, errors) for topic in responses]
        not_led += [tp for tp, error in errors.items() if error == ErrorCode.NOT_LEADER_OR_FOLLOWER]
    node_endpoints: tuple[NodeEndpoint, ...] = ()
    if not_led and request.api_version >= CURRENT_LEADER_FROM:
        responses, node_endpoints = _with_current_leaders(broker, responses)
    return _new_response(tuple(responses), throttle_ms, node_endpoints)


def _append(replica_manager: ReplicaManager, topic: str, data: PartitionProduceData, acks: int,
            replicating: list[tuple[Partition, int]], not_led: list[TopicPartition],
            one_batch: bool, verification: Verification | None = None) -> PartitionProduceResponse:
    records = data.records
    if not isinstance(records, _BUFFERS):  # null records
        return _refused(data.index, ErrorCode.CORRUPT_MESSAGE)
    partition: Partition | None = None
    try:  # missing partitions first, then the record set, as Kafka's handleProduceRequest
        partition = replica_manager.partition_or_error(topic, data.index)
        if one_batch and ((size := len(records)) <= _MAGIC_AT or records[_MAGIC_AT] != 2
                          or _LOG_OVERHEAD + _INT32.unpack_from(records, 8)[0] != size):
            _refusals.log(logging.INFO, "produce to %s-%d refused: %s", topic, data.index,
                          _not_one_v2_batch(records))  # the reason, off the hot path
            return _refused(data.index, ErrorCode.INVALID_RECORD)
        result = partition.append_as_leader(records, acks, verification)  # positional: the cheaper call
    except RecordValidationError as exc:  # KIP-467: name the records, not just the batch
        _refusals.log(logging.INFO, "produce to %s-%d refused: %s", topic, data.index, exc)
        return _refused(data.index, exc.error_code, partition, str(exc),
                        tuple(BatchIndexAndErrorMessage(i, why) for i, why in exc.record_errors))
    except StorageError as exc:
        _refusals.log(logging.INFO, "produce to %s-%d refused: %s", topic, data.index, exc)
        if isinstance(exc, KafkaStorageError):  # the disk may have failed: the broker's to judge
            replica_manager.log_dir_failed(f"appending to {topic}-{data.index}", exc)
        elif exc.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            not_led.append((topic, data.index))
        return _refused(data.index, exc.error_code, partition)
    if replica_manager.log_end_purgatory.watchers:  # followers long-polling
        replica_manager.appended(partition)
    if acks == -1 and partition.followers and partition.high_watermark <= result.last_offset:
        replicating.append((partition, result.last_offset))
    return _new_partition_response(
        data.index, 0, result.base_offset, result.log_append_time, result.log_start_offset,
        (), None, _NO_LEADER,
    )


# Kafka's ReplicaManager answers these without the log's start offset: the request never
# reached a log's validation (or the log could not be read).
_BEFORE_THE_LOG = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
})


def _refused(index: int, error: ErrorCode, partition: Partition | None = None, message: str | None = None,
             record_errors: tuple[BatchIndexAndErrorMessage, ...] = ()) -> PartitionProduceResponse:
    """A partition's refusal as Kafka's ReplicaManager writes it: no offsets (-1), the log's
    start offset once the log judged the records, and a message only with record errors
    (KIP-467's ``hasCustomErrorMessage``): the log carries the reason of the others."""
    log_start_offset = -1
    if partition is not None and error not in _BEFORE_THE_LOG:
        log_start_offset = partition.log.log_start_offset
    return PartitionProduceResponse(index, error, -1, -1, log_start_offset, record_errors, message)


def _not_one_v2_batch(records: bytes | bytearray | memoryview) -> str:
    """Why a record set is not what Kafka's ProduceRequest.validateRecords (v3+) wants:
    exactly one whole batch of format v2 (batchLength at byte 8, magic at byte 16)."""
    size = len(records)
    if size < _MAGIC_AT + 1 or _LOG_OVERHEAD + _INT32.unpack_from(records, 8)[0] > size:
        return "a produce request of v3 or later must carry one whole record batch per partition"
    if records[_MAGIC_AT] != 2:
        return "a produce request of v3 or later must carry record batch format v2"
    return "a produce request of v3 or later may carry only one record batch per partition"


def _with_current_leaders(broker: Broker, responses: list[TopicProduceResponse]
                          ) -> tuple[list[TopicProduceResponse], tuple[NodeEndpoint, ...]]:
    """KIP-951: a partition refused with NOT_LEADER_OR_FOLLOWER (v10+) names its current
    leader and epoch, and the response carries that leader's endpoint on the client's
    listener, so the client goes straight there instead of refreshing its metadata (the
    most of a controlled shutdown's pause, as measured). Kafka reads the leader from its
    metadata cache; a broker that has just stopped leading knows the new leader first from
    the LeaderAndIsr that demoted it, so that is asked first. Off the hot path: only
    refused partitions get here."""
    listener = broker.request_listener()
    endpoints: dict[int, NodeEndpoint] = {}
    answered = []
    for topic in responses:
        partitions = []
        for p in topic.partition_responses:
            if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                leader, epoch = _current_leader(broker, topic.name, p.index)
                live = broker.metadata.live_broker(leader) if leader >= 0 else None
                endpoint = None if live is None else live.endpoint(listener)
                if live is not None and endpoint is not None:
                    endpoints[leader] = NodeEndpoint(leader, endpoint.host, endpoint.port, live.rack)
                    p = PartitionProduceResponse(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                                                 p.log_start_offset, p.record_errors, p.error_message,
                                                 LeaderIdAndEpoch(leader, epoch))
            partitions.append(p)
        answered.append(TopicProduceResponse(topic.name, tuple(partitions)))
    return answered, tuple(endpoints[i] for i in sorted(endpoints))


def _current_leader(broker: Broker, topic: str, index: int) -> tuple[int, int]:
    """(leader id, leader epoch) as this broker knows them freshest; (-1, -1) if unknown."""
    partition = broker.replica_manager.partitions.get((topic, index))
    state = broker.metadata.partition_state(topic, index)
    if partition is not None and partition.leader_id >= 0 and (state is None or partition.leader_epoch >= state.leader_epoch):
        return partition.leader_id, partition.leader_epoch
    if state is not None and state.leader >= 0:
        return state.leader, state.leader_epoch
    return -1, -1


def _size(body: ProduceRequest) -> int:
    """The record bytes a Produce carries: what ``producer_byte_rate`` counts (Kafka counts
    the whole request; the header and field overhead are a few dozen bytes of it)."""
    return sum(len(data.records) for topic in body.topic_data for data in topic.partition_data
               if isinstance(data.records, _BUFFERS))


def _after_replication(topic: TopicProduceResponse, errors: dict[TopicPartition, ErrorCode]
                       ) -> TopicProduceResponse:
    """Replace the answers of partitions whose replication failed or timed out."""
    partitions = tuple(
        PartitionProduceResponse(p.index, error, error_message=f"acks=-1: {error.name}")
        if (error := errors.get((topic.name, p.index), ErrorCode.NONE)) else p
        for p in topic.partition_responses
    )
    return TopicProduceResponse(topic.name, partitions)
