"""RecordBatch v2 (magic 2): the format, fully decoding batches and their records, control
records. Building batches is ``v2_builder``'s (re-exported here).

The 61-byte batch header is described in ``header``; the CRC-32C covers bytes 21..end
(attributes through the last record), i.e. everything below after the header. The
records section (compressed as a whole when attribute bits 0-2 name a codec) holds
``records_count`` records, each::

    length            varint   bytes that follow, up to the end of this record
    attributes        int8     unused, 0
    timestamp_delta   varlong  record timestamp - batch base_timestamp
    offset_delta      varint   record offset - batch base_offset
    key_length        varint   -1 = null key
    key               bytes
    value_length      varint   -1 = null value
    value             bytes
    header_count      varint
    headers           header_count x (key_length varint, key UTF-8,
                                      value_length varint (-1 = null), value bytes)

A control batch (attribute bit 5, always transactional) carries one control record
whose key is ``version int16, type int16`` (0 = abort, 1 = commit) and, for those two
types, whose value is the end-transaction marker ``version int16, coordinator_epoch
int32``.

With LogAppendTime (bit 3) every record's timestamp is the batch's max_timestamp.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import IntEnum
from typing import Final, NamedTuple

from strom.protocol.compression import CompressionType, decompress
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.records.header import (
    ATTR_TIMESTAMP_TYPE,
    V2_HEADER_SIZE,
    BatchHeader,
    TimestampType,
    read_batch_header,
    validate_crc,
)
from strom.protocol.records.v2_builder import (
    Buffer,
    BuilderOptions,
    HeaderInput,
    RecordBatchBuilder,
    RecordInput,
    build_record_batch,
)
from strom.protocol.records.varint import read_varint, read_varlong

DEFAULT_MAX_UNCOMPRESSED_SIZE: Final = 64 << 20
_CONTROL_KEY: Final = struct.Struct(">hh")
_END_TXN_MARKER: Final = struct.Struct(">hi")
_NO_HEADERS: Final[tuple[tuple[str, memoryview | None], ...]] = ()


class Record(NamedTuple):
    """One decoded record; key and value are views into the (decompressed) batch, or
    ``bytes`` of their own when decoded with ``copy``."""

    offset: int
    timestamp: int
    key: memoryview | bytes | None
    value: memoryview | bytes | None
    headers: Sequence[tuple[str, memoryview | bytes | None]]


class DecodedBatch(NamedTuple):
    header: BatchHeader
    records: list[Record]


def _corrupt(reason: str) -> ProtocolError:
    return ProtocolError(reason, error_code=ErrorCode.CORRUPT_MESSAGE)


# --- decoding -----------------------------------------------------------------------


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    max_uncompressed_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE,
    verify_crc: bool = True,
    copy: bool = False,
) -> DecodedBatch:
    """Decode every record of the v2 batch at ``pos``.

    Keys, values and header values are views into the batch, or with ``copy`` their own
    ``bytes``: what a consumer hands its application, which may keep them after the
    fetched buffer is gone (one slice instead of a view and then a copy).
    """
    header = validate_crc(buf, pos) if verify_crc else read_batch_header(buf, pos)
    if header.magic != 2:
        raise ValueError(f"magic {header.magic} is not a v2 batch; use legacy.decode_message")
    section_start = pos + V2_HEADER_SIZE
    section_end = pos + header.size
    codec = header.compression
    data: bytes | bytearray
    if codec != CompressionType.NONE:
        with memoryview(buf) as source:
            data = decompress(codec, source[section_start:section_end], max_uncompressed_size)
        view, start, end = memoryview(data), 0, len(data)
    elif isinstance(buf, bytes | bytearray):
        data, view, start, end = buf, memoryview(buf), section_start, section_end
    else:  # parse a bytes copy (faster to index), slice the caller's memory
        view = memoryview(buf)[section_start:section_end]
        data, start, end = view.tobytes(), 0, section_end - section_start
    append_time = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
    if copy:  # slicing the bytes being parsed gives bytes (same indexes as the view)
        view = data  # type: ignore[assignment]
    records = _decode_records(
        data, view, start, end, header.records_count, header.base_offset,
        header.base_timestamp, append_time,
    )
    return DecodedBatch(header, records)


def _decode_records(
    data: bytes | bytearray,
    view: memoryview,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    append_time: int | None,
) -> list[Record]:
    """The hot loop: varints decoded inline on their 1-byte fast path."""
    records: list[Record] = []
    append = records.append
    new_record = tuple.__new__  # skips NamedTuple's keyword-handling __new__
    try:
        for _ in range(count):
            byte = data[pos]
            if byte < 0x80:
                length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            elif data[pos + 1] < 0x80:  # 2-byte lengths (64..8191) are the common case
                raw_length = (byte & 0x7F) | (data[pos + 1] << 7)
                length, pos = (raw_length >> 1) ^ -(raw_length & 1), pos + 2
            else:
                length, pos = read_varint(data, pos)
            record_end = pos + length
            if length < 6 or record_end > end:  # 6: attributes + five 1-byte varints
                raise _corrupt(f"record length {length} out of bounds")
            pos += 1  # record attributes, unused
            byte = data[pos]
            if byte < 0x80:
                timestamp_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                timestamp_delta, pos = read_varlong(data, pos)
            byte = data[pos]
            if byte < 0x80:
                offset_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                offset_delta, pos = read_varint(data, pos)
            byte = data[pos]
            if byte < 0x80:
                key_length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                key_length, pos = read_varint(data, pos)
            if key_length >= 0:
                if pos + key_length > record_end:
                    raise _corrupt("record key overruns its record")
                key: memoryview | None = view[pos : pos + key_length]
                pos += key_length
            elif key_length == -1:
                key = None
            else:
                raise _corrupt(f"negative key length {key_length}")
            byte = data[pos]
            if byte < 0x80:
                value_length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            elif data[pos + 1] < 0x80:
                raw_length = (byte & 0x7F) | (data[pos + 1] << 7)
                value_length, pos = (raw_length >> 1) ^ -(raw_length & 1), pos + 2
            else:
                value_length, pos = read_varint(data, pos)
            if value_length >= 0:
                if pos + value_length > record_end:
                    raise _corrupt("record value overruns its record")
                value: memoryview | None = view[pos : pos + value_length]
                pos += value_length
            elif value_length == -1:
                value = None
            else:
                raise _corrupt(f"negative value length {value_length}")
            header_count = data[pos]
            if header_count == 0:
                headers: Sequence[tuple[str, memoryview | None]] = _NO_HEADERS
                pos += 1
            else:
                headers, pos = _decode_headers(data, view, pos, record_end)
            if pos != record_end:
                raise _corrupt("record length disagrees with its fields")
            append(new_record(Record, (
                base_offset + offset_delta,
                base_timestamp + timestamp_delta if append_time is None else append_time,
                key, value, headers,
            )))
    except IndexError:
        raise _corrupt("records section truncated") from None
    if pos != end:
        raise _corrupt(f"{end - pos} bytes left after {count} records")
    return records


def _decode_headers(
    data: bytes | bytearray, view: memoryview, pos: int, record_end: int
) -> tuple[list[tuple[str, memoryview | None]], int]:
    count, pos = read_varint(data, pos)
    if count < 0 or count > record_end - pos:
        raise _corrupt(f"header count {count} out of bounds")
    headers: list[tuple[str, memoryview | None]] = []
    for _ in range(count):
        key_length, pos = read_varint(data, pos)
        if key_length < 0 or pos + key_length > record_end:
            raise _corrupt(f"header key length {key_length} out of bounds")
        try:
            key = bytes(view[pos : pos + key_length]).decode()
        except UnicodeDecodeError as exc:
            raise _corrupt("header key is not UTF-8") from exc
        pos += key_length
        value_length, pos = read_varint(data, pos)
        if value_length == -1:
            headers.append((key, None))
            continue
        if value_length < 0 or pos + value_length > record_end:
            raise _corrupt(f"header value length {value_length} out of bounds")
        headers.append((key, view[pos : pos + value_length]))
        pos += value_length
    return headers, pos


# --- control records ----------------------------------------------------------------


class ControlRecordType(IntEnum):
    """Kafka's ``ControlRecordType``; only ABORT and COMMIT end transactions."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class ControlRecord(NamedTuple):
    type: ControlRecordType | int  # an int for types newer than this code; skip those
    version: int
    coordinator_epoch: int | None  # the end-transaction marker's; None for other types


