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

# Per record of the scanned sections, in arena order (the walker's columns).
RecordArrays = RecordColumns


def scan_sections(arena: Buffer, spans: list[tuple[int, int]]) -> RecordArrays:
    """Every record of the record sections ``arena[start:end]`` (one per batch)."""
    return scan_records(ArenaView.of(arena), spans)


def hash_keys(arena: Buffer, key_start: Int64s, key_length: Int64s) -> KeyHashes:
    """XXH3-128 of each key (all of them non-null), as fingerprint arrays."""
    return KeyHashes(*xxh3_128(arena, key_start, key_length))


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
