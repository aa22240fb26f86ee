"""TransactionIndex: the aborted transactions whose ABORT marker lies in one segment.

File ``<base offset, 20 digits>.txnindex`` beside the segment's ``.log`` (Kafka's
``TransactionIndex``, byte for byte): a series of 34-byte big-endian entries, no
header, no checksum, one per aborted transaction (Kafka's ``AbortedTxn``)::

    version             int16   0
    producer_id         int64
    first_offset        int64   the transaction's first record in this partition
    last_offset         int64   its ABORT marker's offset (in this segment)
    last_stable_offset  int64   the partition's LSO once the marker landed: every
                                transaction starting below it had completed

Invariants: entries' last offsets strictly increase and lie in the segment
(base offset <= last offset < the segment's next offset); the file exists only once a
segment has had an aborted transaction (created at the first entry, so a log without
transactions has none and reading it costs no ``open``).

Durability: unlike the offset and time indexes, this one is not a cache of the
``.log`` alone — an entry needs the producer state at its marker to be rebuilt. So it
is fdatasync'ed whenever its segment's ``.log`` is (``LogSegment.flush``: a roll, a
flush, a clean shutdown): the entries of every durable marker are durable. After a
crash a recovered segment keeps the entries below its recovered end, and the producer
state's replay (``ProducerStateManager.load``) first cuts every index at the offset
it replays from, then appends the entries of the ABORT markers it replays, so an
index is rebuilt whole and never holds an entry twice. A torn tail (a size that is
not a multiple of 34) or an entry that breaks the order is cut on load, with a warning.

Fetch (``collect``, Kafka's ``collectAbortedTxns``): the entries with
``last_offset >= fetch offset`` and ``first_offset < upper bound``; the search is
complete at the first entry whose ``last_stable_offset`` reaches the upper bound
(every transaction that could overlap the range had completed before that marker),
else it goes on in the next segment.

Entries are kept in memory once loaded (a list per segment; Kafka re-reads the file
through the page cache on each fetch): a fetch bisects to the first entry that can
matter instead of scanning the file from its start.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_left
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final, NamedTuple

from strom.storage.fs import FileSystem, read_file, remove_files, write_fully

if TYPE_CHECKING:
    from strom.storage.log_results import FileRegion
    from strom.storage.log_segments import LogSegments
    from strom.storage.producer_state import CompletedTxn
    from strom.storage.segment import LogSegment

logger = logging.getLogger(__name__)

TXN_INDEX_SUFFIX: Final = ".txnindex"
ABORTED_TXN_VERSION: Final = 0
_ENTRY: Final = struct.Struct(">hqqqq")
ENTRY_SIZE: Final = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, *self)


class TransactionIndex:
    """One segment's aborted transactions, in memory and in its ``.txnindex`` file."""

    __slots__ = ("_created", "_fd", "_last_offsets", "_unsynced", "base_offset", "entries", "fs",
                 "path")

    def __init__(self, fs: FileSystem, path: str, base_offset: int) -> None:
        self.fs = fs
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []  # for bisect
        self._fd: int | None = None  # opened at the first append or load of a file
        self._unsynced = False
        self._created = False  # the file is new: its directory entry needs an fsync too

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def last_offset(self) -> int:
        """The last entry's marker offset, or -1."""
        return self._last_offsets[-1] if self._last_offsets else -1

    # --- lifecycle --------------------------------------------------------------------

    def load(self, segment_end: int | None = None) -> None:
        """Read the file if there is one; cut a torn tail, disordered entries, and
        (with ``segment_end``) entries at or past the segment's end."""
        self.entries, self._last_offsets = [], []
        if not self.fs.exists(self.path):
            return
        raw = read_file(self.fs, self.path)
        keep = 0
        for at in range(0, len(raw) - ENTRY_SIZE + 1, ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(raw, at)
            entry = AbortedTxn(*fields)
            if version != ABORTED_TXN_VERSION or entry.last_offset <= self.last_offset \
                    or entry.last_offset < self.base_offset \
                    or (segment_end is not None and entry.last_offset >= segment_end):
                break
            self.entries.append(entry)
            self._last_offsets.append(entry.last_offset)
            keep = at + ENTRY_SIZE
        if keep != len(raw):
            logger.warning("%s: cutting %d byte(s) after %d valid aborted transaction(s)",
                           self.path, len(raw) - keep, len(self.entries))
            self._cut(keep)

    def _open(self) -> int:
        if self._fd is None:
            self._created = self._created or not self.fs.exists(self.path)
            self._fd = self.fs.open(self.path, os.O_RDWR | os.O_CREAT)
        return self._fd

    def _cut(self, size: int) -> None:
        self.fs.ftruncate(self._open(), size)
        self._unsynced = True

    def append(self, entry: AbortedTxn) -> None:
        """Add an entry at the end; its marker must follow the last one's."""
        if entry.last_offset <= self.last_offset:
            raise ValueError(f"{self.path}: aborted transaction ending at {entry.last_offset} "
                             f"is not after the last one ({self.last_offset})")
        write_fully(self.fs, self._open(), entry.encode(), len(self.entries) * ENTRY_SIZE)
        self._unsynced = True
        self.entries.append(entry)
        self._last_offsets.append(entry.last_offset)

    def append_aborted(self, completed: Iterable[tuple[CompletedTxn, int]]) -> bool:
        """Add the aborted ones of an append's completed transactions (each with the LSO
        after its marker); whether there was one."""
        appended = False
        for txn, last_stable_offset in completed:
            if txn.is_aborted:
                self.append(txn.aborted_entry(last_stable_offset))
                appended = True
        return appended

    def truncate_to(self, offset: int) -> None:
        """Keep the entries whose marker lies below ``offset`` (Kafka's ``truncateTo``)."""
        keep = bisect_left(self._last_offsets, offset)
        if keep == len(self.entries):
            return
        # ``_last_offsets`` first (and last on append): a reader without the lock never
        # bisects past the entries.
        del self._last_offsets[keep:], self.entries[keep:]
        self._cut(keep * ENTRY_SIZE)

    def reset(self) -> None:
        """No entry and no file (a segment starting over)."""
        self.close()
        self.entries, self._last_offsets = [], []
        remove_files(self.fs, [self.path])

    def flush(self) -> None:
        """fdatasync, if anything was written since the last one (and the directory,
        if the file is new)."""
        if self._unsynced and self._fd is not None:
            self._unsynced = False
            self.fs.fdatasync(self._fd)
            if self._created:
                self._created = False
                self.fs.fsync_dir(os.path.dirname(self.path))

    def close(self) -> None:
        if self._fd is not None:
            self.fs.close(self._fd)
            self._fd = None

    def rename(self, path: str) -> None:
        """Follow the segment's renames (``.deleted``, a cleaned segment going live)."""
        if path != self.path and self.fs.exists(self.path):
            self.fs.rename(self.path, path)
        self.path = path

    # --- reading ----------------------------------------------------------------------

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """(entries overlapping ``[fetch_offset, upper_bound_offset)``, whether the search
        is complete here); see the module docstring."""
        entries = self.entries
        start = bisect_left(self._last_offsets, fetch_offset)
        if start and entries[start - 1].last_stable_offset >= upper_bound_offset:
            return [], True  # every transaction below the bound completed before that marker
        found = []
        for entry in entries[start:]:
            if entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False


def collect_aborted(indexes: Iterable[TransactionIndex], fetch_offset: int,
                    upper_bound_offset: int) -> list[AbortedTxn]:
    """``collect`` over consecutive segments' indexes until one says the search is complete."""
    found: list[AbortedTxn] = []
    for index in indexes:
        if index.entries:
            entries, complete = index.collect(fetch_offset, upper_bound_offset)
            found += entries
            if complete:
                break
    return found


def fetch_upper_bound(segments: Iterable[LogSegment], region: FileRegion, bound: int) -> int:
    """An offset above every record of ``region`` (Kafka's ``fetchUpperBoundOffset``),
    at most ``bound``: the offset index's first entry at or past the region's end (an
    entry maps a batch's last offset to where it starts), else the segment's end."""
    for segment in segments:
        if segment.fd == region.fd:
            index = segment.offset_index
            slot = bisect_left(index.values, region.position + region.length)
            upper = index.base_offset + index.keys[slot] if slot < len(index.keys) \
                else segment.next_offset
            return min(upper, bound)
    return bound


def sync_rebuilt_indexes(segments: LogSegments) -> bool:
    """After a producer-state replay: what it rebuilt made durable before anything new is
    appended, and only the active segment's file left open; whether any entry is left."""
    for segment in segments:
        segment.txn_index.flush()
        if segment is not segments.active:
            segment.txn_index.close()
    return any(segment.txn_index.entries for segment in segments)


def carry_aborted_txns(target: TransactionIndex, sources: Iterable[TransactionIndex],
                       kept: Iterable[AbortedTxn] | None = None) -> None:
    """Compaction's swap: the cleaned segment's index takes ``kept`` (the cleaner's: the
    entries whose transactions still have a batch, as Kafka's cleaner) or, without it,
    every entry of the replaced segments; written and synced before the swap commits
    (``segment_swap`` keeps the file if a crash interrupts it). Offsets keep their
    meaning, so an entry carried whose records are gone only lists a transaction no
    read meets."""
    target.reset()  # a failed cleaning's leftover file
    entries = kept if kept is not None else (entry for source in sources
                                             for entry in source.entries)
    for entry in entries:
        target.append(entry)
    target.flush()
    target.close()  # a segment that takes no appends
