"""TimeIndex: the sparse map from timestamps to offsets in one segment.

File ``<base offset, 20 digits>.timeindex``: a series of 12-byte big-endian entries,
``timestamp`` (int64, ms) then ``relative offset`` (int32). No header, no checksum;
preallocated and trimmed as ``index_file`` describes.

Invariants: timestamps strictly increase (an entry is only added when the segment's
max timestamp grew since the last one, so the index stays monotonic even when
producers send timestamps out of order); an entry ``(t, o)`` means "the largest
timestamp among offsets up to ``o`` is ``t``". Entries are added together with
offset-index entries, plus one final entry when the segment rolls or the log closes,
so the last entry holds the segment's max timestamp.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from typing import ClassVar, Final, NamedTuple

from strom.storage.index_file import IndexFile

_ENTRY: Final = struct.Struct(">qI")


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(IndexFile):
    entry_size: ClassVar[int] = 12
    key_type: ClassVar[str] = "q"

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add ``(timestamp, offset)`` if ``timestamp`` is above the last entry's."""
        if self.keys and timestamp <= self.keys[-1]:
            return
        if timestamp < 0 or self.is_full:
            return
        self._append(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The largest entry with timestamp <= ``timestamp``, else (-1, base offset)."""
        slot = bisect_right(self.keys, timestamp) - 1
        if slot < 0:
            return TimestampOffset(-1, self.base_offset)
        return TimestampOffset(self.keys[slot], self.base_offset + self.values[slot])

    @property
    def last_entry(self) -> TimestampOffset:
        if not self.keys:
            return TimestampOffset(-1, self.base_offset)
        return TimestampOffset(self.keys[-1], self.base_offset + self.values[-1])

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is at or after ``offset``."""
        keep = 0
        while keep < len(self.values) and self.base_offset + self.values[keep] < offset:
            keep += 1
        self.truncate_entries(keep)

    def _pack(self, key: int, value: int) -> bytes:
        return _ENTRY.pack(key, value)

    def _encode(self) -> bytes:
        return b"".join(_ENTRY.pack(k, v) for k, v in zip(self.keys, self.values, strict=True))

    def _decode(self, raw: bytes) -> None:
        del self.keys[:]
        del self.values[:]
        for timestamp, relative in _ENTRY.iter_unpack(raw):
            self.keys.append(timestamp)
            self.values.append(relative)
