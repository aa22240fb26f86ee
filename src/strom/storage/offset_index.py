"""OffsetIndex: the sparse map from offsets to byte positions in a segment's ``.log``.

File ``<base offset, 20 digits>.index``: a series of 8-byte big-endian entries,
``relative offset`` (int32, offset minus the segment's base offset) then
``position`` (int32, byte position of a batch in the ``.log``). No header, no
checksum; preallocated and trimmed as ``index_file`` describes.

Invariants: an entry is added when more than ``index.interval.bytes`` of log were
written since the last one; it maps the LAST offset of a batch to the position where
that batch STARTS (Kafka's choice), so a lookup of any offset lands at or before the
batch that holds it. Relative offsets and positions strictly increase; positions are
never 0 (the first batch of a segment needs no entry: lookups start there anyway).
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from typing import ClassVar, Final, NamedTuple

from strom.storage.index_file import CorruptIndexError, IndexFile, big_endian

_ENTRY: Final = struct.Struct(">iI")


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(IndexFile):
    entry_size: ClassVar[int] = 8
    key_type: ClassVar[str] = "I"

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ``offset`` must exceed the last one's (callers guarantee it)."""
        relative = offset - self.base_offset
        if self.keys and relative <= self.keys[-1]:
            raise ValueError(f"offset {offset} is not after the index's last entry")
        self._append(relative, position)

    def lookup(self, offset: int) -> OffsetPosition:
        """The largest entry at or below ``offset``, else (base offset, 0)."""
        slot = bisect_right(self.keys, offset - self.base_offset) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self.keys[slot], self.values[slot])

    def entry(self, slot: int) -> OffsetPosition:
        return OffsetPosition(self.base_offset + self.keys[slot], self.values[slot])

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.keys[-1] if self.keys else self.base_offset

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for offsets at or after ``offset``."""
        self.truncate_entries(bisect_right(self.keys, offset - self.base_offset - 1))

    def check(self) -> None:
        super().check()
        positions = self.values
        for i in range(1, len(positions)):
            if positions[i] <= positions[i - 1]:
                raise CorruptIndexError(f"{self.path}: position of entry {i} is not increasing")

    def _pack(self, key: int, value: int) -> bytes:
        return _ENTRY.pack(key, value)

    def _encode(self) -> bytes:
        interleaved = array("I", bytes(8 * len(self.keys)))
        interleaved[0::2] = self.keys
        interleaved[1::2] = self.values
        return big_endian(interleaved).tobytes()

    def _decode(self, raw: bytes) -> None:
        interleaved = array("I")
        interleaved.frombytes(raw)
        interleaved = big_endian(interleaved)  # swapping is its own inverse
        self.keys = interleaved[0::2]
        self.values = interleaved[1::2]
