"""The aborted-transaction index: its file format, what markers put in it, collecting it
for read_committed reads, and its life with the log (truncation, retention, recovery,
compaction's swap)."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest

from strom.protocol.records import build_end_txn_marker, iter_batches
from strom.storage import FileSystem, Log, LogConfig, LogManager
from strom.storage.log_results import FetchIsolation
from strom.storage.transaction_index import ENTRY_SIZE, AbortedTxn, TransactionIndex
from tests.support.power_loss import drop_unsynced_tail
from tests.support.storage import batch, open_log

Aborted = tuple[int, int, int]  # producer id, first offset, marker offset


class Workload:
    """Transactional producers writing to a log, and what a correct index must hold."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.sequences: dict[int, int] = {}
        self.open: dict[int, int] = {}  # producer id -> first offset of its transaction
        self.aborted: list[Aborted] = []

    def data(self, pid: int, count: int = 1) -> int:
        sequence = self.sequences.get(pid, 0)
        result = self.log.append(batch(count, producer_id=pid, producer_epoch=0,
                                       base_sequence=sequence, is_transactional=True))
        self.sequences[pid] = sequence + count
        self.open.setdefault(pid, result.base_offset)
        return result.base_offset

    def end(self, pid: int, commit: bool) -> int:
        offset = self.log.append(build_end_txn_marker(pid, 0, commit, 0, 2000)).base_offset
        first = self.open.pop(pid, None)
        if first is not None and not commit:
            self.aborted.append((pid, first, offset))
        return offset

    def expected(self, start: int, upper: int) -> list[tuple[int, int]]:
        return [(pid, first) for pid, first, last in self.aborted
                if last >= start and first < upper]


def entries(log: Log) -> list[AbortedTxn]:
    return [entry for segment in log.segments for entry in segment.txn_index.entries]


def pairs(found: list[AbortedTxn] | tuple[AbortedTxn, ...] | None) -> list[tuple[int, int]]:
    assert found is not None
    return [(entry.producer_id, entry.first_offset) for entry in found]


def kill(log: Log) -> None:
    """Stop as SIGKILL would: no flush, no snapshot, no trimmed indexes."""
    for segment in log.segments:
        segment.txn_index.close()
        segment.close()


def random_workload(log: Log, seed: int, operations: int = 150) -> Workload:
    rng = random.Random(seed)
    work = Workload(log)
    for _ in range(operations):
        pid = rng.choice([1, 2, 3])
        roll = rng.random()
        if roll < 0.55:
            work.data(pid, rng.randint(1, 3))
        elif roll < 0.9 and pid in work.open:
            work.end(pid, commit=rng.random() < 0.4)
        elif roll < 0.95:
            work.end(pid, commit=False)  # perhaps an empty transaction's marker
        else:
            log.append(batch(1))  # a plain producer's batch
    return work


# --- the file -------------------------------------------------------------------------


def test_entries_are_kafkas_34_bytes_and_load_back(tmp_path: Path) -> None:
    fs = FileSystem()
    path = str(tmp_path / "00000000000000000100.txnindex")
    index = TransactionIndex(fs, path, 100)
    index.truncate_to(0)
    assert not os.path.exists(path)  # created lazily, at the first entry
    first, second = AbortedTxn(7, 95, 103, 101), AbortedTxn(2**40, 104, 110, 111)
    index.append(first)
    index.append(second)
    assert ENTRY_SIZE == 34
    assert (tmp_path / "00000000000000000100.txnindex").read_bytes() == \
        struct.pack(">hqqqq", 0, 7, 95, 103, 101) + struct.pack(">hqqqq", 0, 2**40, 104, 110, 111)
    with pytest.raises(ValueError):
        index.append(AbortedTxn(8, 100, 110, 111))  # last offsets strictly increase
    index.close()
    reloaded = TransactionIndex(fs, path, 100)
    reloaded.load()
    assert reloaded.entries == [first, second]
    reloaded.truncate_to(110)  # keeps entries ending below 110
    assert reloaded.entries == [first] and os.path.getsize(path) == ENTRY_SIZE
    reloaded.close()


