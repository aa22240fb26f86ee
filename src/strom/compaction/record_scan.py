"""Records of many v2 batches at once, as numpy arrays: what both cleaner passes read.

The cleaner needs, per record, only its byte span, its offset, whether it has a key
(and that key's hash) and whether its value is null (a tombstone). Records are
found without a Python object per record:

1. Record starts (the one sequential step: a record starts after the previous one's
   varint length): a Python loop with one table lookup per record, and runs of
   equal-size records counted by ``bytes.lstrip`` on a strided slice, in C.
2. Fields by numpy over every record of the arena: varints of 1-2 bytes by byte-pair
   tables, longer ones byte by byte over just those records.
3. Keys hashed with XXH3-128 by numpy over all keys of the arena (``key_hash``), as
   fingerprint words (``offset_map.KeyHashes``).

The record layout is in ``strom.protocol.records.v2``. Sections are checked as far as
the cleaner relies on them (record lengths fill the section, fields stay inside their
record); the batch CRCs were checked when the batches were appended and again by
the caller before any byte is rewritten.
"""

from __future__ import annotations

from array import array
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from strom.compaction.key_hash import xxh3_128
from strom.compaction.offset_map import KeyHashes
from strom.protocol.compression import CompressionType, decompress
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.records import decode_message, iter_batches
from strom.protocol.records.header import ATTR_COMPRESSION_MASK, V2_HEADER_SIZE
from strom.protocol.records.varint import read_varint
from strom.protocol.records.varint_arrays import (
    PAIR_SIZE,
    PAIR_VALUE,
    RECORD_STEP,
    SINGLE_BYTES,
    long_varints,
)

Buffer = bytes | bytearray | memoryview
Int64s = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


def _corrupt(reason: str) -> ProtocolError:
    return ProtocolError(reason, error_code=ErrorCode.CORRUPT_MESSAGE)




class RecordArrays(NamedTuple):
    """Per record of the scanned sections, in arena order."""

    start: Int64s  # record's first byte in the arena (its length varint)
    end: Int64s  # one past its last byte
    section: Int64s  # index of the section (batch) holding it
    offset_delta: Int64s
    key_start: Int64s
    key_length: Int64s  # -1: no key
    value_length: Int64s  # -1: null value (a tombstone)

    def __len__(self) -> int:
        return len(self.start)


def _walk(arena: Buffer, start: int, end: int, starts: array[int], runs: array[int]) -> int:
    """Find the records filling ``arena[start:end]``; returns how many.

    Record starts go to ``starts``, or for long runs of equal-size records to ``runs``
    as (first start, size, count) triples, expanded later by numpy.
    """
    table, append = RECORD_STEP, starts.append
    pos, previous, run, before, in_runs = start, -1, 32, len(starts), 0
    try:
        while pos < end:
            step = table[arena[pos] | (arena[pos + 1] << 8)]
            if step != previous:
                append(pos)
                if step:
                    pos += step
                else:
                    length, body = read_varint(arena, pos)
                    if length < 6:
                        raise _corrupt(f"record length {length} out of bounds")
                    pos, step = body + length, -1
                previous = step
                continue
            room = min((end - pos) // step, run)
            if not room:
                break
            first = arena[pos]
            same = room - len(bytes(arena[pos : pos + room * step : step]).lstrip(SINGLE_BYTES[first]))
            if first >= 0x80:
                second = arena[pos + 1]
                strided = bytes(arena[pos + 1 : pos + same * step : step])
                same = len(strided) - len(strided.lstrip(SINGLE_BYTES[second]))
            if same < 16:  # a short run: cheaper as Python ints than a triple to expand
                starts.extend(range(pos, pos + same * step, step))
            else:
                runs.extend((pos, step, same))
                in_runs += same
            pos += same * step
            run = run * 2 if same == room else 32
    except IndexError:
        raise _corrupt("records section truncated") from None
    if pos != end:
        raise _corrupt("records overrun their section")
    return len(starts) - before + in_runs


def _varints(u8: npt.NDArray[np.uint8], pairs: npt.NDArray[np.uint16], pos: Int64s,
             max_bytes: int) -> tuple[Int64s, Int64s]:
    """The zigzag varints at ``pos`` and the positions after them."""
    if pos.size and int(pos.max()) >= len(pairs):
        return long_varints(u8, pos, max_bytes)
    pair = pairs[pos]
    size = PAIR_SIZE[pair]
    value = PAIR_VALUE[pair].astype(np.int64)
    after = pos + size
    if size.size and size.min() == 0:
        longer = np.flatnonzero(size == 0)
        value[longer], after[longer] = long_varints(u8, pos[longer], max_bytes)
    return value, after


def scan_sections(arena: Buffer, spans: list[tuple[int, int]]) -> RecordArrays:
    """Every record of the record sections ``arena[start:end]`` (one per batch)."""
    starts: array[int] = array("q")
    runs: array[int] = array("q")
    counts = [_walk(arena, section_start, section_end, starts, runs)
              for section_start, section_end in spans]
    start_positions = np.frombuffer(starts, dtype=np.int64) if starts \
        else np.zeros(0, dtype=np.int64)
    if runs:
        first, size, count = np.frombuffer(runs, dtype=np.int64).reshape(-1, 3).T
        within = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(
            np.cumsum(count) - count, count)
        in_runs = np.repeat(first, count) + np.repeat(size, count) * within
        start_positions = np.sort(np.concatenate((start_positions, in_runs)))
    section = np.repeat(np.arange(len(spans), dtype=np.int64), counts)
    u8 = np.frombuffer(arena, dtype=np.uint8)
    pairs = np.ndarray((max(len(u8) - 1, 0),), "<u2", arena, 0, (1,)) if len(u8) > 1 \
        else np.zeros(0, dtype=np.uint16)
    try:
        length, body = _varints(u8, pairs, start_positions, 5)
        end = body + length
        _, pos = _varints(u8, pairs, body + 1, 10)  # +1: record attributes; timestamp delta
        offset_delta, pos = _varints(u8, pairs, pos, 5)
        key_length, key_start = _varints(u8, pairs, pos, 5)
        pos = key_start + np.maximum(key_length, 0)
        value_length, pos = _varints(u8, pairs, pos, 5)
        pos = pos + np.maximum(value_length, 0)
    except IndexError:
        raise _corrupt("record fields overrun the records section") from None
    if len(start_positions) and (
            key_length.min() < -1 or value_length.min() < -1 or bool((pos >= end).any())):
        raise _corrupt("record fields disagree with the record's length")
    return RecordArrays(start_positions, end, section, offset_delta, key_start, key_length,
                        value_length)


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
    pieces: list[Buffer] = []
    for position, header in iter_batches(records):
        if header.magic < 2:
            if any(message.key is None for message in decode_message(
                    records, position, max_uncompressed_size=max_uncompressed_size)):
                return True
            continue
        if header.is_control or header.records_count == 0:
            continue
        section = view[position + V2_HEADER_SIZE : position + header.size]
        codec = header.attributes & ATTR_COMPRESSION_MASK
        pieces.append(decompress(CompressionType(codec), section, max_uncompressed_size)
                      if codec else section)
    if not pieces:
        return False
    spans: list[tuple[int, int]] = []
    at = 0
    for piece in pieces:
        spans.append((at, at + len(piece)))
        at += len(piece)
    arena = b"".join(pieces)
    return bool((scan_sections(arena, spans).key_length < 0).any())
