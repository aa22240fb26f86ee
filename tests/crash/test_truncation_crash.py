"""A crash at every filesystem step of a truncation: recovery gives the old or the new log.

The ``FileSystem`` seam dies before its N-th mutating call (create, write, truncate,
sync, rename, unlink), for every N the truncation makes. The process is "gone": its
file descriptors are closed and nothing else runs. The directory is then opened as
after an unclean shutdown, with the recovery point checkpointed before the truncation
(the broker had no time to write a newer one), and must hold either the old log or
the truncated one, with no hole, no index entry, epoch or producer snapshot past its
end, and producer state that continues where the recovered log ends.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from strom.protocol.records import decode_records
from strom.storage import FileSystem, Log
from strom.storage.errors import KafkaStorageError
from strom.storage.fs import Buffer
from strom.storage.truncation import TRUNCATION_MARKER
from tests.support.storage import batch, open_log, read_all

BATCHES = 35  # single-record batches of producer 7, sequence = offset; rolls at 10, 20, 30
TRUNCATE_TO = 15
START_AT = 100


class Crash(Exception):
    """The process died here: nothing after this call happens."""


class CrashingFileSystem(FileSystem):
    """Dies before its ``crash_at``-th mutating call; remembers every fd it opened."""

    def __init__(self, crash_at: int | None = None) -> None:
        self.crash_at = crash_at
        self.steps = 0
        self.crashes = 0
        self.fds: set[int] = set()

    def _step(self) -> None:
        self.steps += 1
        if self.crash_at is not None and self.steps >= self.crash_at:
            self.crashes += 1
            raise Crash(f"crash at step {self.steps}")

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if flags & (os.O_CREAT | os.O_TRUNC):
            self._step()
        fd = super().open(path, flags, mode)
        self.fds.add(fd)
        return fd

    def close(self, fd: int) -> None:
        self.fds.discard(fd)
        super().close(fd)

    def pwrite(self, fd: int, data: Buffer, position: int) -> int:
        self._step()
        return super().pwrite(fd, data, position)

    def ftruncate(self, fd: int, size: int) -> None:
        self._step()
        super().ftruncate(fd, size)

    def fallocate(self, fd: int, size: int) -> None:
        self._step()
        super().fallocate(fd, size)

    def fdatasync(self, fd: int) -> None:
        self._step()
        super().fdatasync(fd)

    def fsync(self, fd: int) -> None:
        self._step()
        super().fsync(fd)

    def rename(self, source: str, target: str) -> None:
        self._step()
        super().rename(source, target)

    def unlink(self, path: str) -> None:
        self._step()
        super().unlink(path)

    def fsync_dir(self, path: str) -> None:
        self._step()
        super().fsync_dir(path)

    def die(self) -> None:
        """What the kernel does for a killed process: close every fd it had open."""
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()


def idempotent(sequence: int) -> bytearray:
    return batch(1, tag=sequence, producer_id=7, producer_epoch=0, base_sequence=sequence)


def build(directory: Path) -> int:
    """The log before the truncation; returns its (checkpointed) recovery point."""
    log = open_log(directory)
    for offset in range(BATCHES):
        if offset and offset % 10 == 0:
            log.roll()
        log.append(idempotent(offset), leader_epoch=offset // 8 + 1)
    log.flush()
    recovery_point = log.recovery_point
    log.close()
    return recovery_point


def contents(log: Log) -> list[tuple[int, bytes | None]]:
    if log.log_end_offset == log.log_start_offset:
        return []
    return [(record.offset, record.value) for record in decode_records(read_all(log))]


def check_invariants(log: Log) -> None:
    end = log.log_end_offset
    offsets = [offset for offset, _ in contents(log)]
    assert offsets == list(range(log.log_start_offset, end)), "a hole in the log"
    for segment in log.segments:
        starts = {peek.position for peek in segment.iter_batches(0)}
        assert all(position in starts for position in segment.offset_index.values)
        assert all(segment.base_offset + key < end for key in segment.offset_index.keys)
        assert all(segment.base_offset + relative < end
                   for relative in segment.time_index.values)
    assert all(entry.start_offset < end for entry in log.leader_epoch_cache.entries)
    assert all(offset <= end for offset in log.producer_state.snapshot_offsets())
    assert TRUNCATION_MARKER not in os.listdir(log.directory)
    if end > log.log_start_offset:  # the producer continues where the log ends
        assert log.append(idempotent(end - 1)).duplicate
    assert log.append(idempotent(end)).base_offset == end


def run_crashes(tmp_path: Path, truncate: Callable[[Log], object],
                expected_new: Callable[[list[tuple[int, bytes | None]]],
                                       list[tuple[int, bytes | None]]],
                new_start: int) -> set[str]:
    template = tmp_path / "template"
    recovery_point = build(template)
    reference = open_log(template)
    old = contents(reference)
    new = expected_new(old)
    reference.close()
    counting = CrashingFileSystem()
    shutil.copytree(template, tmp_path / "count")
    log = open_log(tmp_path / "count", fs=counting)
    counting.steps = 0
    truncate(log)
    steps = counting.steps
    assert steps >= 8, f"only {steps} steps counted"
    outcomes: set[str] = set()
    crashes = 0
    for crash_at in range(1, steps + 1):
        directory = tmp_path / f"crash-{crash_at}"
        shutil.copytree(template, directory)
        fs = CrashingFileSystem()
        log = open_log(directory, fs=fs)
        fs.steps, fs.crash_at = 0, crash_at
        with pytest.raises((Crash, KafkaStorageError)):
            truncate(log)
        crashes += fs.crashes
        fs.die()
        recovered = open_log(directory, clean=False, recovery_point=recovery_point)
        got = contents(recovered)
        assert got in (old, new), f"neither the old nor the truncated log at step {crash_at}"
        outcome = "new" if got == new else "old"
        if outcome == "new":
            assert recovered.log_start_offset == new_start
        outcomes.add(outcome)
        check_invariants(recovered)
        recovered.close()
        shutil.rmtree(directory)
    assert crashes == steps, "every step must have had its crash injected"
    return outcomes


def test_crash_at_each_step_of_truncate_to(tmp_path: Path) -> None:
    outcomes = run_crashes(tmp_path, lambda log: log.truncate_to(TRUNCATE_TO),
                           lambda old: old[:TRUNCATE_TO], 0)
    assert outcomes == {"old", "new"}


def test_crash_at_each_step_of_truncate_fully_and_start_at(tmp_path: Path) -> None:
    outcomes = run_crashes(tmp_path, lambda log: log.truncate_fully_and_start_at(START_AT),
                           lambda old: [], START_AT)
    assert outcomes == {"old", "new"}
