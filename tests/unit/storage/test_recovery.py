"""LogLoader recovery, corruption of copies of a log, and disk failures via the fs seam."""

from __future__ import annotations

import errno
import logging
import random
import shutil
from pathlib import Path

import pytest

from strom.protocol.records import iter_batches, validate_crc
from strom.storage import KafkaStorageError
from strom.storage.fs import FileSystem
from tests.support.storage import FaultyFileSystem, batch, open_log, read_all

SEGMENT_BYTES = 3000


def build_log(directory: Path, batches: int = 40) -> list[bytes]:
    log = open_log(directory, segment_bytes=SEGMENT_BYTES, index_interval_bytes=200)
    written = []
    for i in range(batches):
        data = batch(1 + i % 4, value_size=30 + i % 50, tag=i)
        log.append(data)
        written.append(bytes(data))
    log.close()
    return written


def check_log_is_prefix(directory: Path, written: list[bytes]) -> int:
    """Reopen uncleanly from offset 0; the log must be a whole prefix of what was written."""
    log = open_log(directory, clean=False, recovery_point=0,
                   segment_bytes=SEGMENT_BYTES, index_interval_bytes=200)
    data = read_all(log) if log.log_end_offset > log.log_start_offset else b""
    expected_offset = 0
    position = 0
    for count, (_, header) in enumerate(iter_batches(data)):
        validate_crc(data, position)
        assert header.base_offset == expected_offset
        # Byte-identical except the partition leader epoch (bytes 12-15), which no
        # checksum of Kafka's format covers: damage there cannot be detected.
        stored = data[position : position + header.size]
        assert stored[:12] == written[count][:12] and stored[16:] == written[count][16:]
        expected_offset = header.next_offset
        position += header.size
    assert position == len(data) and log.log_end_offset == expected_offset
    check_indexes_agree(log)
    log.close()
    return count + 1 if data else 0


def check_indexes_agree(log: object) -> None:
    from strom.storage import Log

    assert isinstance(log, Log)
    for segment in log.segments:
        starts = {peek.position: peek for peek in segment.iter_batches(0)}
        for slot in range(segment.offset_index.entries):
            offset, position = segment.offset_index.entry(slot)
            assert position in starts and starts[position].next_offset - 1 == offset


def test_clean_reopen_keeps_everything(tmp_path: Path) -> None:
    written = build_log(tmp_path)
    log = open_log(tmp_path, segment_bytes=SEGMENT_BYTES)
    assert read_all(log) == b"".join(written)[: len(read_all(log))]
    assert log.log_end_offset == sum(1 + i % 4 for i in range(40))
    assert len(log.segments) >= 3
    check_indexes_agree(log)


def test_unclean_reopen_rebuilds_lost_indexes(tmp_path: Path) -> None:
    written = build_log(tmp_path)
    for index in tmp_path.glob("*.index"):
        index.unlink()
    for index in tmp_path.glob("*.timeindex"):
        index.write_bytes(b"\x00" * 100)
    assert check_log_is_prefix(tmp_path, written) == len(written)


def test_torn_tail_is_truncated_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    written = build_log(tmp_path)
    last = sorted(tmp_path.glob("*.log"))[-1]
    with open(last, "ab") as file:
        file.write(written[5][:40])
    size = last.stat().st_size
    with caplog.at_level(logging.WARNING):
        assert check_log_is_prefix(tmp_path, written) == len(written)
    end = open_log(tmp_path).log_end_offset
    assert f"topic-0: recovery truncated the log at offset {end}: bytes [{size - 40}, " \
           f"{size}) of {last} were torn or corrupt; every offset from {end} on is gone" \
        in caplog.text


