"""Batch headers: what the broker reads, checks and rewrites without decoding records.

Every Kafka log entry, whatever its magic, starts with the same 17 bytes::

    offset        int64   0   v2: base offset; v0/v1: the message's offset (a compressed
                              wrapper's is the offset of its LAST inner message)
    length        int32   8   bytes that follow this field; entry size = length + 12
    (v2) partition_leader_epoch int32 12  |  (v0/v1) crc uint32 12
    magic         int8   16

RecordBatch v2 (magic 2) then continues, 61 bytes of header in all::

    crc                   uint32 17   CRC-32C (Castagnoli) over bytes 21..end
    attributes            int16  21   bits 0-2 codec, 3 timestamp type (1 = LogAppendTime),
                                      4 transactional, 5 control, 6 has delete horizon
    last_offset_delta     int32  23
    base_timestamp        int64  27   (the delete horizon when bit 6 is set)
    max_timestamp         int64  35
    producer_id           int64  43
    producer_epoch        int16  51
    base_sequence         int32  53
    records_count         int32  57
    records                      61

The v2 CRC leaves out base offset, length, partition leader epoch and magic, so the
broker assigns offsets and stamps the leader epoch without recomputing it; setting
LogAppendTime changes covered bytes and does recompute it.

Message v0/v1 (magic 0/1)::

    crc          uint32 12   CRC-32 (zlib's, IEEE) over bytes 16..end: magic to value
    magic        int8   16
    attributes   int8   17   bits 0-2 codec, bit 3 timestamp type (v1 only)
    timestamp    int64  18   v1 only
    key          int32 length (-1 = null) + bytes    at 18 (v0) / 26 (v1)
    value        int32 length (-1 = null) + bytes

The offset and length are outside every magic's CRC. A compressed v0/v1 message is a
wrapper whose value is a compressed message set; see ``legacy``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from enum import IntEnum
from typing import Final, NamedTuple

from strom.protocol.compression import CompressionType
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError

Buffer = bytes | bytearray | memoryview
WritableBuffer = bytearray | memoryview

LOG_OVERHEAD: Final = 12  # offset + length, before every entry of every magic
MAGIC_OFFSET: Final = 16
V2_HEADER_SIZE: Final = 61
V2_CRC_OFFSET: Final = 17
V2_ATTRIBUTES_OFFSET: Final = 21
V2_MAX_TIMESTAMP_OFFSET: Final = 35
LEGACY_CRC_OFFSET: Final = 12
V0_HEADER_SIZE: Final = 26  # through the value length field
V1_HEADER_SIZE: Final = 34
# Smallest legal length field per magic (header size minus LOG_OVERHEAD).
MIN_LENGTH: Final = (V0_HEADER_SIZE - 12, V1_HEADER_SIZE - 12, V2_HEADER_SIZE - 12)

ATTR_COMPRESSION_MASK: Final = 0x07
ATTR_TIMESTAMP_TYPE: Final = 0x08
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20
ATTR_DELETE_HORIZON: Final = 0x40

NO_TIMESTAMP: Final = -1

_V2_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_PREFIX: Final = struct.Struct(">qi")
_LEGACY_V0: Final = struct.Struct(">qiIbb")
_LEGACY_V1: Final = struct.Struct(">qiIbbq")
_INT64: Final = struct.Struct(">q")
_UINT32: Final = struct.Struct(">I")
_INT16: Final = struct.Struct(">h")


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1  # magic 0
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """The fixed fields of one log entry, read without touching its records.

    For magic 0/1 the fields v2 added hold their "absent" values (-1), ``crc`` is the
    CRC-32 of the message, ``base_offset`` is the stored offset (the last inner offset
    of a compressed wrapper) and ``records_count`` is 1 for a plain message and -1
    for a compressed wrapper, whose count is only known after decompressing it.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> CompressionType:
        return CompressionType.from_attributes(self.attributes)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & ATTR_TIMESTAMP_TYPE:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes the whole entry takes, offset and length fields included."""
        return self.batch_length + LOG_OVERHEAD


_make_header: Final = BatchHeader._make
_V2_MIN_LENGTH: Final = MIN_LENGTH[2]


def _corrupt(reason: str) -> ProtocolError:
    return ProtocolError(reason, error_code=ErrorCode.CORRUPT_MESSAGE)


def _check_length(
    buf: Buffer, pos: int, batch_length: int, magic: int, max_batch_size: int | None
) -> None:
    if magic > 2 or magic < 0:
        raise _corrupt(f"unknown magic {magic} at position {pos}")
    if batch_length < MIN_LENGTH[magic]:
        raise _corrupt(f"batch length {batch_length} at position {pos} is impossible")
    if max_batch_size is not None and batch_length + LOG_OVERHEAD > max_batch_size:
        raise ProtocolError(
            f"batch of {batch_length + LOG_OVERHEAD} bytes exceeds the maximum {max_batch_size}",
            error_code=ErrorCode.MESSAGE_TOO_LARGE,
        )
    if pos + LOG_OVERHEAD + batch_length > len(buf):
        raise _corrupt(
            f"batch at position {pos} claims {batch_length} bytes, buffer has "
            f"{len(buf) - pos - LOG_OVERHEAD}"
        )


def read_batch_header(
    buf: Buffer, pos: int = 0, *, max_batch_size: int | None = None
) -> BatchHeader:
    """Parse the entry at ``pos``; its whole length must lie inside ``buf``."""
    if pos < 0 or pos + MAGIC_OFFSET + 1 > len(buf):
        raise _corrupt(f"truncated batch header at position {pos}")
    magic = buf[pos + MAGIC_OFFSET]
    if magic == 2:
        if pos + V2_HEADER_SIZE > len(buf):
            raise _corrupt(f"truncated batch header at position {pos}")
        header = _make_header(_V2_HEADER.unpack_from(buf, pos))
        batch_length = header.batch_length
        if (  # _check_length's conditions, inline: this runs for every batch produced
            batch_length < _V2_MIN_LENGTH
            or pos + LOG_OVERHEAD + batch_length > len(buf)
            or (max_batch_size is not None and batch_length + LOG_OVERHEAD > max_batch_size)
        ):
            _check_length(buf, pos, batch_length, 2, max_batch_size)  # raises, saying which
        if header.records_count < 0 or header.last_offset_delta < -1:
            raise _corrupt(f"negative record count or offset delta at position {pos}")
        return header
    base_offset, batch_length = _PREFIX.unpack_from(buf, pos)
    _check_length(buf, pos, batch_length, magic, max_batch_size)
    if magic == 1:
        _, _, crc, _, attributes, timestamp = _LEGACY_V1.unpack_from(buf, pos)
    else:
        _, _, crc, _, attributes = _LEGACY_V0.unpack_from(buf, pos)
        timestamp = NO_TIMESTAMP
    attributes &= 0xFF
    count = -1 if attributes & ATTR_COMPRESSION_MASK else 1
    return BatchHeader(
        base_offset, batch_length, -1, magic, crc, attributes, 0,
        timestamp, timestamp, -1, -1, -1, count,
    )


def compute_crc(buf: Buffer, pos: int, header: BatchHeader) -> int:
    """The CRC the entry at ``pos`` should carry, over exactly the bytes its magic covers."""
    end = pos + header.batch_length + LOG_OVERHEAD
    with memoryview(buf) as view:
        if header.magic == 2:
            # The crc32c package reads its own version through importlib.metadata (~30 ms,
            # a tenth of strom serve's start-up): imported by the first checksum, not at start.
            from crc32c import crc32c

            return int(crc32c(view[pos + V2_ATTRIBUTES_OFFSET : end]))
        return zlib.crc32(view[pos + MAGIC_OFFSET : end])


def validate_crc(buf: Buffer, pos: int = 0, *, max_batch_size: int | None = None) -> BatchHeader:
    """Check the entry's CRC; return its header so callers need not parse it twice."""
    header = read_batch_header(buf, pos, max_batch_size=max_batch_size)
    if compute_crc(buf, pos, header) != header.crc:
        raise _corrupt(f"CRC mismatch in batch at position {pos} (offset {header.base_offset})")
    return header