def test_a_torn_or_disordered_tail_is_cut_on_load(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                  ) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    good = struct.pack(">hqqqq", 0, 1, 0, 5, 6)
    path.write_bytes(good + struct.pack(">hqqqq", 0, 2, 1, 4, 7) + b"\x00" * 10)
    index = TransactionIndex(FileSystem(), str(path), 0)
    index.load()
    assert index.entries == [AbortedTxn(1, 0, 5, 6)]
    assert path.read_bytes() == good and "cutting" in caplog.text
    index.close()


# --- what markers write ---------------------------------------------------------------


def test_aborts_are_indexed_with_the_lso_after_their_marker(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    work = Workload(log)
    work.data(7, 2)  # 0-1
    work.data(8)  # 2
    assert work.end(7, commit=False) == 3  # pid 8's transaction still open at 2
    assert entries(log) == [AbortedTxn(7, 0, 3, 2)]
    work.end(8, commit=True)  # a commit: no entry
    work.end(9, commit=False)  # no open transaction: completes nothing
    work.data(7)  # 6
    work.end(7, commit=False)  # 7: nothing else open, the LSO is the marker's offset + 1
    assert entries(log) == [AbortedTxn(7, 0, 3, 2), AbortedTxn(7, 6, 7, 8)]
    assert log.last_stable_offset == log.log_end_offset == 8
    assert [name for name in os.listdir(tmp_path) if name.endswith(".txnindex")] == \
        ["00000000000000000000.txnindex"]


def test_a_completed_transaction_is_unstable_until_the_hw_passes_its_marker(tmp_path: Path
                                                                           ) -> None:
    log = open_log(tmp_path)
    log.hw_follows_leo = False  # a leader with followers: replication moves the HW
    work = Workload(log)
    work.data(1, 2)  # 0-1
    work.data(2)  # 2
    work.end(1, commit=True)  # 3
    assert log.update_high_watermark(3) == 3 and log.last_stable_offset == 0
    assert log.update_high_watermark(4) == 4 and log.last_stable_offset == 2  # pid 2's is open
    work.end(2, commit=False)  # 4
    assert log.last_stable_offset == 2
    assert log.update_high_watermark(5) == 5 and log.last_stable_offset == 5


def test_the_lso_is_never_below_the_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    work = Workload(log)
    log.append(batch(1))  # 0
    work.data(1, 2)  # 1-2, open
    log.append(batch(1))  # 3
    assert log.last_stable_offset == 1
    log.delete_records(2)  # DeleteRecords into the open transaction
    assert log.last_stable_offset == 2
    result = log.read(2, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED)
    assert result.last_stable_offset == 2 and result.region is None
    work.end(1, commit=False)  # 4
    assert log.last_stable_offset == log.log_end_offset == 5


def test_a_log_without_aborts_has_no_index_file_and_reads_none(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    work = Workload(log)
    for _ in range(5):
        work.data(1, 2)
        work.end(1, commit=True)
    assert len(log.segments) > 1
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".txnindex")]
    assert log.read(0, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED).aborted_transactions == ()
    assert log.read(0, 1 << 20).aborted_transactions is None  # read_uncommitted


@pytest.mark.parametrize("seed", range(4))
def test_collect_across_segments_matches_a_model(tmp_path: Path, seed: int) -> None:
    log = open_log(tmp_path, segment_bytes=700)
    work = random_workload(log, seed)
    assert len(log.segments) > 4 and len(work.aborted) > 5
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries(log)] == work.aborted
    end = log.log_end_offset
    for start in range(0, end + 1):
        for upper in range(start + 1, end + 2, 3):
            assert pairs(log.collect_aborted_transactions(start, upper)) == \
                work.expected(start, upper), (start, upper)


@pytest.mark.parametrize("seed", range(2))
def test_read_committed_lists_the_aborts_its_records_overlap(tmp_path: Path, seed: int) -> None:
    log = open_log(tmp_path, segment_bytes=900)
    work = random_workload(log, seed + 10)
    for pid in list(work.open):
        work.end(pid, commit=False)
    for offset in range(log.log_end_offset):
        for max_bytes in (1, 200):
            result = log.read(offset, max_bytes, isolation=FetchIsolation.TXN_COMMITTED)
            assert result.region is not None
            returned = [header for _, header in iter_batches(result.region.read(log.fs))]
            upper = returned[-1].next_offset
            listed = pairs(result.aborted_transactions)
            assert set(work.expected(offset, upper)) <= set(listed)
            # nothing listed that the read cannot meet
            assert set(listed) <= set(work.expected(offset, log.last_stable_offset))