def test_damage_in_a_middle_segment_drops_later_segments(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    written = build_log(tmp_path)
    second = sorted(tmp_path.glob("*.log"))[1]
    raw = bytearray(second.read_bytes())
    raw[100] ^= 0x55
    second.write_bytes(raw)
    third = sorted(tmp_path.glob("*.log"))[2]
    with caplog.at_level(logging.WARNING):
        kept = check_log_is_prefix(tmp_path, written)
    assert 0 < kept < len(written)
    end = open_log(tmp_path).log_end_offset
    assert f"topic-0: recovery truncated the log at offset {end}: bytes [" in caplog.text
    assert f"topic-0: recovery deleted segment {third} (offsets from {int(third.stem)}" \
        in caplog.text
    assert len(list(tmp_path.glob("*.log"))) == 2


@pytest.mark.parametrize("seed", range(30))
def test_corruption_of_copies_never_returns_a_corrupt_batch(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    original = tmp_path / "original"
    written = build_log(original, batches=25)
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    target = rng.choice(sorted(copy.glob("*.log")))
    raw = bytearray(target.read_bytes())
    at = rng.randrange(len(raw))
    damage = rng.choice(["flip", "zero", "truncate"])
    if damage == "flip":
        raw[at] ^= 1 << rng.randrange(8)
    elif damage == "zero":
        end = min(len(raw), at + rng.randint(1, 64))
        raw[at:end] = bytes(end - at)
    else:
        del raw[at:]
    target.write_bytes(raw)
    kept = check_log_is_prefix(copy, written)
    assert batches_before(copy, target.name, at) <= kept <= len(written)


def batches_before(directory: Path, damaged: str, at: int) -> int:
    """Batches wholly before byte ``at`` of file ``damaged``: recovery must keep them."""
    count = 0
    for path in sorted((directory.parent / "original").glob("*.log")):
        for position, header in iter_batches(path.read_bytes()):
            if path.name == damaged and position + header.size > at:
                return count
            count += 1
    return count


def test_append_enospc_fails_cleanly_and_log_stays_readable(tmp_path: Path) -> None:
    fs = FaultyFileSystem()
    log = open_log(tmp_path, fs=fs, flush_messages=1)
    acknowledged = [bytes(batch(2, tag=i)) for i in range(5)]
    for data in acknowledged:
        log.append(data)
    before = read_all(log)
    fs.fail_writes_after = 30  # a short write, then ENOSPC
    with pytest.raises(KafkaStorageError):
        log.append(batch(3, value_size=500))
    assert log.log_end_offset == 10 and read_all(log) == before
    fs.fail_writes_after = None
    log.append(batch(1))  # the disk has room again: appends continue
    assert log.log_end_offset == 11
    log.close()
    again = open_log(tmp_path, clean=False)
    assert read_all(again)[: len(before)] == before and again.log_end_offset == 11


def test_enospc_with_failing_truncate_is_recovered_on_reopen(tmp_path: Path) -> None:
    fs = FaultyFileSystem()
    log = open_log(tmp_path, fs=fs)
    log.append(batch(2))
    before = read_all(log)
    fs.fail_writes_after, fs.fail_truncate = 10, True
    with pytest.raises(KafkaStorageError):
        log.append(batch(2, value_size=300))
    assert read_all(log) == before  # the 10 stray bytes are never served
    fs.fail_writes_after, fs.fail_truncate = None, False
    assert log.close() is False  # no clean-shutdown claim with garbage on disk
    again = open_log(tmp_path, clean=False)
    assert read_all(again) == before


def test_fsync_failure_takes_the_log_offline(tmp_path: Path) -> None:
    fs = FaultyFileSystem()
    log = open_log(tmp_path, fs=fs, flush_messages=1)
    log.append(batch(1))
    fs.sync_errno = errno.EIO
    with pytest.raises(KafkaStorageError):
        log.append(batch(1))
    fs.sync_errno = None
    assert log.offline
    with pytest.raises(KafkaStorageError):
        log.append(batch(1))
    assert log.read(0, 1000).region is not None


def test_missing_recovery_point_means_full_revalidation(tmp_path: Path) -> None:
    written = build_log(tmp_path)
    first = sorted(tmp_path.glob("*.log"))[0]
    raw = bytearray(first.read_bytes())
    raw[-1] ^= 1  # below any recovery point a clean open would trust
    first.write_bytes(raw)
    trusting = open_log(tmp_path, clean=False, recovery_point=10**9,
                        segment_bytes=SEGMENT_BYTES)
    assert trusting.log_end_offset == sum(1 + i % 4 for i in range(40))
    trusting.close()
    assert check_log_is_prefix(tmp_path, written) < len(written)


def test_fs_seam_is_used_for_appends(tmp_path: Path) -> None:
    calls: list[str] = []

    class Recording(FileSystem):
        def pwrite(self, fd: int, data: object, position: int) -> int:
            calls.append("pwrite")
            return super().pwrite(fd, data, position)  # type: ignore[arg-type]

    log = open_log(tmp_path, fs=Recording())
    log.append(batch(1))
    assert "pwrite" in calls