def iter_batches(
    buf: Buffer, pos: int = 0, *, max_batch_size: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each whole entry in ``buf``.

    A fetch response may end with a partial entry (the broker cuts at the byte
    limit); iteration stops there, as Kafka clients do. An impossible length is
    corruption, not truncation, and raises.
    """
    end = len(buf)
    while pos + MAGIC_OFFSET + 1 <= end:
        batch_length = _PREFIX.unpack_from(buf, pos)[1]
        magic = buf[pos + MAGIC_OFFSET]
        if (
            magic > 2
            or batch_length < MIN_LENGTH[magic]
            or (max_batch_size is not None and batch_length + LOG_OVERHEAD > max_batch_size)
        ):
            _check_length(buf, pos, batch_length, magic, max_batch_size)  # raises
        if pos + LOG_OVERHEAD + batch_length > end:
            return
        header = read_batch_header(buf, pos)
        yield pos, header
        pos += header.size


def set_base_offset(buf: WritableBuffer, pos: int, base_offset: int) -> None:
    """Assign the entry's offset in place; no CRC of any magic covers it.

    For v2 this is the batch's base offset. For a v0/v1 plain message it is the
    message's offset; a compressed v0/v1 wrapper needs ``legacy.assign_offsets``.
    """
    header = read_batch_header(buf, pos)
    if header.magic < 2 and header.attributes & ATTR_COMPRESSION_MASK:
        raise ValueError("a compressed v0/v1 wrapper needs legacy.assign_offsets")
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Stamp a v2 batch with the leader's epoch; outside the CRC like the offset."""
    header = read_batch_header(buf, pos)
    if header.magic != 2:
        raise ValueError(f"magic {header.magic} has no partition leader epoch")
    struct.pack_into(">i", buf, pos + LOG_OVERHEAD, epoch)


def set_log_append_time(buf: WritableBuffer, pos: int, timestamp: int) -> None:
    """Mark the entry LogAppendTime with ``timestamp`` and recompute its CRC.

    v2: sets attribute bit 3 and max_timestamp; readers then give every record that
    timestamp. v1: sets bit 3 and the message's (or wrapper's) timestamp. v0 has no
    timestamps. Records are not decoded in either case.
    """
    header = read_batch_header(buf, pos)
    if header.magic == 2:
        attributes = header.attributes | ATTR_TIMESTAMP_TYPE
        _INT16.pack_into(buf, pos + V2_ATTRIBUTES_OFFSET, attributes)
        _INT64.pack_into(buf, pos + V2_MAX_TIMESTAMP_OFFSET, timestamp)
        _UINT32.pack_into(buf, pos + V2_CRC_OFFSET, compute_crc(buf, pos, header))
    elif header.magic == 1:
        buf[pos + MAGIC_OFFSET + 1] = header.attributes | ATTR_TIMESTAMP_TYPE
        _INT64.pack_into(buf, pos + MAGIC_OFFSET + 2, timestamp)
        _UINT32.pack_into(buf, pos + LEGACY_CRC_OFFSET, compute_crc(buf, pos, header))
    else:
        raise ValueError("magic 0 messages carry no timestamp")