def test_an_open_transaction_bounds_the_read_and_what_it_lists(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    work = Workload(log)
    work.data(1, 2)  # 0-1
    work.data(2)  # 2: begins before pid 1 aborts, still open
    work.end(1, commit=False)  # 3
    work.data(3)  # 4
    work.end(3, commit=False)  # 5
    result = log.read(0, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED)
    assert result.last_stable_offset == 2
    assert pairs(result.aborted_transactions) == [(1, 0)]  # not pid 3's, above the LSO
    work.end(2, commit=True)  # 6
    result = log.read(3, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED)
    assert result.last_stable_offset == 7
    assert pairs(result.aborted_transactions) == [(1, 0), (3, 4)]  # pid 1's began before 3


# --- lifecycle ------------------------------------------------------------------------


def test_truncation_drops_entries_at_and_after_the_new_end(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600, )
    work = random_workload(log, 21)
    assert len(work.aborted) > 3 and len(log.segments) > 3
    _, _, cut_at = work.aborted[len(work.aborted) // 2]  # truncate at a marker
    log.truncate_to(cut_at)
    kept = [aborted for aborted in work.aborted if aborted[2] < cut_at]
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries(log)] == kept
    assert log.log_end_offset == cut_at
    log.close()
    reopened = open_log(tmp_path, segment_bytes=600)
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries(reopened)] == kept
    reopened.close()


def test_retention_deletes_a_segments_index_with_it(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300, file_delete_delay_ms=0)
    work = Workload(log)
    for pid in (1, 2, 3):
        work.data(pid, 2)
        work.end(pid, commit=False)
    indexed = sorted(name for name in os.listdir(tmp_path) if name.endswith(".txnindex"))
    assert len(indexed) > 1
    first_kept = log.segments[1].base_offset
    log.delete_records(first_kept)
    assert log.delete_old_segments(log.clock()) == 1
    log.delete_pending_files(10**12)
    assert indexed[0] not in os.listdir(tmp_path)
    assert pairs(log.collect_aborted_transactions(0, log.log_end_offset)) == \
        work.expected(first_kept, log.log_end_offset)


@pytest.mark.parametrize("snapshots", ["kept", "deleted"])
def test_a_crash_rebuilds_the_index_without_duplicates(tmp_path: Path, snapshots: str) -> None:
    log = open_log(tmp_path, segment_bytes=700)
    work = random_workload(log, 5)
    written = entries(log)
    assert len(log.segments) > 3 and any(e.last_offset >= log.segments.active.base_offset
                                         for e in written)
    kill(log)
    if snapshots == "deleted":
        for name in os.listdir(tmp_path):
            if name.endswith(".snapshot"):
                os.unlink(tmp_path / name)
    # The active segment's index lost its last entry (a torn page); recovery re-reads it.
    active = sorted(name for name in os.listdir(tmp_path) if name.endswith(".txnindex"))[-1]
    path = tmp_path / active
    path.write_bytes(path.read_bytes()[:-ENTRY_SIZE - 5])
    reopened = open_log(tmp_path, clean=False, segment_bytes=700)
    assert entries(reopened) == written
    end = reopened.log_end_offset
    assert pairs(reopened.collect_aborted_transactions(0, end)) == work.expected(0, end)
    # A second crash and recovery changes nothing (no entry appended twice).
    kill(reopened)
    again = open_log(tmp_path, clean=False, segment_bytes=700)
    assert entries(again) == written
    again.close()


