"""LogValidator: what an append checks and rewrites in the producer's bytes (Kafka's LogValidator).

Pure byte logic, no ``Log``: functions take a record set (a ``bytearray`` of log entries
as a producer sent them, RecordBatch v2 or v0/v1 messages; see ``strom.protocol.records``)
and the values they need, and return headers, offsets or raise ``InvalidRecordsError``.
``Log.append`` runs them in this order:

1. ``validate_records``: every entry's length, magic and CRC (``validate_crc``, the one
   parse of each header); a v2 batch's record count must be its last offset delta + 1;
   a client may not send control batches; the set must fit ``segment.bytes`` and each
   batch ``max.message.bytes``. Nothing is written or changed.
2. ``find_duplicate`` (only if a batch has a producer id): a retry of one of the
   producer's last five batches is answered with its original offsets, Kafka's rule
   being that one duplicate batch answers for the whole append.
3. ``assign_legacy_offsets`` (only for v0/v1 entries) then ``assign_offsets``: the
   broker's offsets, partition leader epoch and, with ``LogAppendTime``, the append time
   are written into the buffer in place. Offsets are contiguous from ``base_offset``:
   a v2 batch gets ``[next, next + last_offset_delta]``, a v0/v1 message (or compressed
   wrapper, whose stored offset is its LAST) is rewritten by ``legacy.assign_offsets``.

A follower's append (``Log.append_as_follower``, Kafka's ``appendAsFollower``) runs only
``follower_runs``: the leader's batches keep their offsets, epochs and producer fields;
each entry's length, magic and CRC are checked, offsets must increase (a gap is fine:
a compacted leader has them), and nothing else is (no size limit, no record count
rule, control batches welcome: the leader accepted them all).

Cost: the produce path is the broker's hottest; these functions do per-batch work only
(a few struct operations per batch header), never per record for v2.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Final, NamedTuple

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.records import (
    BatchHeader,
    compute_crc,
    decode_records,
    iter_batches,
    read_batch_header,
    set_log_append_time,
    validate_crc,
)
from strom.protocol.records.header import ATTR_CONTROL, LOG_OVERHEAD
from strom.protocol.records.legacy import assign_offsets as assign_legacy_message_offsets
from strom.storage.errors import InvalidRecordsError, OffsetsOutOfOrderError
from strom.storage.producer_state import (
    NO_PRODUCER_ID,
    BatchMetadata,
    ProducerBatch,
    producer_batch,
)
from strom.storage.segment import AppendedBatch

logger = logging.getLogger(__name__)

_INT64: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")

# (position in the buffer, header) of every entry, in order
Headers = list[tuple[int, BatchHeader]]


def validate_records(buffer: bytes | bytearray, *, segment_bytes: int, max_message_bytes: int,
                     from_client: bool) -> tuple[Headers, bool, bool]:
    """Every entry's header, CRC-checked; and whether any is v0/v1, any has a producer id.

    A plain tuple, not a NamedTuple: one is made per produce request.
    """
    if not buffer:
        raise InvalidRecordsError("an empty record set", ErrorCode.CORRUPT_MESSAGE)
    size = len(buffer)
    if size > segment_bytes:
        raise InvalidRecordsError(f"{size} bytes exceed segment.bytes={segment_bytes}",
                                  ErrorCode.RECORD_LIST_TOO_LARGE)
    headers: Headers = []
    legacy = idempotent = False
    position = 0
    while position < size:
        try:
            header = validate_crc(buffer, position, max_batch_size=max_message_bytes)
        except ProtocolError as exc:
            raise InvalidRecordsError(str(exc), ErrorCode(exc.error_code)) from exc
        if header.magic == 2:
            if header.records_count != header.last_offset_delta + 1:
                raise InvalidRecordsError(
                    f"batch at {position} has {header.records_count} records but last "
                    f"offset delta {header.last_offset_delta}", ErrorCode.INVALID_RECORD)
            if from_client and header.attributes & ATTR_CONTROL:
                raise InvalidRecordsError(f"control batch at {position} in a client's records",
                                          ErrorCode.INVALID_RECORD)
            if header.producer_id != NO_PRODUCER_ID:
                idempotent = True
        else:
            legacy = True  # v0/v1 carry no producer id (BatchHeader holds -1)
        headers.append((position, header))
        position += header.batch_length + LOG_OVERHEAD
    return headers, legacy, idempotent


def invalid_timestamps(records: bytes | bytearray | memoryview, now_ms: int, before_max_ms: int,
                       after_max_ms: int) -> list[tuple[int, str]]:
    """Each record whose CreateTime lies more than ``before_max_ms`` before or
    ``after_max_ms`` after ``now_ms`` (KIP-937), as (index over the set's data records,
    why) in Kafka's words; records without a timestamp (-1) pass.

    Only topics that bound timestamps pay for this decode (Kafka's defaults are
    unbounded). Raises ``ProtocolError`` for a malformed set.
    """
    low, high = now_ms - before_max_ms, now_ms + after_max_ms
    return [
        (index, f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range. "
                f"The timestamp should be within [{low}, {high}]")
        for index, record in enumerate(decode_records(records, verify_crc=False))
        if record.timestamp >= 0 and not low <= record.timestamp <= high
    ]


def find_duplicate(headers: Headers,
                   lookup: Callable[[BatchHeader], BatchMetadata | None]
                   ) -> BatchMetadata | None:
    """The original metadata of the first batch that is a producer's retry, if any.

    ``lookup`` is the producer state's answer for one header (its last five batches).
    """
    for _, header in headers:
        if header.producer_id == NO_PRODUCER_ID or header.magic < 2:
            continue
        original = lookup(header)
        if original is not None:
            return original
    return None


def assign_legacy_offsets(buffer: bytearray, headers: Headers, base_offset: int, *,
                          max_uncompressed_size: int) -> bytearray:
    """A copy of ``buffer`` with v0/v1 entries given offsets from ``base_offset``
    (decompressing wrappers if needed); v2 batches are copied as they are."""
    out = bytearray()
    next_offset = base_offset
    view = memoryview(buffer)
    for position, header in headers:
        entry = view[position : position + header.size]
        if header.magic == 2:
            out += entry
            next_offset += header.last_offset_delta + 1
            continue
        try:
            rewritten, next_offset = assign_legacy_message_offsets(
                entry, next_offset, max_uncompressed_size=max_uncompressed_size)
        except ProtocolError as exc:
            raise InvalidRecordsError(str(exc), ErrorCode(exc.error_code)) from exc
        out += rewritten
    return out


def assign_offsets(
    buffer: bytearray, headers: Headers, base_offset: int, leader_epoch: int, append_time: int,
) -> tuple[list[AppendedBatch], list[ProducerBatch]]:
    """Write offsets, epoch and append time into v2 batches (v0/v1 have theirs already).

    Returns the batches for the segment, and the batches with a producer id for the
    producer state, each with its header as now written: the validated header with the
    new offset and epoch (the only fields changed), or read again if the append time
    rewrote attributes, max timestamp and CRC. ``leader_epoch`` < 0 keeps the batch's
    own; ``append_time`` < 0 keeps the producer's timestamps.
    """
    next_offset = base_offset
    batches: list[AppendedBatch] = []
    producer_batches: list[ProducerBatch] = []
    for position, header in headers:
        max_timestamp = header.max_timestamp
        size = header.batch_length + LOG_OVERHEAD
        if header.magic == 2:
            _INT64.pack_into(buffer, position, next_offset)
            epoch = header.partition_leader_epoch
            if leader_epoch >= 0:
                _INT32.pack_into(buffer, position + 12, leader_epoch)
                epoch = leader_epoch
            last_offset = next_offset + header.last_offset_delta
            if append_time >= 0:
                set_log_append_time(buffer, position, append_time)
                max_timestamp = append_time
                if header.producer_id != NO_PRODUCER_ID:
                    producer_batches.append(
                        producer_batch(buffer, position, read_batch_header(buffer, position)))
            elif header.producer_id != NO_PRODUCER_ID:
                written = BatchHeader._make((next_offset, header.batch_length, epoch, *header[3:]))
                producer_batches.append(producer_batch(buffer, position, written))
        else:
            last_offset = header.base_offset  # v0/v1 store their last offset
            if append_time >= 0 and header.magic > 0:
                set_log_append_time(buffer, position, append_time)
                max_timestamp = append_time
        batches.append(AppendedBatch(position, last_offset, max_timestamp, size))
        next_offset = last_offset + 1
    return batches, producer_batches


class FollowerRun(NamedTuple):
    """Whole batches of a follower's append that go into one segment, as the leader wrote them."""

    records: memoryview
    batches: list[AppendedBatch]  # positions within ``records``
    headers: list[BatchHeader]
    producer_batches: list[ProducerBatch]
    first_offset: int  # the first batch's base offset (a v0/v1 entry's stored offset)
    last_offset: int


