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

Cost: the produce path is the broker's hottest; these functions do per-batch work only
(a few struct operations per batch header), never per record for v2.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.records import (
    BatchHeader,
    decode_records,
    read_batch_header,
    set_log_append_time,
    validate_crc,
)
from strom.protocol.records.header import ATTR_CONTROL, LOG_OVERHEAD
from strom.protocol.records.legacy import assign_offsets as assign_legacy_message_offsets
from strom.storage.errors import InvalidRecordsError
from strom.storage.producer_state import (
    NO_PRODUCER_ID,
    BatchMetadata,
    ProducerBatch,
    producer_batch,
)
from strom.storage.segment import AppendedBatch

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
