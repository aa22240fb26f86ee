"""Records of many v2 batches at once, as numpy arrays: what both cleaner passes read.

The cleaner needs, per record, only its byte span, its offset, whether it has a key
(and that key's hash) and whether its value is null (a tombstone). Records are found
and their fields read by the shared columnar walker
(``strom.protocol.records.columnar``, also behind the Arrow decoder), without a Python
object per record; keys are hashed here with XXH3-128 by numpy over all keys of the
arena (``key_hash``), as fingerprint words (``offset_map.KeyHashes``).

The walker checks the sections as far as the cleaner relies on them (record lengths
fill the section, fields stay inside their record); the batch CRCs were checked when
the batches were appended and again by the caller before any byte is rewritten.
"""

from __future__ import annotations

import numpy as np

from strom.compaction.key_hash import xxh3_128
from strom.compaction.offset_map import KeyHashes
from strom.protocol.compression import CompressionType, decompress
from strom.protocol.errors import ProtocolError
from strom.protocol.records import decode_message, iter_batches
from strom.protocol.records.columnar import (
    ArenaView,
    Buffer,
    Int64s,
    RecordColumns,
    join_sections,
    scan_records,
)
from strom.protocol.records.header import ATTR_COMPRESSION_MASK, V2_HEADER_SIZE
from strom.protocol.records.varint import read_varint, read_varlong

# Per record of the scanned sections, in arena order (the walker's columns).
RecordArrays = RecordColumns


def scan_sections(arena: Buffer, spans: list[tuple[int, int]]) -> RecordArrays:
    """Every record of the record sections ``arena[start:end]`` (one per batch)."""
    return scan_records(ArenaView.of(arena), spans)


def hash_keys(arena: Buffer, key_start: Int64s, key_length: Int64s) -> KeyHashes:
    """XXH3-128 of each key (all of them non-null), as fingerprint arrays."""
    return KeyHashes(*xxh3_128(arena, key_start, key_length))


# An uncompressed batch of at most this many records is walked in Python: setting up the
# vectorised scan costs ~75 µs, more than a walk of a few records (a group's offset commit
# or a transaction coordinator's record: every append to the compacted internal topics).
_FEW = 8


def _keyless_of_few(view: memoryview, start: int, end: int, count: int) -> list[int] | None:
    """The keyless records of one uncompressed section of ``count`` records, read as the
    vectorised scan reads them (length, attributes, deltas, key, value, then at least the
    header count's byte, records filling the section); None if anything is not so, and the
    vectorised scan then judges the section (and names what is corrupt)."""
    keyless: list[int] = []
    pos = start
    try:
        for index in range(count):
            length, body = read_varint(view, pos)
            record_end = body + length
            if length < 6 or record_end > end:
                return None
            _, field = read_varlong(view, body + 1)  # +1: the attributes byte
            _, field = read_varint(view, field)  # offset delta
            key_length, field = read_varint(view, field)
            if key_length < -1:
                return None
            if key_length < 0:
                keyless.append(index)
            value_length, field = read_varint(view, field + max(key_length, 0))
            if value_length < -1 or field + max(value_length, 0) >= record_end:
                return None
            pos = record_end
    except ProtocolError:
        return None
    return keyless if pos == end else None


def keyless_records(records: Buffer, max_uncompressed_size: int = 1 << 31) -> list[int]:
    """The index, counted over the set's data records, of each record with a null key.

    A compacted topic refuses a produce that has any (Kafka's ``INVALID_RECORD``) and
    names each of them in its answer (KIP-467), so the client fails those records and
    not their neighbours. From Produce v3 a set is one batch, so the index is the
    record's index in its batch, Kafka's ``batch_index``. v2 key lengths are read
    vectorised over all batches, compressed sections inflated first; v0/v1 messages are
    decoded (old clients only). Raises ``ProtocolError`` for a malformed set.
    """
    view = memoryview(records)
    pieces: list[tuple[Buffer, int, int]] = []
    first_index: list[int] = []  # of each v2 piece: its first record's index in the set
    sizes: list[int] = []  # of each v2 piece: its records
    keyless: list[int] = []
    counted = 0
    for position, header in iter_batches(records):
        if header.magic < 2:
            messages = decode_message(records, position, max_uncompressed_size=max_uncompressed_size)
            keyless += [counted + i for i, message in enumerate(messages) if message.key is None]
            counted += len(messages)
            continue
        if header.is_control or header.records_count == 0:
            continue
        start, end = position + V2_HEADER_SIZE, position + header.size
        codec = header.attributes & ATTR_COMPRESSION_MASK
        if not codec and header.records_count <= _FEW:
            found = _keyless_of_few(view, start, end, header.records_count)
            if found is not None:
                keyless += [counted + i for i in found]
                counted += header.records_count
                continue
        if codec:
            inflated = decompress(CompressionType(codec), view[start:end], max_uncompressed_size)
            pieces.append((inflated, 0, len(inflated)))
        else:
            pieces.append((records, start, end))
        first_index.append(counted)
        sizes.append(header.records_count)
        counted += header.records_count
    if not pieces:
        return keyless
    arena, spans = join_sections(pieces)
    scanned = scan_sections(arena, spans)
    missing = np.flatnonzero(scanned.key_length < 0)
    if not missing.size:
        return keyless
    # Scanned records run piece after piece; shift each to its piece's place in the set.
    ends = np.cumsum(sizes)
    piece = np.searchsorted(ends, missing, side="right")
    shift = np.array(first_index) - (ends - np.array(sizes))
    return sorted(keyless + (missing + shift[piece]).tolist())
