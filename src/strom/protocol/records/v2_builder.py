"""Building RecordBatch v2 (magic 2): the producer's batches, written once in ``build``.

The format is described in ``v2``. Records arrive one at a time (a producer's
``append``) or many at once (``extend``); ``build`` joins them after the 61-byte header,
compresses the records section if asked, and fills the header and CRC-32C.

A record is kept as pieces for one final ``join`` rather than copied into a growing
buffer: a key-less, header-less record with a ``bytes`` value is its length varint,
the attributes byte and timestamp delta (shared by a run of records of the same
millisecond), its offset delta with the null key, its value length, the caller's value
itself and the header count; every piece but the value is a cached ``bytes`` object,
so no object is made per record and nothing is encoded or copied until ``build``. Only
the record's exact encoded size is computed on the way in (``try_append`` must refuse a
record that would overflow the batch). Any other record (a key, headers, a
``bytearray`` or ``memoryview`` value the caller may change afterwards, a value of
8,000 bytes or more) is encoded into one ``bytes`` when appended.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final, TypedDict

from strom.protocol.compression import CompressionType, compress
from strom.protocol.records.header import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    V2_ATTRIBUTES_OFFSET,
    V2_CRC_OFFSET,
    V2_HEADER_SIZE,
    TimestampType,
)
from strom.protocol.records.varint import SMALL_VARINTS, SMALL_VARINTS_LIMIT, encode_varint

if TYPE_CHECKING:
    from typing_extensions import Unpack

Buffer = bytes | bytearray | memoryview
HeaderInput = tuple[str | bytes, Buffer | None]
RecordInput = tuple[Buffer | None, Buffer | None, Sequence[HeaderInput], int | None]

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_UINT32: Final = struct.Struct(">I")
_NO_LIMIT: Final = 1 << 62
_SMALL: Final = SMALL_VARINTS  # the varint bytes of 0 .. 8191
_SMALL_LIMIT: Final = SMALL_VARINTS_LIMIT
_time_ns: Final = time.time_ns
# A kept record's value is below this, so its body (value, its length varint, and at
# most 13 bytes of other fields) stays below 8192 and its length is one cached varint.
_KEPT_VALUE_LIMIT: Final = 8_000
# Sizes of the cached varints, and a value's size plus its length varint's.
_VARINT_SIZES: Final = [len(field) for field in _SMALL]
_VALUE_SIZES: Final = [size + _VARINT_SIZES[size] for size in range(_KEPT_VALUE_LIMIT)]
# The offset delta of record i followed by the null key's length (-1).
_OFFSETS_NULL_KEY: Final = [field + b"\x01" for field in _SMALL]
_HEADER_SLOT: Final = bytes(V2_HEADER_SIZE)


class RecordBatchBuilder:
    """One v2 batch, records appended until ``build``.

    No object per record is made beyond the caller's (see the module's docstring).
    ``size_in_bytes`` is exact at all times: what a producer compares with
    ``batch.size``.
    """

    __slots__ = (
        "_attributes", "_base_offset", "_base_sequence", "_base_timestamp", "_compression",
        "_count", "_max_timestamp", "_partition_leader_epoch", "_pieces", "_producer_epoch",
        "_producer_id", "_run_body", "_run_field", "_run_timestamp", "_size",
    )

    def __init__(
        self,
        *,
        compression: CompressionType = CompressionType.NONE,
        base_offset: int = 0,
        partition_leader_epoch: int = -1,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    ) -> None:
        self._compression = CompressionType(compression)
        self._attributes = (
            int(self._compression)
            | (ATTR_TIMESTAMP_TYPE if timestamp_type == TimestampType.LOG_APPEND_TIME else 0)
            | (ATTR_TRANSACTIONAL if is_transactional else 0)
            | (ATTR_CONTROL if is_control else 0)
        )
        self._base_offset = base_offset
        self._partition_leader_epoch = partition_leader_epoch
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._base_timestamp: int | None = None
        self._max_timestamp = -1
        self._count = 0
        self._size = V2_HEADER_SIZE
        self._pieces: list[bytes] = [_HEADER_SLOT]
        # The last kept record's timestamp, its attributes byte + timestamp delta varint,
        # and the size of those with the null key's length and the header count.
        self._run_timestamp: int | None = None
        self._run_field = b""
        self._run_body = 0

    def __len__(self) -> int:
        """Records appended so far."""
        return self._count

    @property
    def size_in_bytes(self) -> int:
        """Uncompressed size so far, header included: what a producer's linger checks."""
        return self._size

    def append(
        self,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[HeaderInput] = (),
        timestamp: int | None = None,
    ) -> None:
        """One record, whatever the batch's size (``try_append`` without a limit)."""
        self.try_append(key, value, headers, timestamp, _NO_LIMIT)

    def append_value(self, value: Buffer | None, limit: int) -> int:
        """``try_append(None, value, (), None, limit)``: a producer's key-less record now.

        The per-record path of ``produce``: a ``bytes`` value in the millisecond of the
        previous kept record costs a size count and six references. Returns the record
        count, 0 if refused.
        """
        timestamp = _time_ns() // 1_000_000
        count = self._count
        if timestamp != self._run_timestamp or type(value) is not bytes or count >= _SMALL_LIMIT:
            return self.try_append(None, value, (), timestamp, limit)
        size = len(value)
        if size >= _KEPT_VALUE_LIMIT:
            return self.try_append(None, value, (), timestamp, limit)
        body = self._run_body + _VARINT_SIZES[count] + _VALUE_SIZES[size]
        total = self._size + _VARINT_SIZES[body] + body
        if total > limit:
            return 0
        self._pieces += (_SMALL[body], self._run_field, _OFFSETS_NULL_KEY[count], _SMALL[size], value, b"\x00")
        self._size = total
        self._count = count = count + 1
        return count

    def try_append(
        self,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[HeaderInput],
        timestamp: int | None,
        limit: int,
    ) -> int:
        """Append one record unless it would take a non-empty batch past ``limit`` bytes.

        The record's exact encoded size is known before anything is kept (a batch's
        first record always goes in, however big). Returns the batch's record count
        after the append, 0 (false) if the record was refused.
        """
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        base = self._base_timestamp
        if base is None:
            base = timestamp
        delta = timestamp - base
        timestamp_field = _SMALL[delta] if 0 <= delta < _SMALL_LIMIT else encode_varint(delta)
        count = self._count
        if (key is None and not headers and type(value) is bytes and len(value) < _KEPT_VALUE_LIMIT
                and count < _SMALL_LIMIT):
            size = len(value)
            run_body = 3 + len(timestamp_field)
            body = run_body + _VARINT_SIZES[count] + _VALUE_SIZES[size]
            total = self._size + _VARINT_SIZES[body] + body
            if count and total > limit:
                return 0
            if timestamp != self._run_timestamp:
                self._run_timestamp = timestamp
                self._run_field = b"\x00" + timestamp_field
                self._run_body = run_body
            self._pieces += (_SMALL[body], self._run_field, _OFFSETS_NULL_KEY[count], _SMALL[size], value,
                             b"\x00")
        else:
            record = _encode_record(key, value, headers, timestamp_field, count)
            total = self._size + len(record)
            if count and total > limit:
                return 0
            self._pieces.append(record)
        self._size = total
        self._count = count = count + 1
        self._base_timestamp = base
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return count

    def extend(self, records: Iterable[RecordInput]) -> None:
        """Append ``(key, value, headers, timestamp)`` tuples; None timestamp = now."""
        for key, value, headers, timestamp in records:
            self.try_append(key, value, headers, timestamp, _NO_LIMIT)

    def build(self) -> bytearray:
        """Finish the batch; the builder must not be used afterwards."""
        if self._count == 0:
            raise ValueError("a record batch needs at least one record")
        pieces = self._pieces
        if self._compression != CompressionType.NONE:
            pieces[0] = b""
            out = bytearray(V2_HEADER_SIZE)
            out += compress(self._compression, b"".join(pieces))
        else:
            out = bytearray().join(pieces)  # one copy, header slot first
        base_timestamp = self._base_timestamp if self._base_timestamp is not None else -1
        _HEADER.pack_into(
            out, 0, self._base_offset, len(out) - 12, self._partition_leader_epoch, 2, 0,
            self._attributes, self._count - 1, base_timestamp, self._max_timestamp,
            self._producer_id, self._producer_epoch, self._base_sequence, self._count,
        )
        # The crc32c package reads its own version through importlib.metadata (~30 ms,
        # a tenth of strom serve's start-up): imported by the first checksum, not at start.
        from crc32c import crc32c

        with memoryview(out) as view:
            crc = crc32c(view[V2_ATTRIBUTES_OFFSET:])
        _UINT32.pack_into(out, V2_CRC_OFFSET, crc)
        return out


