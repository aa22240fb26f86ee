"""Log truncation for followers (Kafka's ``truncateTo`` / ``truncateFullyAndStartAt``), crash-safe.

File ``<partition dir>/truncation-in-progress``, present only while a truncation runs:
one line of ASCII, ``to <offset>`` or ``start-at <offset>``, written whole by
``write_file_atomically`` (temp file, fsync, rename, fsync of the directory).

Protocol (``Log.truncate_to`` / ``Log.truncate_fully_and_start_at``, under the log's
writer lock):

1. The marker is written. This is the commit point: a crash before it leaves the old
   log; from here on, recovery finishes the truncation.
2. ``to X`` (``truncate_segments``): the segments whose base offset is above ``X`` are
   renamed ``.deleted``, the highest first (so no crash can leave a hole in the
   middle), and the directory is fsync'ed; the segment holding ``X`` becomes the active
   one and loses its index entries at or above ``X`` (in memory and in both index
   files), then its ``.log`` is cut and fdatasync'ed.
   ``start-at X``: every segment is renamed ``.deleted``, highest first, and the
   directory fsync'ed; a new empty segment is created at ``X``.
3. ``leader-epoch-checkpoint`` is rewritten without the epochs starting at or after the
   new end (all of them for ``start-at``); producer snapshots above the new end are
   deleted (all of them for ``start-at``) and the producer state is rebuilt from the
   newest remaining snapshot and the log after it.
4. The marker is removed and the directory fsync'ed.

Recovery (``LogLoader``): with a ``start-at X`` marker, every segment file, snapshot and
the epoch checkpoint are deleted before anything is loaded and the log starts empty at
``X``; with a ``to X`` marker, the log is loaded (and recovered) as usual and then
truncated to ``X`` again. Both steps are idempotent, so a crash during recovery only
repeats them. A crash therefore leaves the old log or the truncated one, never a mix:
no hole, no index entry or epoch past the log end, no snapshot above it.

Whole batches only: an offset inside a v2 batch truncates to that batch's base offset
(``batch_boundary``). Kafka also drops the whole batch but then sets the log end offset
to the target, leaving offsets below it that no batch holds. Likewise a target inside a
compacted segment's gap ends the log after the last batch kept, where a reload of the
files would put the end.

Compaction: a cleaning that was reading when a truncation happened is not swapped in
(``Log.replace_segments`` refuses it), since its copy may hold, or have dropped records
for, records that are gone. Kafka pauses the cleaner around a truncation instead.
"""

from __future__ import annotations

import enum
import os
from typing import Final, NamedTuple

from strom.storage.fs import FileSystem, read_file, remove_files, write_file_atomically
from strom.storage.log_segments import LogSegments
from strom.storage.segment import LogSegment

TRUNCATION_MARKER: Final = "truncation-in-progress"


class TruncationKind(enum.Enum):
    TO = "to"
    START_AT = "start-at"


class PendingTruncation(NamedTuple):
    kind: TruncationKind
    offset: int


class LogTruncation(NamedTuple):
    """What a truncation dropped; Kafka logs it as "Truncating to offset X"."""

    previous_log_end_offset: int
    log_end_offset: int  # the new one; every offset in [it, previous) is gone
    bytes_dropped: int
    segments_deleted: int

    def describe(self) -> str:
        return (f"offsets [{self.log_end_offset}, {self.previous_log_end_offset}) dropped "
                f"({self.bytes_dropped} bytes, {self.segments_deleted} segment(s) deleted)")


def marker_path(directory: str) -> str:
    return os.path.join(directory, TRUNCATION_MARKER)


def write_marker(fs: FileSystem, directory: str, kind: TruncationKind, offset: int) -> None:
    """Step 1, the commit point."""
    write_file_atomically(fs, marker_path(directory), f"{kind.value} {offset}\n".encode())


def read_marker(fs: FileSystem, directory: str) -> PendingTruncation | None:
    """The truncation a crash interrupted, if any; a marker that does not parse (it is
    written atomically, so only a foreign file could) raises ``ValueError``."""
    path = marker_path(directory)
    if not fs.exists(path):
        return None
    kind, offset = read_file(fs, path).decode("ascii").split()
    return PendingTruncation(TruncationKind(kind), int(offset))


def remove_marker(fs: FileSystem, directory: str) -> None:
    """Step 4: the truncation is whole on disk."""
    remove_files(fs, [marker_path(directory)])
    fs.fsync_dir(directory)


def batch_boundary(segments: LogSegments, offset: int) -> int:
    """``offset``, or the base offset of the v2 batch holding it (batches are whole)."""
    peek = segments.floor(offset).translate_offset(offset)
    if peek is not None and peek.base_offset < offset < peek.next_offset:
        return peek.base_offset
    return offset


def delete_highest_first(fs: FileSystem, directory: str,
                         doomed: tuple[LogSegment, ...]) -> None:
    """Rename segments ``.deleted`` from the end, so a crash leaves a prefix of the log."""
    for segment in reversed(doomed):
        segment.rename_to_deleted()
    if doomed:
        fs.fsync_dir(directory)


def truncate_segments(fs: FileSystem, directory: str, segments: LogSegments,
                      offset: int) -> tuple[LogSegments, tuple[LogSegment, ...], int]:
    """Step 2 of ``to``: (the segments kept, those renamed ``.deleted``, bytes dropped).

    ``offset`` is above the first segment's base and is a batch boundary.
    """
    kept, doomed = segments.truncated_after(offset)
    delete_highest_first(fs, directory, doomed)
    last = kept.active
    if doomed:
        last.make_active()
    dropped = sum(segment.size for segment in doomed) + last.truncate_to(offset)
    last.flush()
    return kept, doomed, dropped