def parse_control_record(key: Buffer | None, value: Buffer | None) -> ControlRecord:
    """Parse a control record's key (and, for commit/abort, its marker value)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise _corrupt("control record key shorter than 4 bytes")
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise _corrupt(f"negative control record version {version}")
    known = type_id in ControlRecordType._value2member_map_
    control_type = ControlRecordType(type_id) if known else type_id
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return ControlRecord(control_type, version, None)
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise _corrupt("end-transaction marker shorter than 6 bytes")
    marker_version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if marker_version < 0:
        raise _corrupt(f"negative end-transaction marker version {marker_version}")
    return ControlRecord(control_type, version, coordinator_epoch)


def build_control_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytearray:
    """A transaction marker batch, as the transaction coordinator asks leaders to write."""
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError("only ABORT and COMMIT markers are written by brokers")
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )
    builder.append(
        _CONTROL_KEY.pack(0, control_type),
        _END_TXN_MARKER.pack(0, coordinator_epoch),
        (),
        timestamp,
    )
    return builder.build()


END_TXN_MARKER_SIZE: Final = 78  # a 61-byte batch header and one 17-byte record


def build_end_txn_marker(producer_id: int, producer_epoch: int, commit: bool,
                         coordinator_epoch: int, timestamp_ms: int) -> bytearray:
    """The COMMIT or ABORT marker a partition leader appends for a producer's transaction
    (Kafka's ``MemoryRecords.withEndTransactionMarker``): a transactional control batch,
    base sequence -1, one record; offsets and the leader epoch are the log's to assign.
    Always ``END_TXN_MARKER_SIZE`` bytes."""
    return build_control_batch(
        ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
        producer_id=producer_id, producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch, timestamp=timestamp_ms)


__all__ = [
    "DEFAULT_MAX_UNCOMPRESSED_SIZE", "END_TXN_MARKER_SIZE", "Buffer", "BuilderOptions", "ControlRecord",
    "ControlRecordType", "DecodedBatch", "HeaderInput", "Record", "RecordBatchBuilder", "RecordInput", "TimestampType",
    "build_control_batch", "build_end_txn_marker", "build_record_batch", "decode_batch", "parse_control_record",
]