def _encode_record(
    key: Buffer | None, value: Buffer | None, headers: Sequence[HeaderInput], timestamp_field: bytes,
    offset_delta: int,
) -> bytes:
    """One whole record: length varint, then the fields (see ``v2``)."""
    small = _SMALL
    if key is None:
        key, key_field = b"", b"\x01"
    else:
        size = len(key)
        key_field = small[size] if size < _SMALL_LIMIT else encode_varint(size)
    if value is None:
        value, value_field = b"", b"\x01"
    else:
        size = len(value)
        value_field = small[size] if size < _SMALL_LIMIT else encode_varint(size)
    body = b"".join((
        b"\x00",  # attributes
        timestamp_field,
        small[offset_delta] if offset_delta < _SMALL_LIMIT else encode_varint(offset_delta),
        key_field, key, value_field, value,
        _encode_headers(headers) if headers else b"\x00",
    ))
    size = len(body)
    return (small[size] if size < _SMALL_LIMIT else encode_varint(size)) + body


def _encode_headers(headers: Sequence[HeaderInput]) -> bytes:
    parts = [encode_varint(len(headers))]
    for key, value in headers:
        raw_key = key.encode() if isinstance(key, str) else bytes(key)
        parts.append(encode_varint(len(raw_key)))
        parts.append(raw_key)
        if value is None:
            parts.append(encode_varint(-1))
        else:
            parts.append(encode_varint(len(value)))
            parts.append(bytes(value))
    return b"".join(parts)


class BuilderOptions(TypedDict, total=False):
    compression: CompressionType
    base_offset: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    timestamp_type: TimestampType


def build_record_batch(
    records: Iterable[RecordInput], **options: Unpack[BuilderOptions]
) -> bytearray:
    """One-call form of ``RecordBatchBuilder``; ``options`` are its keyword arguments."""
    builder = RecordBatchBuilder(**options)
    builder.extend(records)
    return builder.build()
