"""Reading one ``__consumer_offsets`` partition back into groups (Kafka's
``GroupMetadataManager.doLoadGroupsAndOffsets``).

The log is applied from its start to its end, in offset order; the last record for a
key wins and a tombstone deletes it. Offsets and group metadata are applied
independently, and a group with offsets but no metadata comes back Empty.

Transactions (TxnOffsetCommit, KIP-98): a *transactional* batch's offsets are not
committed ones yet. They are kept per producer id until that producer's COMMIT or
ABORT control batch, later in the same log: a COMMIT makes them committed offsets
(unless a commit in a later batch already is, compared by batch position, as Kafka's
``olderThan``), an ABORT drops them. What no marker resolved by the log end is still
pending: those groups come back with their ``pending_txn_offsets``, and the marker
that ends the transaction later resolves them as it would have before the restart.
Other control batches (and markers of producers with nothing pending) change nothing.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from strom.broker.group.group_metadata import AppendedOffset, GroupMetadata, OffsetAndMetadata
from strom.broker.group.offsets_topic import (
    OFFSETS_TOPIC,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from strom.protocol.errors import ProtocolError
from strom.protocol.records import (
    BatchHeader,
    ControlRecordType,
    decode_batch,
    decode_message,
    iter_batches,
    parse_control_record,
)
from strom.protocol.topic_partition import TopicPartition
from strom.storage.log import Log
from strom.storage.log_results import FetchIsolation

logger = logging.getLogger(__name__)

LOAD_READ_BYTES = 1 << 20

# group -> partition -> offset, with where its batch is
GroupOffsets = dict[str, dict[TopicPartition, AppendedOffset]]


@dataclass(slots=True)
class LoadState:
    """What one pass over the log leaves: the last value per key (None = deleted), and
    the transactional offsets no marker has resolved yet, per producer id."""

    offsets: GroupOffsets = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    pending: dict[int, GroupOffsets] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0


def read_partition(log: Log, state: LoadState, cancel: threading.Event | None = None) -> None:
    """Apply ``log`` from its start to its current end to ``state``; stops early on ``cancel``."""
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end and not (cancel is not None and cancel.is_set()):
        result = log.read(offset, LOAD_READ_BYTES, isolation=FetchIsolation.LOG_END)
        if result.region is None:
            break
        buf = result.region.read(log.fs)
        next_offset = offset
        for pos, header in iter_batches(buf):
            if header.magic >= 2:
                next_offset = header.base_offset + header.last_offset_delta + 1
                if header.is_control:
                    _apply_control(state, buf, pos, header, log.partition)
                    continue
                records = [(r.key, r.value) for r in decode_batch(buf, pos).records]
                txn_producer = header.producer_id if header.is_transactional else None
            else:
                next_offset = header.base_offset + 1
                records = [(r.key, r.value) for r in decode_message(buf, pos)]
                txn_producer = None
            for key, value in records:
                state.records += 1
                try:
                    _apply(state, key, value, next_offset - 1, txn_producer)
                except ProtocolError as exc:
                    state.skipped += 1
                    logger.warning("skipping unreadable record in %s-%d: %s", OFFSETS_TOPIC, log.partition, exc)
        if next_offset <= offset:
            logger.error("cannot read %s-%d past offset %d; load stops there", OFFSETS_TOPIC, log.partition, offset)
            break
        offset = next_offset


def groups_of(state: LoadState) -> dict[str, GroupMetadata]:
    """The groups a load read: Stable/Empty from their metadata, Empty for offsets alone
    (committed or still pending)."""
    loaded: dict[str, GroupMetadata] = {}
    for group_id, value in state.groups.items():
        if value is not None:
            loaded[group_id] = GroupMetadata.from_record(group_id, value)
    for group_id, offsets in state.offsets.items():
        for tp, appended in offsets.items():
            loaded.setdefault(group_id, GroupMetadata(group_id)).apply_offset(tp, appended)
    for producer_id, groups in state.pending.items():
        for group_id, offsets in groups.items():
            if offsets:
                group = loaded.setdefault(group_id, GroupMetadata(group_id))
                group.pending_txn_offsets[producer_id] = dict(offsets)
    return loaded


def _apply(state: LoadState, key: memoryview | bytes | None, value: memoryview | bytes | None,
           batch_offset: int, txn_producer: int | None) -> None:
    if key is None:
        raise ProtocolError("record without a key")
    decoded = decode_key(key)
    if isinstance(decoded, OffsetCommitKey):
        target = state.offsets if txn_producer is None else state.pending.setdefault(txn_producer, {})
        offsets = target.setdefault(decoded.group, {})
        tp = (decoded.topic, decoded.partition)
        if value is None:
            offsets.pop(tp, None)
        else:
            v = decode_offset_commit_value(value)
            offset = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
            offsets[tp] = AppendedOffset(offset, batch_offset)
    elif isinstance(decoded, GroupMetadataKey):
        state.groups[decoded.group] = None if value is None else decode_group_metadata_value(value)


def _apply_control(state: LoadState, buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader,
                   partition: int) -> None:
    """A COMMIT or ABORT marker resolves the producer's pending offsets read so far."""
    pending = state.pending.pop(header.producer_id, None)
    if pending is None:
        return
    try:
        records = decode_batch(buf, pos).records
        control = parse_control_record(records[0].key, records[0].value) if records else None
    except (ProtocolError, IndexError) as exc:
        logger.warning("unreadable control batch at %s-%d offset %d: %s", OFFSETS_TOPIC, partition,
                       header.base_offset, exc)
        control = None
    if control is None or control.type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        state.pending[header.producer_id] = pending  # not a transaction's end: still pending
        return
    if control.type == ControlRecordType.ABORT:
        return
    for group_id, offsets in pending.items():
        committed = state.offsets.setdefault(group_id, {})
        for tp, appended in offsets.items():
            current = committed.get(tp)
            if current is None or current.batch_offset < appended.batch_offset:
                committed[tp] = appended