def follower_runs(records: bytes | bytearray, *, segment_bytes: int,
                  current_leader_epoch: int | None = None) -> list[FollowerRun]:
    """The leader's whole batches in ``records``, checked, in runs of at most
    ``segment_bytes`` (one batch alone if larger); empty if there is no whole batch.

    Kafka's ``analyzeAndValidateRecords`` for replication: a trailing partial batch (a
    fetch response cut at its byte limit) is left out; an impossible length or a CRC
    mismatch raises ``InvalidRecordsError``, offsets that do not increase (a batch's
    last offset not above the previous one's, or a v2 batch starting below the previous
    one's end, which recovery would cut) ``OffsetsOutOfOrderError``. With
    ``current_leader_epoch`` (the epoch the follower fetched under), a batch stamped
    with a newer epoch and everything after it are left out (KAFKA-18723: a deposed
    leader's slow response must not carry the next epoch's records in).

    Kafka refuses a whole append larger than ``segment.bytes``; splitting it instead
    lets a follower replicate a topic whose segments are smaller than a fetch (as in
    tests), each run rolling a segment as a producer's append would.
    """
    runs: list[FollowerRun] = []
    start = size = 0
    run: list[tuple[int, BatchHeader]] = []
    previous_last = previous_next = -1
    try:
        for position, header in iter_batches(records):
            if current_leader_epoch is not None and header.magic == 2 \
                    and header.partition_leader_epoch > current_leader_epoch:
                logger.info("not appending the batches from offset %d: their leader epoch %d is "
                            "newer than the follower's %d", header.base_offset,
                            header.partition_leader_epoch, current_leader_epoch)
                break
            if compute_crc(records, position, header) != header.crc:
                raise InvalidRecordsError(f"CRC mismatch in the leader's batch at offset "
                                          f"{header.base_offset}", ErrorCode.CORRUPT_MESSAGE)
            if header.last_offset <= previous_last \
                    or (header.magic == 2 and header.base_offset < previous_next):
                raise OffsetsOutOfOrderError(
                    f"offsets out of order in a follower's append: batch [{header.base_offset}, "
                    f"{header.last_offset}] after one ending at {previous_last}",
                    ErrorCode.CORRUPT_MESSAGE)
            previous_last, previous_next = header.last_offset, header.next_offset
            if run and size + header.size > segment_bytes:
                runs.append(_follower_run(records, start, run))
                start, size, run = position, 0, []
            run.append((position, header))
            size += header.size
    except ProtocolError as exc:
        raise InvalidRecordsError(str(exc), ErrorCode(exc.error_code)) from exc
    if run:
        runs.append(_follower_run(records, start, run))
    return runs


def _follower_run(records: bytes | bytearray, start: int,
                  entries: list[tuple[int, BatchHeader]]) -> FollowerRun:
    last_position, last = entries[-1]
    batches = [AppendedBatch(position - start, header.last_offset, header.max_timestamp,
                             header.size) for position, header in entries]
    producer_batches = [producer_batch(records, position, header) for position, header in entries
                        if header.producer_id != NO_PRODUCER_ID and header.magic == 2]
    return FollowerRun(memoryview(records)[start : last_position + last.size], batches,
                       [header for _, header in entries], producer_batches,
                       entries[0][1].base_offset, last.last_offset)
