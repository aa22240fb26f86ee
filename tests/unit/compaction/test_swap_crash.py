"""A crash at every step of the swap: after recovery the log is the old or the new one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from strom.compaction.cleaner import Cleaner
from strom.compaction.offset_map import OffsetMap
from strom.protocol.records import build_record_batch
from strom.storage import FileSystem, Log
from strom.storage.errors import KafkaStorageError
from tests.support.storage import open_log, summary


class Crash(Exception):
    """The process died here: nothing after this call happens."""


class CrashingFileSystem(FileSystem):
    """Dies at the ``crash_at``-th rename or directory fsync (the swap's steps)."""

    def __init__(self, crash_at: int | None = None) -> None:
        self.crash_at = crash_at
        self.steps = 0

    def _step(self) -> None:
        self.steps += 1
        if self.crash_at is not None and self.steps == self.crash_at:
            raise Crash(f"crash at step {self.steps}")

    def rename(self, source: str, target: str) -> None:
        self._step()
        super().rename(source, target)

    def fsync_dir(self, path: str) -> None:
        self._step()
        super().fsync_dir(path)


def build(directory: Path, fs: FileSystem) -> Log:
    """Three segments of 30 batches over 12 keys, then an active one."""
    log = open_log(directory, fs=fs, segment_bytes=1 << 20)
    for segment in range(3):
        for number in range(30):
            log.append(build_record_batch([(b"k%d" % ((number * 7 + segment) % 12),
                                            b"v%d.%d" % (segment, number), (), 1000)]))
        log.roll()
    log.append(build_record_batch([(b"k0", b"active", (), 1000)]))
    return log


def test_crash_at_each_step_of_the_swap_leaves_old_or_new(tmp_path: Path) -> None:
    reference = build(tmp_path / "reference", FileSystem())
    old = summary(reference)
    Cleaner(OffsetMap(1 << 16)).clean(reference, None)
    new = summary(reference)
    assert new != old and len(reference.segments) == 2  # one group of three, swapped
    counting = CrashingFileSystem()
    build(tmp_path / "count", FileSystem()).close()
    log = open_log(tmp_path / "count", fs=counting, segment_bytes=1 << 20)
    Cleaner(OffsetMap(1 << 16)).clean(log, None)
    steps = counting.steps
    assert steps >= 4
    outcomes = set()
    for crash_at in range(1, steps + 1):
        directory = tmp_path / f"crash-{crash_at}"
        build(directory, FileSystem()).close()
        fs = CrashingFileSystem(crash_at)
        log = open_log(directory, fs=fs, segment_bytes=1 << 20)
        fs.steps = 0
        with pytest.raises((Crash, KafkaStorageError)):
            Cleaner(OffsetMap(1 << 16)).clean(log, None)
        for segment in log.segments:  # the process is gone: files stay as they are
            os.close(segment.fd)
        recovered = open_log(directory, clean=False, segment_bytes=1 << 20)
        got = summary(recovered)
        assert got in (old, new), f"a mix after a crash at step {crash_at}"
        outcomes.add("new" if got == new else "old")
        leftovers = [name for name in os.listdir(directory)
                     if name.endswith((".cleaned", ".swap"))]
        assert not leftovers
        recovered.close()
        shutil.rmtree(directory)
    assert outcomes == {"old", "new"}
