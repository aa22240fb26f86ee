"""A clean close does only the work there is: an idle log's files are already final.

Kafka's rule for producer snapshots (``takeSnapshot`` writes only when something was
appended since the last one) and its like for indexes and the ``.log``: a file that has
not changed since it was last made durable is closed, not trimmed, synced or rewritten.
Each test checks both halves: what the close skips, and that the next start still finds
a whole, trusted log (no index rebuilt, the same producer state).
"""

from __future__ import annotations

import os
from pathlib import Path

from strom.storage import Log
from strom.storage.fs import FileSystem
from tests.support.storage import batch, open_log, read_all


class Recording(FileSystem):
    """The real file system, recording every call that changes or syncs a file."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def _note(self, call: str, fd: int) -> None:
        self.calls.append((call, os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))

    def fdatasync(self, fd: int) -> None:
        self._note("fdatasync", fd)
        super().fdatasync(fd)

    def fsync(self, fd: int) -> None:
        self._note("fsync", fd)
        super().fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        self._note("ftruncate", fd)
        super().ftruncate(fd, size)

    def fsync_dir(self, path: str) -> None:
        self.calls.append(("fsync_dir", os.path.basename(path)))
        super().fsync_dir(path)

    def rename(self, source: str, target: str) -> None:
        self.calls.append(("rename", os.path.basename(target)))
        super().rename(source, target)


def produce(log: Log, sequence: int, *, pid: int = 1, timestamp: int = 1000
            ) -> tuple[int, bool]:
    result = log.append(batch(1, producer_id=pid, producer_epoch=0, base_sequence=sequence,
                              timestamp=timestamp))
    return result.base_offset, result.duplicate


def snapshots(directory: Path) -> list[int]:
    return sorted(int(name.split(".")[0]) for name in os.listdir(directory)
                  if name.endswith(".snapshot"))


def index_sizes(directory: Path) -> dict[str, int]:
    return {name: (directory / name).stat().st_size for name in os.listdir(directory)
            if name.endswith((".index", ".timeindex"))}


def test_idle_close_after_a_clean_start_touches_no_file(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    for sequence in range(12):
        produce(log, sequence)
    assert len(log.segments) > 1
    assert log.close()
    written, sizes = read_all(open_log(tmp_path, segment_bytes=400)), index_sizes(tmp_path)
    fs = Recording()
    idle = open_log(tmp_path, fs=fs, segment_bytes=400)
    state = dict(idle.producer_state.producers)
    fs.calls.clear()
    assert idle.close()
    assert fs.calls == []
    again = open_log(tmp_path, fs=fs, segment_bytes=400)
    assert [call for call in fs.calls if call[0] == "rename"] == []  # nothing rebuilt
    assert read_all(again) == written and index_sizes(tmp_path) == sizes
    assert again.producer_state.producers == state
    assert produce(again, 11) == (11, True)  # the last batch is still known: a retry


def test_new_empty_log_closes_without_a_sync_and_opens_again(tmp_path: Path) -> None:
    fs = Recording()
    log = open_log(tmp_path, fs=fs)
    fs.calls.clear()
    assert log.close()
    assert fs.calls == []
    assert snapshots(tmp_path) == []
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 0
    assert produce(reopened, 0) == (0, False)


def test_an_append_after_the_start_is_made_durable_at_close(tmp_path: Path) -> None:
    produce(log := open_log(tmp_path), 0)
    assert log.close()
    fs = Recording()
    log = open_log(tmp_path, fs=fs)
    produce(log, 1, timestamp=5000)  # a new max timestamp: a time index entry at close
    fs.calls.clear()
    assert log.close()
    synced = {name for call, name in fs.calls if call == "fdatasync"}
    # The offset index got no entry (index.interval.bytes): it needs nothing.
    assert synced == {"00000000000000000000.log", "00000000000000000000.timeindex"}
    assert snapshots(tmp_path) == [1, 2]
    assert index_sizes(tmp_path) == {"00000000000000000000.index": 0,  # not preallocated
                                     "00000000000000000000.timeindex": 24}  # trimmed
    assert produce(open_log(tmp_path), 1) == (1, True)


def test_recovered_indexes_are_synced_by_the_clean_close(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for sequence in range(3):
        produce(log, sequence)
    for segment in log.segments:  # killed: nothing flushed, no snapshot
        segment.close()
    fs = Recording()
    recovered = open_log(tmp_path, fs=fs, clean=False)
    fs.calls.clear()
    assert recovered.close()
    synced = {name for call, name in fs.calls if call == "fdatasync"}
    assert {"00000000000000000000.index", "00000000000000000000.timeindex"} <= synced
    assert snapshots(tmp_path) == [3]


def test_no_snapshot_rewritten_after_a_truncation_back_to_it(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 0)
    assert log.close()
    fs = Recording()
    log = open_log(tmp_path, fs=fs)
    produce(log, 1)
    log.truncate_to(1)  # the state is the snapshot's again, reloaded from it
    fs.calls.clear()
    assert log.close()
    assert not any(name.endswith(".snapshot") for _, name in fs.calls)
    assert snapshots(tmp_path) == [1]
    reopened = open_log(tmp_path)
    assert produce(reopened, 1) == (1, False)  # the truncated batch is not a duplicate


def kill(log: Log) -> None:
    """Stop as SIGKILL would: nothing flushed, trimmed or snapshotted."""
    for segment in log.segments:
        segment.close()


def test_unclean_start_syncs_only_what_it_cut_and_keeps_the_recovery_point(
        tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    for sequence in range(12):
        produce(log, sequence)
    bases = [segment.base_offset for segment in log.segments]
    assert len(bases) > 2
    written = read_all(log)
    kill(log)
    fs = Recording()
    # Checkpointed recovery point inside the second segment: both are re-validated.
    restarted = open_log(tmp_path, fs=fs, clean=False, recovery_point=bases[1] + 1,
                         segment_bytes=400)
    assert read_all(restarted) == written
    synced = {name for call, name in fs.calls if call in ("fdatasync", "fsync_dir")}
    assert f"{bases[-1]:020d}.log" not in synced and tmp_path.name not in synced
    assert {f"{base:020d}.log" for base in bases[1:-1]} <= synced
    # What it did not sync stays above the recovery point: a flush or close syncs it.
    assert restarted.recovery_point == bases[-1]
    kill(restarted)
    again = open_log(tmp_path, fs=fs, clean=False, recovery_point=bases[-1],
                     segment_bytes=400)
    assert read_all(again) == written and again.recovery_point == bases[-1]
    fs.calls.clear()
    assert again.close()
    assert again.recovery_point == again.log_end_offset
    assert f"{bases[-1]:020d}.log" in {name for call, name in fs.calls if call == "fdatasync"}


def test_unclean_start_syncs_the_directory_after_cutting_a_torn_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 0)
    kill(log)
    with open(tmp_path / "00000000000000000000.log", "ab") as tail:
        tail.write(b"\x00\x00\x00\x00\x00\x00\x00\x01torn")  # half a batch header
    fs = Recording()
    restarted = open_log(tmp_path, fs=fs, clean=False)
    assert restarted.log_end_offset == 1
    assert ("fsync_dir", tmp_path.name) in fs.calls
