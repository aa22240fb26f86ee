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


def has_keyless_record(records: Buffer, max_uncompressed_size: int = 1 << 31) -> bool:
    """Whether any data record in a produce's record set has a null key.

    A compacted topic refuses such a set whole (Kafka's ``INVALID_RECORD``). v2 key
    lengths are read vectorised, compressed sections inflated first; v0/v1 messages
    are decoded (old clients only). Raises ``ProtocolError`` for a malformed set.
    """
    view = memoryview(records)
    pieces: list[tuple[Buffer, int, int]] = []
    for position, header in iter_batches(records):
        if header.magic < 2:
            if any(message.key is None for message in decode_message(
                    records, position, max_uncompressed_size=max_uncompressed_size)):
                return True
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
    if not pieces:
        return False
    arena, spans = join_sections(pieces)
    return bool((scan_sections(arena, spans).key_length < 0).any())