class SyncRecordingFileSystem(FileSystem):
    """Records the path of every file fdatasync'ed."""

    def __init__(self) -> None:
        self.synced: set[str] = set()

    def fdatasync(self, fd: int) -> None:
        self.synced.add(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        super().fdatasync(fd)


def test_the_entries_a_replay_rebuilds_are_synced(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=700)
    random_workload(log, 7)
    written = entries(log)
    kill(log)
    for name in os.listdir(tmp_path):
        if name.endswith(".snapshot"):
            os.unlink(tmp_path / name)  # the replay starts at the log start: every index rebuilt
    fs = SyncRecordingFileSystem()
    reopened = open_log(tmp_path, clean=False, fs=fs, segment_bytes=700)
    assert entries(reopened) == written
    indexes = {name for name in os.listdir(tmp_path) if name.endswith(".txnindex")}
    assert len(indexes) > 2 and indexes <= fs.synced
    reopened.close()


def test_a_crash_that_cuts_the_log_drops_the_lost_markers_entries(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    work = Workload(log)
    work.data(1)
    work.end(1, commit=False)  # 1
    work.data(2)
    last = work.end(2, commit=False)  # 3
    kill(log)
    segment = tmp_path / "00000000000000000000.log"
    data = segment.read_bytes()
    segment.write_bytes(data[:-10])  # the last marker torn
    reopened = open_log(tmp_path, clean=False)
    assert reopened.log_end_offset == last
    assert entries(reopened) == [AbortedTxn(1, 0, 1, 2)]
    assert reopened.last_stable_offset == 2  # pid 2's transaction is open again
    reopened.close()


def test_a_power_loss_keeps_the_entries_of_the_synced_markers(tmp_path: Path) -> None:
    logs = LogManager(str(tmp_path), LogConfig(segment_bytes=1 << 20))
    logs.startup()
    work = Workload(logs.create_log("t", 0))
    for pid in (1, 2):
        work.data(pid)
        work.end(pid, commit=False)  # 0-1, 2-3
        if pid == 1:
            work.log.roll()  # synced
        else:
            work.log.flush()
    logs.checkpoint()  # recovery point 4
    work.data(3)
    work.end(3, commit=False)  # 4-5: in the page cache only
    assert logs._lock_fd is not None
    logs.fs.unlock(logs._lock_fd)  # the process is gone
    drop_unsynced_tail(str(tmp_path))
    again = LogManager(str(tmp_path), LogConfig(segment_bytes=1 << 20))
    again.startup()
    recovered = again.logs[("t", 0)]
    assert recovered.log_end_offset == 4
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries(recovered)] == \
        work.aborted[:2]
    again.close()


# --- compaction's swap ----------------------------------------------------------------


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


def compacted_log(directory: Path, fs: FileSystem) -> tuple[Log, list[AbortedTxn]]:
    """Three segments, each with keys written over and an aborted transaction, then an
    active one; closed cleanly."""
    log = open_log(directory, fs=fs, cleanup_policy="compact", segment_bytes=1 << 20)
    work = Workload(log)
    for segment in range(3):
        for number in range(6):
            log.append(batch(1, tag=number + segment))  # keys k0: written over
        work.data(segment + 1, 2)
        work.end(segment + 1, commit=False)
        log.roll()
    log.append(batch(1))
    written = entries(log)
    assert len(written) == 3
    log.close()
    return log, written


def test_compaction_keeps_the_aborts_of_the_segments_it_replaces(tmp_path: Path) -> None:
    from strom.compaction.cleaner import Cleaner
    from strom.compaction.offset_map import OffsetMap

    _, written = compacted_log(tmp_path / "count", FileSystem())
    counting = CrashingFileSystem()
    log = open_log(tmp_path / "count", fs=counting, cleanup_policy="compact",
                   segment_bytes=1 << 20)
    Cleaner(OffsetMap(1 << 16)).clean(log, None)
    assert len(log.segments) == 2 and entries(log) == written  # one cleaned segment holds all
    steps = counting.steps
    log.close()
    reopened = open_log(tmp_path / "count", cleanup_policy="compact", segment_bytes=1 << 20)
    assert entries(reopened) == written
    reopened.close()
    for crash_at in range(1, steps + 1):
        directory = tmp_path / f"crash-{crash_at}"
        compacted_log(directory, FileSystem())
        fs = CrashingFileSystem(crash_at)
        log = open_log(directory, fs=fs, cleanup_policy="compact", segment_bytes=1 << 20)
        fs.steps = 0
        with pytest.raises(Exception):  # noqa: B017 - Crash, or the KafkaStorageError it caused
            Cleaner(OffsetMap(1 << 16)).clean(log, None)
        for segment in log.segments:  # the process is gone: files stay as they are
            segment.txn_index.close()
            os.close(segment.fd)
        recovered = open_log(directory, clean=False, cleanup_policy="compact",
                             segment_bytes=1 << 20)
        assert entries(recovered) == written, f"after a crash at step {crash_at}"
        assert not [name for name in os.listdir(directory)
                    if name.endswith((".cleaned", ".swap", ".deleted"))]
        recovered.close()
