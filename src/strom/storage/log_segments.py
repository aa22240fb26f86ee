"""LogSegments: the ordered list of a partition's segments, replaced copy-on-write.

Readers take ``log.segments`` (one attribute read, atomic in Python) and search it
without a lock; writers build a new ``LogSegments`` and swap the attribute. A reader
holding an old list may still use a segment that was just deleted: deletion renames
the files to ``.deleted`` and closes the file descriptor only
``file.delete.delay.ms`` later, so the reader's fd stays valid meanwhile.

Invariants: non-empty; base offsets strictly increase; the last segment is the
active one (the only one appended to).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence

from strom.storage.log_results import FileRegion
from strom.storage.segment import LogSegment
from strom.storage.time_index import TimestampOffset


class LogSegments:
    __slots__ = ("_base_offsets", "_segments")

    def __init__(self, segments: Sequence[LogSegment]) -> None:
        if not segments:
            raise ValueError("a log has at least one segment")
        self._segments = tuple(segments)
        self._base_offsets = tuple(segment.base_offset for segment in self._segments)
        if any(a >= b for a, b in zip(self._base_offsets, self._base_offsets[1:], strict=False)):
            raise ValueError("segment base offsets must strictly increase")

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def __getitem__(self, index: int) -> LogSegment:
        return self._segments[index]

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def first(self) -> LogSegment:
        return self._segments[0]

    def floor_index(self, offset: int) -> int:
        """Index of the segment whose base offset is the largest <= ``offset`` (0 if none)."""
        return max(0, bisect_right(self._base_offsets, offset) - 1)

    def floor(self, offset: int) -> LogSegment:
        return self._segments[self.floor_index(offset)]

    def from_offset(self, offset: int) -> tuple[LogSegment, ...]:
        """The segment holding ``offset`` and every later one."""
        return self._segments[self.floor_index(offset):]

    def with_appended(self, segment: LogSegment) -> LogSegments:
        return LogSegments((*self._segments, segment))

    def without_first(self, count: int) -> LogSegments:
        return LogSegments(self._segments[count:])

    def replaced(self, old: Sequence[LogSegment], new: LogSegment) -> LogSegments | None:
        """``old`` (consecutive segments of this list) replaced by ``new``; None if they
        are no longer consecutive members (retention or truncation got there first)."""
        if not old:
            return None
        try:
            first = self._segments.index(old[0])
        except ValueError:
            return None
        if self._segments[first : first + len(old)] != tuple(old) \
                or first + len(old) >= len(self._segments):  # the active one stays
            return None
        return LogSegments((*self._segments[:first], new, *self._segments[first + len(old):]))

    def truncated_after(self, offset: int) -> tuple[LogSegments, tuple[LogSegment, ...]]:
        """(segments whose base offset <= ``offset``, the later ones); keeps at least one."""
        keep = max(1, bisect_right(self._base_offsets, offset))
        return LogSegments(self._segments[:keep]), self._segments[keep:]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    # --- reads (``Log.read``, ``Log.offset_for_timestamp``) ----------------------------

    def region(self, offset: int, max_bytes: int, bound: int,
               min_one_message: bool) -> FileRegion | None:
        """The bytes from the batch holding ``offset`` up to ``max_bytes`` and below
        ``bound``, in one segment (KIP-74: with ``min_one_message`` the first batch whole)."""
        for segment in self.from_offset(offset):
            limit = segment.size
            peek = segment.translate_offset(offset, limit)
            if peek is None:
                continue
            max_position = limit
            if bound < segment.next_offset:
                bound_peek = segment.translate_offset(bound, limit)
                if bound_peek is not None:
                    max_position = bound_peek.position
            available = max_position - peek.position
            if available <= 0:
                return None
            length = min(max_bytes, available)
            if length < peek.size:
                if not min_one_message:
                    return None
                length = min(peek.size, available)
            return FileRegion(segment.fd, peek.position, length)
        return None

    def offset_for_timestamp(self, timestamp: int, start: int,
                             bound: int) -> TimestampOffset | None:
        """The first record in ``[start, bound)`` with timestamp >= ``timestamp``."""
        for segment in self._segments:
            if segment.max_timestamp < timestamp or segment.next_offset <= start:
                continue
            found = segment.find_offset_by_timestamp(timestamp, start)
            if found is not None:
                return found if found.offset < bound else None
        return None
