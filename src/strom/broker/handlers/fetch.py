"""Fetch (1): file regions of each partition's log, long-polling for ``min_bytes``.

The reading and the long poll are the ReplicaManager's (``fetch_messages``): consumers
read to the high watermark (or, read_committed, the last stable offset, with the aborted
transactions their records overlap) and wait for it to move (the LSO moves only with the
HW or, on one node, an append, both of which wake the waiters);
followers (``replica_id`` >= 0) read to the log end, and one whose ``last_fetched_epoch``
(v12+) diverges from the leader's log gets ``diverging_epoch`` (KIP-320's fetch-time
truncation) instead of records. Records larger than a few KiB
leave as file regions that the connection writes with ``os.sendfile`` straight from
the segment file. Incremental fetch sessions
(KIP-227) are served by ``fetch_session``: a session's answers carry only partitions
with news. Versions below 4 are not served: they predate record batch v2, and Strom
stores batches as sent rather than down-converting them for old clients.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from strom.broker.authorizer import (
    NONE_REFUSED,
    AclOperation,
    ResourceType,
    allowed_on_cluster,
    refused,
)
from strom.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSession,
    FetchSessionError,
    FetchTarget,
    has_news,
)
from strom.broker.replica_manager import PartitionRead
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.fetch_request import FetchRequest
from strom.protocol.messages.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from strom.storage.log_results import FetchIsolation, FetchResult

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = FetchRequest
VERSIONS = range(4, 17)
_REFUSED = PartitionRead(ErrorCode.TOPIC_AUTHORIZATION_FAILED)  # a topic the principal may not read
TOPIC_IDS_FROM = 13  # Fetch v13 addresses topics by id
SESSIONS_FROM = 7
REPLICA_STATE_FROM = 15  # replica_id moved into replica_state (KIP-903)
ZERO_ID = uuid.UUID(int=0)
_UNKNOWN = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, FetchRequest)
    by_id = request.api_version >= TOPIC_IDS_FROM
    try:
        session, targets = _session_targets(broker, body, by_id, request.api_version >= SESSIONS_FROM)
    except FetchSessionError as exc:
        return FetchResponse(error_code=exc.error_code, session_id=0)
    isolation = FetchIsolation.TXN_COMMITTED if body.isolation_level == 1 else FetchIsolation.HIGH_WATERMARK
    replica_id = body.replica_state.replica_id if request.api_version >= REPLICA_STATE_FROM else body.replica_id
    max_bytes = body.max_bytes
    if broker.quotas.fetch.enabled and replica_id < 0:  # consumer_byte_rate: a fetch's size capped
        max_bytes = broker.quotas.fetch_max_bytes(request, max_bytes)
    hidden = NONE_REFUSED
    if (authorizer := broker.authorizer) is not None:  # ACLs: Read on each topic, a follower ClusterAction
        names = {t.topic for t in targets if t.topic is not None}
        hidden = refused(authorizer, AclOperation.READ, ResourceType.TOPIC, names) if replica_id < 0 else (
            NONE_REFUSED if allowed_on_cluster(authorizer, AclOperation.CLUSTER_ACTION) else frozenset(names))
    reads = await broker.replica_manager.fetch_messages(
        [t for t in targets if t.topic not in hidden] if hidden else targets, max_bytes=max_bytes,
        min_bytes=body.min_bytes, max_wait_ms=body.max_wait_ms, isolation=isolation, replica_id=replica_id,
    )
    if hidden:  # the refused partitions back in their places
        read = iter(reads)
        reads = [_REFUSED if t.topic in hidden else next(read) for t in targets]
    if broker.metrics is not None:  # Prometheus (issue 21): bytes out per topic
        broker.metrics.fetched(targets, reads, replica_id >= 0)
    incremental = session is not None and body.session_epoch > INITIAL_EPOCH
    if broker.quotas.fetch.enabled and replica_id < 0:  # consumer_byte_rate (strom.broker.quota)
        throttle_ms = broker.quotas.record_fetch(request, sum(read.size for read in reads))
        if throttle_ms:
            return _throttled(broker, session, incremental, throttle_ms)
    return FetchResponse(
        error_code=0,
        session_id=0 if session is None else session.session_id,
        responses=_group(targets, reads, by_id, incremental, committed=body.isolation_level == 1),
    )


def _session_targets(
    broker: Broker, body: FetchRequest, by_id: bool, sessions: bool
) -> tuple[FetchSession | None, list[FetchTarget]]:
    """The session this request belongs to (if any) and every partition it reads."""
    requested = [
        FetchTarget(
            _topic_name(broker, topic.topic, topic.topic_id, by_id),
            topic.topic_id if by_id else ZERO_ID,
            p.partition,
            p.fetch_offset,
            p.partition_max_bytes,
            p.current_leader_epoch,
            last_fetched_epoch=p.last_fetched_epoch,  # -1 before v12 (the field's default)
        )
        for topic in body.topics
        for p in topic.partitions
    ]
    cache = broker.fetch_sessions
    if not sessions or (body.session_id == 0 and body.session_epoch == FINAL_EPOCH):
        return None, requested
    if body.session_epoch == FINAL_EPOCH:  # the client closes its session
        cache.remove(body.session_id)
        return None, requested
    if body.session_epoch == INITIAL_EPOCH:
        if body.session_id:
            cache.remove(body.session_id)
        session = cache.create(requested)
        return session, requested
    forgotten = [
        (_topic_name(broker, t.topic, t.topic_id, by_id) or t.topic_id, partition)
        for t in body.forgotten_topics_data
        for partition in t.partitions
    ]
    session = cache.incremental(body.session_id, body.session_epoch, requested, forgotten)
    return session, list(session.partitions.values())


def _topic_name(broker: Broker, name: str, topic_id: uuid.UUID, by_id: bool) -> str | None:
    if not by_id:
        return name
    found = broker.metadata.by_id(topic_id)
    return None if found is None else found.name


def _group(
    targets: list[FetchTarget], reads: list[PartitionRead], by_id: bool, incremental: bool, committed: bool
) -> tuple[FetchableTopicResponse, ...]:
    """Partitions grouped by topic in request order; an incremental answer only with news."""
    topics: dict[tuple[str, uuid.UUID], list[PartitionData]] = {}
    for target, read in zip(targets, reads, strict=True):
        data = _partition(target.partition, read, committed)
        news = has_news(target, data.error_code, read.size, data.high_watermark,
                        data.last_stable_offset, data.log_start_offset)
        if incremental and not news and read.diverging_epoch is None:
            continue
        key = ("" if by_id else (target.topic or ""), target.topic_id if by_id else ZERO_ID)
        topics.setdefault(key, []).append(data)
    return tuple(
        FetchableTopicResponse(topic=name, topic_id=topic_id, partitions=tuple(partitions))
        for (name, topic_id), partitions in topics.items()
    )


def _partition(index: int, read: PartitionRead, committed: bool) -> PartitionData:
    """One partition's answer. As Kafka's: an error carries no offsets (-1, even for
    OFFSET_OUT_OF_RANGE) and no records; ``aborted_transactions`` is null unless the
    consumer reads committed records (then the aborted transactions the records overlap,
    those that began before the fetch offset included: the client drops their records),
    and an empty list for a partition Kafka's KafkaApis refuses before reading (unknown)."""
    result = read.result
    if result is None or read.error_code:
        aborted = () if read.error_code in _UNKNOWN else None
        return PartitionData(partition_index=index, error_code=read.error_code, high_watermark=-1,
                             last_stable_offset=-1, log_start_offset=-1, aborted_transactions=aborted, records=b"")
    if read.diverging_epoch is not None:  # a follower to truncate first: no records (v12+)
        epoch, end_offset = read.diverging_epoch
        return PartitionData(
            partition_index=index, error_code=0, high_watermark=result.high_watermark,
            last_stable_offset=result.last_stable_offset, log_start_offset=result.log_start_offset,
            diverging_epoch=EpochEndOffset(epoch=epoch, end_offset=end_offset),
            aborted_transactions=() if committed else None, records=b"",
        )
    return PartitionData(
        partition_index=index,
        error_code=read.error_code,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        aborted_transactions=_aborted(result) if committed else None,
        records=read.records if read.records is not None else b"",
    )


def _throttled(broker: Broker, session: FetchSession | None, incremental: bool,
               throttle_ms: int) -> FetchResponse:
    """A throttled Fetch's answer: no partitions at all, as Kafka's ``getThrottledResponse``;
    a session this full fetch has just made is dropped (Kafka makes it only when answering
    with data), an incremental one is kept."""
    if session is not None and not incremental:
        broker.fetch_sessions.remove(session.session_id)
        return FetchResponse(throttle_time_ms=throttle_ms, error_code=0, session_id=0)
    return FetchResponse(throttle_time_ms=throttle_ms, error_code=0,
                         session_id=0 if session is None else session.session_id)


def _aborted(result: FetchResult) -> tuple[AbortedTransaction, ...]:
    found = result.aborted_transactions
    if not found:
        return ()
    return tuple(AbortedTransaction(producer_id=entry.producer_id, first_offset=entry.first_offset)
                 for entry in found)
