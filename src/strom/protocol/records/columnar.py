"""Records of many v2 record sections at once, as numpy arrays: the one columnar record walker.

The Arrow decoder (``strom.client.arrow``) and the log cleaner
(``strom.compaction.record_scan``) both read every record of many batches without a
Python object per record. This module is the part they share:

1. The arena: every record section to read in one buffer (``join_sections``), each
   section a ``(start, end)`` span of it. Uncompressed sections are read in place.
2. Record starts (``record_starts``), the one sequential step: a record starts after
   the previous one's varint length. A Python loop does one table lookup per record,
   and runs of equal-size records are counted in C by ``bytes.lstrip`` on a strided
   slice, so fixed-size values cost a few runs per batch, not a Python int per record.
3. Fields (``scan_records``) by numpy over every record of the arena at once: varints
   of one or two bytes by byte-pair tables, longer ones byte by byte over just those.

A v2 record (see ``strom.protocol.records.v2``) is: length varint, attributes int8,
timestamp delta varlong, offset delta varint, key length varint (-1: null) and key,
value length varint (-1: null) and value, header count varint and headers. This
module reads up to the header count's position (``after_value``); what comes after
is the caller's (the Arrow decoder parses headers, the cleaner does not need them).

Checked here, so neither caller can forget it: record lengths exactly fill their
section (and, when given, the section holds its batch's record count), no length is
below -1, and every field up to the value ends inside its record. Numpy bounds-checks
every gather, so nothing is read outside the arena; any fault is a ``ProtocolError``
with ``CORRUPT_MESSAGE``. Batch CRCs are the caller's concern.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
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
Span = tuple[int, int]

# A run of equal-size records shorter than this is kept as single starts: cheaper as
# Python ints than as a run to expand.
_SHORT_RUN = 16


def corrupt(reason: str) -> ProtocolError:
    return ProtocolError(reason, error_code=ErrorCode.CORRUPT_MESSAGE)


def join_sections(pieces: Sequence[tuple[Buffer, int, int]]) -> tuple[Buffer, list[Span]]:
    """One arena holding every ``buffer[start:end]`` piece, and each piece's span in it.

    When every piece lies in the same buffer (nothing was decompressed), that buffer is
    the arena and nothing is copied.
    """
    if not pieces:
        return b"", []
    if all(piece[0] is pieces[0][0] for piece in pieces):
        return pieces[0][0], [(start, end) for _, start, end in pieces]
    ends = list(accumulate(end - start for _, start, end in pieces))
    spans = [(at - end + start, at) for at, (_, start, end) in zip(ends, pieces, strict=True)]
    return b"".join(memoryview(buf)[start:end] for buf, start, end in pieces), spans


class ArenaView(NamedTuple):
    """The arena, as bytes, and as the (unaligned) little-endian byte pair at each position."""

    arena: Buffer
    u8: npt.NDArray[np.uint8]
    pairs: npt.NDArray[np.uint16]

    @classmethod
    def of(cls, arena: Buffer) -> ArenaView:
        u8 = np.frombuffer(arena, dtype=np.uint8)
        if len(u8) < 2:
            return cls(arena, u8, np.zeros(0, dtype=np.uint16))
        return cls(arena, u8, np.ndarray((len(u8) - 1,), "<u2", arena, 0, (1,)))


class RecordColumns(NamedTuple):
    """Per record of the scanned sections, in arena order (positions are arena offsets)."""

    start: Int64s  # the record's first byte (its length varint)
    end: Int64s  # one past its last byte
    section: Int64s  # index of the span (batch) holding it
    offset_delta: Int64s
    timestamp_delta: Int64s
    key_start: Int64s
    key_length: Int64s  # -1: no key
    value_start: Int64s
    value_length: Int64s  # -1: null value (a tombstone)
    after_value: Int64s  # where the header count starts

    def __len__(self) -> int:
        return len(self.start)


class _Starts:
    """Record starts as found: single positions, and runs of equal-size records kept as
    ``(slot, first start, size, count)`` so that a long run costs no Python int per record."""

    def __init__(self) -> None:
        self.singles: array[int] = array("q")
        self.runs: list[tuple[int, int, int, int]] = []
        self.in_runs = 0

    def __len__(self) -> int:
        return len(self.singles) + self.in_runs

    def to_array(self) -> Int64s:
        singles = np.frombuffer(self.singles, dtype=np.int64) if self.singles else np.zeros(0, np.int64)
        if not self.runs:
            return singles
        slot, first, size, count = (np.array(field, dtype=np.int64) for field in zip(*self.runs, strict=True))
        run_of = np.repeat(np.arange(len(count)), count)
        within = np.arange(self.in_runs, dtype=np.int64) - (np.cumsum(count) - count)[run_of]
        starts = np.empty(len(self), dtype=np.int64)
        in_run = np.zeros(len(self), dtype=bool)
        run_slots = slot[run_of] + within
        in_run[run_slots] = True
        starts[run_slots] = first[run_of] + within * size[run_of]
        starts[~in_run] = singles
        return starts


def _walk(arena: Buffer, start: int, end: int, found: _Starts) -> int:
    """Find the records filling ``arena[start:end]``; returns how many.

    Two records in a row of the same size start a run: the records ``step`` bytes apart
    whose first two bytes (the length varint) are the same have that size too. Sizes
    change where the offset and timestamp deltas gain a byte, so fixed-size values
    cost a few runs per batch; varied sizes cost one table lookup per record.
    """
    table, singles = RECORD_STEP, found.singles
    append = singles.append
    before = len(found)
    pos, previous, run = start, -1, 32
    try:
        while pos < end:
            step = table[arena[pos] | (arena[pos + 1] << 8)]
            if step != previous:
                append(pos)
                if step:
                    pos += step
                else:  # a record of 8 KiB or more, or a corrupt length
                    length, body = read_varint(arena, pos)
                    if length < 6:
                        raise corrupt(f"record length {length} out of bounds")
                    pos, step = body + length, -1
                previous = step
                continue
            room = min((end - pos) // step, run)
            if not room:
                break  # the record overruns the section
            first = arena[pos]
            same = room - len(bytes(arena[pos : pos + room * step : step]).lstrip(SINGLE_BYTES[first]))
            if first >= 0x80:
                second = arena[pos + 1]
                strided = bytes(arena[pos + 1 : pos + same * step : step])
                same = len(strided) - len(strided.lstrip(SINGLE_BYTES[second]))
            if same < _SHORT_RUN:
                singles.extend(range(pos, pos + same * step, step))
            else:
                found.runs.append((len(found), pos, step, same))
                found.in_runs += same
            pos += same * step
            run = run * 2 if same == room else 32
    except IndexError:
        raise corrupt("records section truncated") from None
    if pos != end:
        raise corrupt("records overrun their section")
    return len(found) - before


def record_starts(arena: Buffer, spans: Sequence[Span], counts: Sequence[int] | None = None
                  ) -> tuple[Int64s, Int64s]:
    """Each record's start in the arena and the index of its span.

    ``counts``, when given, is how many records each span must hold (its batch header's
    ``records_count``); a span holding another number is corrupt.
    """
    found = _Starts()
    walked = [_walk(arena, start, end, found) for start, end in spans]
    if counts is not None and walked != list(counts):
        bad = next(i for i, (got, want) in enumerate(zip(walked, counts, strict=True)) if got != want)
        raise corrupt(f"records section {bad} holds {walked[bad]} records, its batch says {counts[bad]}")
    section = np.repeat(np.arange(len(spans), dtype=np.int64), walked)
    return found.to_array(), section


def varints(view: ArenaView, pos: Int64s, max_bytes: int) -> tuple[Int64s, Int64s]:
    """The zigzag varints at every position of ``pos``, and the positions after them."""
    if pos.size and int(pos.max()) >= len(view.pairs):  # a varint in the arena's last byte
        return long_varints(view.u8, pos, max_bytes)
    pair = view.pairs[pos]
    size = PAIR_SIZE[pair]
    value = PAIR_VALUE[pair].astype(np.int64)
    after = pos + size
    if size.min(initial=1) == 0:
        longer = np.flatnonzero(size == 0)
        value[longer], after[longer] = long_varints(view.u8, pos[longer], max_bytes)
    return value, after


def sized_field(view: ArenaView, pos: Int64s, what: str) -> tuple[Int64s, Int64s, Int64s]:
    """A length-prefixed field (-1 = null) at each position: ``(start, length, position after)``."""
    length, start = varints(view, pos, 5)
    if length.min(initial=0) < -1:
        raise corrupt(f"negative {what} length")
    return start, length, start + np.maximum(length, 0)


def scan_records(view: ArenaView, spans: Sequence[Span], counts: Sequence[int] | None = None
                 ) -> RecordColumns:
    """Every record of the spans of ``view.arena``, up to its header count."""
    starts, section = record_starts(view.arena, spans, counts)
    try:
        length, body = varints(view, starts, 5)
        end = body + length  # the walk has checked these lengths
        timestamp_delta, pos = varints(view, body + 1, 10)  # +1: the attributes byte
        offset_delta, pos = varints(view, pos, 5)
        key_start, key_length, pos = sized_field(view, pos, "key")
        value_start, value_length, pos = sized_field(view, pos, "value")
    except IndexError:
        raise corrupt("record fields overrun the records section") from None
    if (pos >= end).any():  # the header count needs a byte of the record too
        raise corrupt("record fields disagree with the record's length")
    return RecordColumns(starts, end, section, offset_delta, timestamp_delta, key_start, key_length,
                         value_start, value_length, pos)
