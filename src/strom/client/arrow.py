"""Fetched record data to Arrow: what ``poll_arrow()`` and the Spark source are built on.

The output has the schema of Spark's Kafka source (``key binary, value binary, topic
string, partition int, offset long, timestamp timestamp, timestampType int`` and, when
asked, ``headers array<struct<key string, value binary>>``). ``timestamp`` is
``timestamp[us, tz=UTC]`` because Spark's ArrowUtils maps ``TimestampType`` to Arrow
``Timestamp(MICROSECOND, <zone>)`` both ways: milliseconds would need a cast, and a
zoneless timestamp would arrive as ``TimestampNTZType``. Kafka timestamps beyond the
int64 microsecond range (year +-292,000) become nulls.

No Python object is made per record. A fetch is decoded in three steps:

1. Per batch (Python): header, CRC, aborted transactions, control batches, offset
   range, decompression. The record sections to decode are gathered in one buffer,
   the "arena" (the fetch itself when nothing was compressed).
2. Record starts and fields, by the columnar record walker the log cleaner shares
   (``strom.protocol.records.columnar``): one table lookup per record (runs of
   equal-size records counted in C), then numpy over all records of the fetch at once.
3. Headers (when asked) in vectorised rounds, and key/value/header columns cut out of
   the arena by Arrow's ``take``.

Validation matches ``strom.protocol.records.decode_records`` (CRC, field bounds, record
lengths and counts), except that without ``include_headers`` headers are not parsed,
only bounded by their record's length.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from strom.client.read_committed import AbortedTransactionLike, AbortFilter
from strom.protocol.compression import CompressionType, decompress
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.records.columnar import (
    ArenaView,
    RecordColumns,
    join_sections,
    scan_records,
    sized_field,
)
from strom.protocol.records.header import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    V2_HEADER_SIZE,
    BatchHeader,
    compute_crc,
    iter_batches,
)
from strom.protocol.records.legacy import decode_message
from strom.protocol.records.v2 import (
    DEFAULT_MAX_UNCOMPRESSED_SIZE,
)
from strom.protocol.records.varint_arrays import long_varints

Buffer = bytes | bytearray | memoryview
Int64s = npt.NDArray[np.int64]

HEADERS_TYPE: Final = pa.list_(
    pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
)
KAFKA_SCHEMA: Final = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
])
KAFKA_SCHEMA_WITH_HEADERS: Final = KAFKA_SCHEMA.append(pa.field("headers", HEADERS_TYPE))

_MAX_TIMESTAMP_MS: Final = np.iinfo(np.int64).max // 1000
_INT32_LIMIT: Final = 1 << 31




def kafka_schema(include_headers: bool = False) -> pa.Schema:
    return KAFKA_SCHEMA_WITH_HEADERS if include_headers else KAFKA_SCHEMA


def _corrupt(reason: str) -> ProtocolError:
    return ProtocolError(reason, error_code=ErrorCode.CORRUPT_MESSAGE)


class _Sections:
    """The v2 batches of a fetch to decode, in order: headers and record sections."""

    def __init__(self) -> None:
        self.pieces: list[tuple[Buffer, int, int]] = []  # (buffer, start, end)
        self.headers: list[BatchHeader] = []

    def field(self, values: Iterable[int]) -> Int64s:
        return np.fromiter(values, dtype=np.int64, count=len(self.headers))


def records_to_arrow(
    topic: str,
    partition: int,
    data: Buffer,
    *,
    start_offset: int = 0,
    end_offset: int | None = None,
    include_headers: bool = False,
    skip_control: bool = True,
    aborted: Iterable[AbortedTransactionLike] | None = None,
    verify_crc: bool = True,
    max_uncompressed_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE,
) -> pa.RecordBatch:
    """The records of a Fetch response partition's ``records`` bytes with offsets in
    ``[start_offset, end_offset)``, as one batch of ``kafka_schema(include_headers)``.

    A fetch returns whole batches, so the first may start before the fetch offset; a
    partial batch at the end (the broker cuts at its byte limit) is ignored. With
    ``aborted`` (the partition's aborted transactions, for READ_COMMITTED) records of
    aborted transactions are left out. Legacy (magic 0/1) entries take a slower path.
    """
    if not isinstance(data, bytes | bytearray):
        data = bytes(data)  # bytes index faster than a memoryview in the record walk
    aborts = AbortFilter(aborted) if aborted is not None else None
    parts: list[pa.RecordBatch] = []
    sections = _Sections()
    for pos, header in iter_batches(data):
        if verify_crc and compute_crc(data, pos, header) != header.crc:
            raise _corrupt(f"CRC mismatch in batch at position {pos} (offset {header.base_offset})")
        if header.magic < 2:
            if sections.pieces:
                parts.append(_decode_sections(
                    topic, partition, sections, start_offset, end_offset, include_headers
                ))
                sections = _Sections()
            parts.append(_decode_legacy(
                topic, partition, data, pos, header, start_offset, end_offset,
                include_headers, verify_crc, max_uncompressed_size,
            ))
            continue
        if aborts is not None and aborts.drops(data, pos, header):
            continue
        if (
            (skip_control and header.attributes & ATTR_CONTROL)
            or header.records_count == 0
            or header.last_offset < start_offset
            or (end_offset is not None and header.base_offset >= end_offset)
        ):
            continue
        start, end = pos + V2_HEADER_SIZE, pos + header.size
        codec = header.attributes & ATTR_COMPRESSION_MASK
        if codec:
            with memoryview(data) as view:
                inflated = decompress(
                    CompressionType.from_attributes(codec), view[start:end], max_uncompressed_size
                )
            sections.pieces.append((inflated, 0, len(inflated)))
        else:
            sections.pieces.append((data, start, end))
        sections.headers.append(header)
    if sections.pieces or not parts:
        parts.append(_decode_sections(
            topic, partition, sections, start_offset, end_offset, include_headers
        ))
    return parts[0] if len(parts) == 1 else _concat(parts, include_headers)


# --- step 3: headers and columns, vectorised -------------------------------------------
#
# Record starts and fields up to the value are the shared walker's
# (``strom.protocol.records.columnar``); headers are read here, in rounds.


class _Headers(NamedTuple):
    """Every header, in record order, as arena spans; record i has headers
    ``list_offsets[i]:list_offsets[i + 1]``."""

    list_offsets: Int64s
    key_start: Int64s
    key_length: Int64s
    value_start: Int64s
    value_length: Int64s


def _parse_headers(view: ArenaView, pos: Int64s, counts: Int64s) -> _Headers:
    """Headers in rounds: round j reads the j-th header of every record that has one."""
    list_offsets = np.concatenate(([0], np.cumsum(counts)))
    spans = np.empty((4, int(list_offsets[-1])), dtype=np.int64)
    active = np.flatnonzero(counts)
    at = pos[active]
    round_index = 0
    while active.size:
        key_start, key_length, at = sized_field(view, at, "header key")
        if key_length.min() < 0:
            raise _corrupt("null header key")
        value_start, value_length, at = sized_field(view, at, "header value")
        spans[:, list_offsets[active] + round_index] = (
            key_start, key_length, value_start, value_length
        )
        round_index += 1
        done = counts[active] == round_index
        pos[active[done]] = at[done]
        active, at = active[~done], at[~done]
    return _Headers(list_offsets, *spans)


def _parse_headers_or_bound(view: ArenaView, records: RecordColumns, include_headers: bool) -> _Headers | None:
    """Headers (when asked), after checking that the header count and headers end the record."""
    pos, end = records.after_value, records.end
    try:
        first = view.u8[pos]  # the header count; may be the arena's last byte
        if first.max(initial=0) < 0x80:
            header_count = (first >> 1).astype(np.int64) ^ -(first & 1).astype(np.int64)
            pos = pos + 1
        else:
            header_count, pos = long_varints(view.u8, pos, 5)
        if header_count.min(initial=0) < 0 or (header_count > end - pos).any():
            raise _corrupt("header count out of bounds")
        headers = None
        if include_headers:
            headers = _parse_headers(view, pos, header_count)
            overrun = pos != end
        else:  # headers unparsed: bounded by the record's length only
            overrun = (pos > end) | ((header_count == 0) & (pos != end))
    except IndexError:
        raise _corrupt("record fields overrun the records section") from None
    if overrun.any():
        raise _corrupt("record length disagrees with its fields")
    return headers


def _decode_sections(
    topic: str,
    partition: int,
    sections: _Sections,
    start_offset: int,
    end_offset: int | None,
    include_headers: bool,
) -> pa.RecordBatch:
    if not sections.pieces:
        return _empty(include_headers)
    arena, spans = join_sections(sections.pieces)
    view = ArenaView.of(arena)
    headers = sections.headers
    fields = scan_records(view, spans, [h.records_count for h in headers])
    header_spans = _parse_headers_or_bound(view, fields, include_headers)
    batch_of = fields.section
    offsets = sections.field(h.base_offset for h in headers)[batch_of] + fields.offset_delta
    timestamps = sections.field(h.base_timestamp for h in headers)[batch_of]
    timestamps += fields.timestamp_delta
    log_append = sections.field(h.attributes & ATTR_TIMESTAMP_TYPE for h in headers) != 0
    timestamp_type = log_append.astype(np.int32)[batch_of]
    if log_append.any():
        appended = timestamp_type == 1
        timestamps[appended] = sections.field(h.max_timestamp for h in headers)[batch_of[appended]]
    kept = offsets >= start_offset
    if end_offset is not None:
        kept &= offsets < end_offset
    columns: tuple[npt.NDArray[Any], ...] = (offsets, timestamps, timestamp_type, fields.key_start,
                                             fields.key_length, fields.value_start, fields.value_length)
    selection = None if kept.all() else np.flatnonzero(kept)
    if selection is not None:
        columns = tuple(column[selection] for column in columns)
    offsets, timestamps, timestamp_type, key_start, key_length, value_start, value_length = columns
    count, buffer = len(offsets), pa.py_buffer(arena)
    arrays = [
        _slices(buffer, len(arena), key_start, key_length),
        _slices(buffer, len(arena), value_start, value_length),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(offsets)]),
        _timestamps(timestamps),
        pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(timestamp_type)]),
    ]
    if header_spans is not None:
        header_column = _header_column(buffer, len(arena), header_spans)
        arrays.append(header_column if selection is None else header_column.take(selection))
    return pa.RecordBatch.from_arrays(arrays, schema=kafka_schema(include_headers))


# --- columns ------------------------------------------------------------------------


def _slices(buffer: pa.Buffer, size: int, starts: Int64s, lengths: Int64s) -> pa.Array:
    """A binary column of ``buffer[start:start + length]`` per row (length -1 = null).

    The fields lie in order in ``buffer``, so an array whose slots alternate between a
    field and the gap before the next is valid as it stands; ``take`` of its even slots
    copies the fields out in C, with no index array per byte.
    """
    count = len(starts)
    if count == 0:
        return pa.array([], type=pa.binary())
    ends = starts + np.maximum(lengths, 0)
    wide = size >= _INT32_LIMIT
    bounds = np.empty(2 * count + 1, dtype=np.int64 if wide else np.int32)
    bounds[0 : 2 * count : 2] = starts
    bounds[1 : 2 * count : 2] = ends
    bounds[2 * count] = ends[-1]
    spread = pa.Array.from_buffers(
        pa.large_binary() if wide else pa.binary(), 2 * count, [None, pa.py_buffer(bounds), buffer]
    )
    column = spread.take(pa.array(np.arange(0, 2 * count, 2, dtype=np.int64)))
    if wide:
        column = column.cast(pa.binary())
    nulls = lengths < 0
    if not nulls.any():
        return column
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(), count, [validity, *column.buffers()[1:]], null_count=int(nulls.sum())
    )


def _timestamps(millis: Int64s) -> pa.Array:
    count, validity, null_count = len(millis), None, 0
    if count and (millis.min() < -_MAX_TIMESTAMP_MS or millis.max() > _MAX_TIMESTAMP_MS):
        valid = (millis >= -_MAX_TIMESTAMP_MS) & (millis <= _MAX_TIMESTAMP_MS)
        millis = np.where(valid, millis, 0)
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        null_count = count - int(valid.sum())
    return pa.Array.from_buffers(
        KAFKA_SCHEMA.field("timestamp").type, count, [validity, pa.py_buffer(millis * 1000)],
        null_count=null_count,
    )


def _header_column(buffer: pa.Buffer, size: int, headers: _Headers) -> pa.Array:
    keys = _slices(buffer, size, headers.key_start, headers.key_length).view(pa.string())
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise _corrupt("header key is not UTF-8") from exc
    values = _slices(buffer, size, headers.value_start, headers.value_length)
    pairs = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    offsets = pa.array(headers.list_offsets.astype(np.int32))
    return pa.ListArray.from_arrays(offsets, pairs, type=HEADERS_TYPE)


def _empty(include_headers: bool) -> pa.RecordBatch:
    schema = kafka_schema(include_headers)
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)


def _concat(parts: list[pa.RecordBatch], include_headers: bool) -> pa.RecordBatch:
    batches = pa.Table.from_batches(parts).combine_chunks().to_batches()
    return batches[0] if batches else _empty(include_headers)


# --- legacy message sets ------------------------------------------------------------


def _decode_legacy(
    topic: str,
    partition: int,
    data: Buffer,
    pos: int,
    header: BatchHeader,
    start_offset: int,
    end_offset: int | None,
    include_headers: bool,
    verify_crc: bool,
    max_uncompressed_size: int,
) -> pa.RecordBatch:
    """A magic 0/1 entry, record by record: only pre-0.11 producers write these."""
    decoded = decode_message(
        data, pos, max_uncompressed_size=max_uncompressed_size, verify_crc=verify_crc
    )
    stop = 2**63 if end_offset is None else end_offset
    records = [r for r in decoded if start_offset <= r.offset < stop]
    timestamp_type = int(header.timestamp_type)  # -1 for magic 0: no timestamps
    count = len(records)
    columns = [
        pa.array([None if r.key is None else bytes(r.key) for r in records], pa.binary()),
        pa.array([None if r.value is None else bytes(r.value) for r in records], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pa.array([r.offset for r in records], pa.int64()),
        _timestamps(np.array([r.timestamp for r in records], dtype=np.int64)),
        pa.repeat(pa.scalar(timestamp_type, pa.int32()), count),
    ]
    if include_headers:
        columns.append(pa.array([[]] * count, HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=kafka_schema(include_headers))
