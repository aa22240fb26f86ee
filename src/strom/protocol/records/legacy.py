"""Legacy message sets, magic 0 and 1: what pre-0.11 clients produce and fetch.

A message set is a plain concatenation of entries; each is::

    offset       int64   0
    message_size int32   8    bytes that follow (entry size = message_size + 12)
    crc          uint32  12   CRC-32 (zlib.crc32, IEEE polynomial) over bytes 16..end
    magic        int8    16   0 or 1
    attributes   int8    17   bits 0-2 codec, bit 3 timestamp type (v1 only)
    timestamp    int64   18   v1 only: ms since the epoch, -1 if none
    key_length   int32        at 18 (v0) / 26 (v1); -1 = null
    key          bytes
    value_length int32        -1 = null
    value        bytes

The CRC covers magic through the end of the value; offset and size are outside it.

Compression wraps a whole inner message set: the wrapper's value is that set,
compressed with the codec in the wrapper's attributes; inner messages are
uncompressed and of the wrapper's magic (never nested). The wrapper's offset is the
offset of its LAST inner message. Inner offsets are absolute in v0, so assigning
offsets means rewriting them and recompressing. In v1 they are relative (0, 1, ...),
so the absolute offset of an inner message is ``wrapper_offset - last_relative +
relative`` and a broker assigns offsets by rewriting the wrapper's offset alone. With a
v1 LogAppendTime wrapper, every inner message takes the wrapper's timestamp. A v0
lz4 wrapper carries Kafka's pre-0.10 frame header checksum (see ``compression``).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import Final

from strom.protocol.compression import CompressionType, compress, decompress
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.records.header import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    LEGACY_CRC_OFFSET,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    BatchHeader,
    TimestampType,
    read_batch_header,
    validate_crc,
)
from strom.protocol.records.v2 import DEFAULT_MAX_UNCOMPRESSED_SIZE, Record

Buffer = bytes | bytearray | memoryview
LegacyRecordInput = tuple[Buffer | None, Buffer | None, int | None]

_V0_PREFIX: Final = struct.Struct(">qiIbb")
_V1_PREFIX: Final = struct.Struct(">qiIbbq")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_UINT32: Final = struct.Struct(">I")


def _corrupt(reason: str) -> ProtocolError:
    return ProtocolError(reason, error_code=ErrorCode.CORRUPT_MESSAGE)


# --- writing ------------------------------------------------------------------------


def append_message(
    out: bytearray,
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: Buffer | None,
    value: Buffer | None,
) -> None:
    """Write one message at the end of ``out``, CRC included."""
    start = len(out)
    key_size = -1 if key is None else len(key)
    value_size = -1 if value is None else len(value)
    body = 8 + max(key_size, 0) + max(value_size, 0)
    if magic == 1:
        out += _V1_PREFIX.pack(offset, 14 + body, 0, 1, attributes, timestamp)
    elif magic == 0:
        out += _V0_PREFIX.pack(offset, 6 + body, 0, 0, attributes)
    else:
        raise ValueError(f"legacy messages have magic 0 or 1, not {magic}")
    out += _INT32.pack(key_size)
    if key is not None:
        out += key
    out += _INT32.pack(value_size)
    if value is not None:
        out += value
    with memoryview(out) as view:
        crc = zlib.crc32(view[start + MAGIC_OFFSET :])
    _UINT32.pack_into(out, start + LEGACY_CRC_OFFSET, crc)


def build_message_set(
    records: Iterable[LegacyRecordInput],
    *,
    magic: int,
    compression: CompressionType = CompressionType.NONE,
    base_offset: int = 0,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytearray:
    """Write ``(key, value, timestamp)`` records as a v0/v1 message set.

    Compressed, the set is one wrapper whose inner offsets are absolute (v0) or
    relative (v1) and whose offset is the last record's. v0 drops timestamps.
    """
    if compression == CompressionType.ZSTD:
        raise ValueError("Kafka allows zstd only in magic 2 batches")
    log_append = magic == 1 and timestamp_type == TimestampType.LOG_APPEND_TIME
    type_bit = ATTR_TIMESTAMP_TYPE if log_append else 0
    inner = bytearray()
    count = 0
    max_timestamp = NO_TIMESTAMP
    compressed = compression != CompressionType.NONE
    for key, value, timestamp in records:
        stamp = NO_TIMESTAMP if timestamp is None or magic == 0 else timestamp
        max_timestamp = max(max_timestamp, stamp)
        offset = count if compressed and magic == 1 else base_offset + count
        append_message(inner, offset, magic, 0 if compressed else type_bit, stamp, key, value)
        count += 1
    if not compressed:
        return inner
    if count == 0:
        raise ValueError("a compressed wrapper needs at least one message")
    out = bytearray()
    packed = compress(compression, inner, legacy_lz4=magic == 0)
    append_message(
        out, base_offset + count - 1, magic, int(compression) | type_bit,
        max_timestamp, None, packed,
    )
    return out


# --- reading ------------------------------------------------------------------------


def _entries(buf: Buffer, *, verify_crc: bool) -> Iterator[tuple[int, BatchHeader]]:
    """Every entry of a set that must be whole (a wrapper's inner set)."""
    pos = 0
    while pos < len(buf):
        header = validate_crc(buf, pos) if verify_crc else read_batch_header(buf, pos)
        yield pos, header
        pos += header.size


def _key_value(
    view: memoryview, pos: int, header: BatchHeader
) -> tuple[memoryview | None, memoryview | None]:
    at = pos + (26 if header.magic == 1 else 18)
    end = pos + header.size
    fields: list[memoryview | None] = []
    for _ in range(2):
        if at + 4 > end:
            raise _corrupt("message key/value length overruns the message")
        (size,) = _INT32.unpack_from(view, at)
        at += 4
        if size == -1:
            fields.append(None)
            continue
        if size < 0 or at + size > end:
            raise _corrupt(f"message field length {size} out of bounds")
        fields.append(view[at : at + size])
        at += size
    if at != end:
        raise _corrupt("message size disagrees with its fields")
    return fields[0], fields[1]


def decode_message(
    buf: Buffer,
    pos: int = 0,
    *,
    max_uncompressed_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE,
    verify_crc: bool = True,
) -> list[Record]:
    """Records of the v0/v1 entry at ``pos``: itself, or a wrapper's inner messages."""
    header = validate_crc(buf, pos) if verify_crc else read_batch_header(buf, pos)
    if header.magic == 2:
        raise ValueError("a v2 batch; use v2.decode_batch")
    view = memoryview(buf)
    key, value = _key_value(view, pos, header)
    codec = header.compression
    if codec == CompressionType.NONE:
        return [Record(header.base_offset, header.max_timestamp, key, value, ())]
    if value is None:
        raise _corrupt("compressed wrapper message without a value")
    inner = decompress(codec, value, max_uncompressed_size, legacy_lz4=header.magic == 0)
    inner_view = memoryview(inner)
    entries = list(_entries(inner, verify_crc=verify_crc))
    if not entries:
        raise _corrupt("compressed wrapper holds no messages")
    for _, entry in entries:
        if entry.magic != header.magic or entry.attributes & ATTR_COMPRESSION_MASK:
            raise _corrupt("inner message is compressed or of another magic")
    # As Java's DeepRecordsIterator: a negative base (a producer's wrapper, offset 0,
    # before a broker assigned offsets) leaves the relative offsets as they are.
    base = header.base_offset - entries[-1][1].base_offset if header.magic == 1 else 0
    base = max(base, 0)
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    records = []
    for inner_pos, entry in entries:
        inner_key, inner_value = _key_value(inner_view, inner_pos, entry)
        timestamp = header.max_timestamp if log_append else entry.max_timestamp
        records.append(Record(base + entry.base_offset, timestamp, inner_key, inner_value, ()))
    return records


# --- offset assignment --------------------------------------------------------------


def assign_offsets(
    buf: Buffer,
    base_offset: int,
    *,
    max_uncompressed_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE,
) -> tuple[bytearray, int]:
    """Give a v0/v1 message set consecutive offsets from ``base_offset``.

    Returns the rewritten set and the next offset. Plain messages and v1 wrappers
    whose inner offsets already are 0..n-1 only get their offset field rewritten (no
    CRC covers it); a v0 wrapper, or a v1 wrapper with irregular inner offsets, is
    decompressed, its inner offset fields patched (outside the inner CRCs too) and
    recompressed into a new wrapper with a new CRC. Records are never decoded.
    """
    out = bytearray()
    next_offset = base_offset
    view = memoryview(buf)
    for pos, header in _entries(buf, verify_crc=True):
        if header.magic == 2:
            raise ValueError("a v2 batch in a legacy message set")
        start = len(out)
        if not header.attributes & ATTR_COMPRESSION_MASK:
            out += view[pos : pos + header.size]
            _INT64.pack_into(out, start, next_offset)
            next_offset += 1
            continue
        count = _rewrite_wrapper(view, pos, header, next_offset, out, max_uncompressed_size)
        next_offset += count
    return out, next_offset


def _rewrite_wrapper(
    view: memoryview,
    pos: int,
    header: BatchHeader,
    first_offset: int,
    out: bytearray,
    max_uncompressed_size: int,
) -> int:
    key, value = _key_value(view, pos, header)
    if value is None:
        raise _corrupt("compressed wrapper message without a value")
    codec = header.compression
    legacy_lz4 = header.magic == 0
    inner = bytearray(decompress(codec, value, max_uncompressed_size, legacy_lz4=legacy_lz4))
    positions = [inner_pos for inner_pos, _ in _entries(inner, verify_crc=True)]
    if not positions:
        raise _corrupt("compressed wrapper holds no messages")
    count = len(positions)
    wants = (
        range(count) if header.magic == 1 else range(first_offset, first_offset + count)
    )
    stored = [_INT64.unpack_from(inner, inner_pos)[0] for inner_pos in positions]
    if header.magic == 1 and stored == list(wants):
        start = len(out)
        out += view[pos : pos + header.size]
        _INT64.pack_into(out, start, first_offset + count - 1)
        return count
    for inner_pos, offset in zip(positions, wants, strict=True):
        _INT64.pack_into(inner, inner_pos, offset)
    append_message(
        out, first_offset + count - 1, header.magic, header.attributes,
        header.max_timestamp, key, compress(codec, inner, legacy_lz4=legacy_lz4),
    )
    return count
