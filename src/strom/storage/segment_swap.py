"""The compaction swap: cleaned segments replace old ones atomically, and its recovery.

Files in the partition directory while a group of old segments covering offsets
``[B, E)`` is replaced by one cleaned segment with base offset ``B``::

    B.log.cleaned, B.index.cleaned, B.timeindex.cleaned   being written by the cleaner
    B.txnindex.cleaned                                    the old segments' aborted
                                                          transactions, written and
                                                          synced by Log.replace_segments
    B.log.<E, 20 digits>.swap                             committed, not yet live

Protocol (``swap_in``, called by ``Log.replace_segments`` under the log's writer lock):

1. (before, by the cleaner) the ``.cleaned`` files are written and the ``.log`` is
   fdatasync'ed; the indexes are caches and are not synced.
2. ``B.log.cleaned`` is renamed ``B.log.<E>.swap`` and the directory is fsync'ed.
   This is the commit point: from here on, recovery completes the swap.
3. Every old segment's files are renamed ``.deleted`` (their file descriptors stay
   open, so readers holding the old segment list finish; they are unlinked
   ``file.delete.delay.ms`` later).
4. ``B.txnindex.cleaned`` (if any) becomes ``B.txnindex`` — first, while the swap
   file still says the swap is under way —, then the swap file becomes ``B.log``, the
   other indexes lose ``.cleaned``, the directory is fsync'ed, and the new segment
   list replaces the old in one assignment.

Recovery (``complete_interrupted_swaps``, run by ``LogLoader`` before it lists
segments): ``.cleaned`` files are deleted (a crash before the commit: the old
segments are whole), but for a committed swap ``B.txnindex.cleaned``, which cannot be
rebuilt from the ``.log``; each ``.swap`` deletes every ``.log``/``.index``/
``.timeindex`` with a base offset in ``[B, E)`` and becomes ``B.log`` (its offset and
time indexes are rebuilt); if its ``B.txnindex.cleaned`` is still there, the old
``.txnindex`` files in ``[B, E)`` are deleted and it becomes ``B.txnindex`` first (if it
is not, it is ``B.txnindex`` already and the old ones were renamed ``.deleted``).
A crash therefore leaves the old or the new version of the group, never a mix.

Why ``E`` is in the name: the cleaned segment may end before ``E`` (when the group's
last records were all removed), so its own last offset cannot tell recovery which
old segments it replaces. Kafka reads the swap segment's next offset instead and
so can leave such trailing old segments behind.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Final

from strom.storage.fs import FileSystem, remove_files
from strom.storage.log_segments import LogSegments
from strom.storage.segment import LOG_SUFFIX, LogSegment, segment_file_name

CLEANED_SUFFIX: Final = ".cleaned"
SWAP_SUFFIX: Final = ".swap"
_SWAP_NAME: Final = re.compile(r"^(\d{20})\.log\.(\d{20})\.swap$")
_SEGMENT_FILE: Final = re.compile(r"^(\d{20})\.(log|index|timeindex)$")
_TXN_INDEX_FILE: Final = re.compile(r"^(\d{20})\.txnindex$")
_TXN_INDEX: Final = ".txnindex"


def swap_file_name(base_offset: int, end_offset: int) -> str:
    return f"{segment_file_name(base_offset, LOG_SUFFIX)}.{end_offset:020d}{SWAP_SUFFIX}"


def swap_in(fs: FileSystem, directory: str, segments: LogSegments, cleaned: LogSegment,
            old: Sequence[LogSegment], end_offset: int) -> LogSegments | None:
    """Steps 2-4 above; None (nothing changed) if ``old`` is no longer in ``segments``."""
    replaced = segments.replaced(old, cleaned)
    if replaced is None or cleaned.file_suffix != CLEANED_SUFFIX:
        return None
    swap_path = os.path.join(directory, swap_file_name(cleaned.base_offset, end_offset))
    fs.rename(cleaned.log_path, swap_path)
    fs.fsync_dir(directory)
    for segment in old:
        segment.rename_to_deleted()
    live_log = os.path.join(directory, segment_file_name(cleaned.base_offset, LOG_SUFFIX))
    cleaned.txn_index.rename(os.path.join(
        directory, segment_file_name(cleaned.base_offset, _TXN_INDEX)))
    fs.rename(swap_path, live_log)
    cleaned.rename_indexes("")
    fs.fsync_dir(directory)
    return replaced


def complete_interrupted_swaps(fs: FileSystem, directory: str) -> list[str]:
    """Delete ``.cleaned`` leftovers and finish committed swaps; returns what was done."""
    names = fs.listdir(directory)
    done: list[str] = []
    committed = {segment_file_name(int(found[1]), _TXN_INDEX) + CLEANED_SUFFIX
                 for name in names if (found := _SWAP_NAME.match(name))}
    leftovers = [name for name in names
                 if name.endswith(CLEANED_SUFFIX) and name not in committed]
    remove_files(fs, [os.path.join(directory, name) for name in leftovers])
    done += [f"deleted {name} (an unfinished cleaning)" for name in leftovers]
    for name in sorted(names):
        match = _SWAP_NAME.match(name)
        if match is None:
            continue
        base, end = int(match[1]), int(match[2])
        carried = segment_file_name(base, _TXN_INDEX) + CLEANED_SUFFIX
        doomed = [other for other in names
                  if ((found := _SEGMENT_FILE.match(other))
                      or (carried in names and (found := _TXN_INDEX_FILE.match(other))))
                  and base <= int(found[1]) < end]
        remove_files(fs, [os.path.join(directory, other) for other in doomed])
        if carried in names:
            fs.rename(os.path.join(directory, carried),
                      os.path.join(directory, carried[: -len(CLEANED_SUFFIX)]))
        fs.rename(os.path.join(directory, name),
                  os.path.join(directory, segment_file_name(base, LOG_SUFFIX)))
        done.append(f"completed the swap of {name} over {len(doomed)} old file(s)")
    if done:
        fs.fsync_dir(directory)
    return done

