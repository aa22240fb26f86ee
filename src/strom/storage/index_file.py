"""What the offset index and the time index share: a preallocated file of fixed-size entries.

Both index files are arrays of big-endian fixed-size entries with no header and no
checksum. The file of the active segment is preallocated to ``segment.index.bytes``
(a sparse ``ftruncate``, so it costs no disk blocks) when its first entry of this run is
written, and trimmed to exactly ``entries * entry_size`` and fdatasync'ed when the
segment rolls or the log closes cleanly. An index nobody wrote since it was loaded (or
last synced) is already trimmed and durable: closing it is only a ``close`` (a broker
with hundreds of idle partitions stops without two ``fdatasync`` per partition).

Invariants:
- the in-memory entry arrays are the truth; bytes in the file past them are stale or
  preallocated zeros and are never read back while the process runs;
- entries are strictly increasing in their key (relative offset / timestamp);
- an index is a cache of the log: a missing, untrimmed-after-a-crash or insane index
  is rebuilt from the segment by ``LogSegment.recover``, never trusted.

Why not ``mmap`` as Kafka does: a store into a sparse mapped page on a full disk is
``SIGBUS``, which kills the broker; ``pwrite`` of 8 or 12 bytes per
``index.interval.bytes`` of log reports ``ENOSPC`` as an error instead, and lookups
run on ``array`` copies with ``bisect`` in C.
"""

from __future__ import annotations

import os
import sys
from array import array
from typing import ClassVar

from strom.storage.fs import FileSystem, read_file, write_fully


class CorruptIndexError(Exception):
    """The index file fails its sanity check; the caller rebuilds it from the log."""


class IndexFile:
    """Fixed-size entries as two parallel arrays (``keys``, ``values``), with file I/O."""

    entry_size: ClassVar[int]
    key_type: ClassVar[str]

    def __init__(self, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> None:
        self.fs = fs
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_index_size // self.entry_size
        self.keys: array[int] = array(self.key_type)
        self.values: array[int] = array("I")
        self._fd: int | None = None
        # What the file on disk needs before a clean shutdown: cutting back to the
        # entries (it is preallocated) and an fdatasync (written since last durable).
        self._preallocated = False
        self._unsynced = False

    # --- lifecycle --------------------------------------------------------------------

    def load(self) -> None:
        """Read the file's entries and check them; raises ``CorruptIndexError``."""
        raw = read_file(self.fs, self.path)
        if len(raw) % self.entry_size:
            raise CorruptIndexError(f"{self.path}: size {len(raw)} is not a multiple of "
                                    f"{self.entry_size}")
        if len(raw) // self.entry_size > self.max_entries:
            raise CorruptIndexError(f"{self.path}: more entries than segment.index.bytes allows")
        self._decode(raw)
        self.check()
        # Exactly the entries, and durable: trimmed and synced by the clean close (or
        # the roll) that wrote it last, or rebuilt by recovery, which marks it unsynced.
        self._preallocated = self._unsynced = False

    def reset(self) -> None:
        """Forget every entry (before a rebuild) and empty the file if it is open."""
        del self.keys[:]
        del self.values[:]
        if self._fd is not None:
            self.fs.ftruncate(self._fd, 0)
            self._preallocated, self._unsynced = False, True

    def open_for_append(self) -> None:
        """Open the file for writing; it is preallocated by its first new entry."""
        if self._fd is None:
            self._fd = self.fs.open(self.path, os.O_RDWR | os.O_CREAT)

    def _preallocate(self, fd: int) -> None:
        self.fs.ftruncate(fd, self.max_entries * self.entry_size)
        self._preallocated = True

    def write_all(self) -> None:
        """Write the in-memory entries to a fresh file, trimmed (after a rebuild)."""
        fd = self.fs.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self._preallocated, self._unsynced = False, True
            write_fully(self.fs, fd, self._encode(), 0)
        finally:
            self.fs.close(fd)

    def trim(self) -> None:
        """Cut the preallocated tail off, make the file durable, stop appending (segment
        rolled or log closed); nothing but the ``close`` if the file has not changed."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if self._preallocated:
                self.fs.ftruncate(fd, len(self.keys) * self.entry_size)
                self._preallocated, self._unsynced = False, True
            if self._unsynced:
                self.fs.fdatasync(fd)
                self._unsynced = False
        finally:
            self.fs.close(fd)

    def close_without_trim(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self.fs.close(fd)

    def flush(self) -> None:
        if self._fd is not None:
            self.fs.fdatasync(self._fd)
            self._unsynced = False

    def rename(self, path: str) -> None:
        if self.fs.exists(self.path):
            self.fs.rename(self.path, path)
        self.path = path

    # --- entries ----------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return len(self.keys)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def _append(self, key: int, value: int) -> None:
        if self.is_full:
            raise ValueError(f"{self.path} is full ({self.max_entries} entries)")
        if self._fd is not None:
            if not self._preallocated:
                self._preallocate(self._fd)
            entry = self._pack(key, value)
            self._unsynced = True
            write_fully(self.fs, self._fd, entry, len(self.keys) * self.entry_size)
        self.keys.append(key)
        self.values.append(value)

    def truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries (the log was truncated under them)."""
        del self.keys[count:]
        del self.values[count:]

    def drop_stale_entries(self) -> None:
        """After ``truncate_entries``: make the file hold only the kept entries (an open,
        active index is preallocated again by its next entry), so a crash cannot leave
        an entry for data the log no longer has."""
        if self._fd is None:
            self.write_all()
            return
        self.fs.ftruncate(self._fd, len(self.keys) * self.entry_size)
        self._preallocated, self._unsynced = False, True

    def check(self) -> None:
        keys = self.keys
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1]:
                raise CorruptIndexError(f"{self.path}: entry {i} is not increasing")

    # --- encoding, per index kind -----------------------------------------------------

    def _pack(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def _encode(self) -> bytes:
        raise NotImplementedError

    def _decode(self, raw: bytes) -> None:
        raise NotImplementedError


def big_endian(values: array[int]) -> array[int]:
    """A copy of ``values`` in big-endian byte order (the index files' order)."""
    copy = array(values.typecode, values)
    if sys.byteorder == "little":
        copy.byteswap()
    return copy
