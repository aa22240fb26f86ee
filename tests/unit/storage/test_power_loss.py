"""tests/support/power_loss.py: a data dir after a power loss, and what recovery makes of it.

A LogManager appends, checkpoints and "dies" (nothing closed, its lock released as a
killed process's is); ``drop_unsynced_tail`` takes what the page cache held; the
next start must end each log at its last synced batch, with indexes and producer
state to match.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from strom.protocol.records import iter_batches
from strom.storage import Log, LogConfig, LogManager
from strom.storage.log_manager import wall_clock_ms
from tests.support.power_loss import drop_unsynced_tail
from tests.support.storage import batch, read_all

PID = 11


def start(data_dir: Path) -> LogManager:
    logs = LogManager(str(data_dir), LogConfig(segment_bytes=1 << 20, index_interval_bytes=1))
    logs.startup()
    return logs


def die(logs: LogManager) -> None:
    """A SIGKILL: no flush, no checkpoint, no clean-shutdown marker; the lock goes."""
    assert logs._lock_fd is not None
    logs.fs.unlock(logs._lock_fd)


def produce(log: Log, sequence: int) -> bytearray:
    """Two records of an idempotent producer; returns the batch as sent. Timestamped
    now: the LogManager's wall clock expires producers a day older on loading."""
    sent = batch(2, producer_id=PID, producer_epoch=0, base_sequence=sequence, tag=sequence,
                 value_size=30, timestamp=wall_clock_ms())
    log.append(bytearray(sent))
    return sent


def active_size(data_dir: Path, log: Log) -> int:
    return os.path.getsize(data_dir / "t-0" / os.path.basename(log.segments.active.log_path))


def test_the_active_segment_loses_what_follows_the_checkpointed_recovery_point(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    logs = start(tmp_path)
    log = logs.create_log("t", 0)
    logs.create_log("idle", 0)
    sent = [produce(log, sequence) for sequence in range(0, 10, 2)]  # offsets 0-9
    log.roll()  # syncs them; recovery point 10
    sent += [produce(log, sequence) for sequence in range(10, 16, 2)]  # 10-15
    logs.checkpoint()
    sent += [produce(log, sequence) for sequence in range(16, 20, 2)]  # 16-19
    synced = read_all(log)[: log.segments[0].size]
    lost = active_size(tmp_path, log)
    die(logs)

    assert drop_unsynced_tail(str(tmp_path)) == {"idle-0": 0, "t-0": lost}
    active = tmp_path / "t-0" / f"{10:020d}.log"
    assert active.stat().st_size == 0
    assert not (tmp_path / "t-0" / f"{10:020d}.index").exists()
    assert (tmp_path / "t-0" / f"{0:020d}.index").exists()  # a rolled segment's survive

    with caplog.at_level(logging.INFO, logger="strom.storage"):
        again = start(tmp_path)
    assert "(unclean shutdown)" in caplog.text
    recovered = again.logs[("t", 0)]
    assert recovered.log_end_offset == recovered.recovery_point == 10
    assert read_all(recovered) == synced
    assert recovered.read(8, 1 << 20).region is not None
    # the producer state is the snapshot the roll wrote: the lost batches are new again
    result = recovered.append(bytearray(sent[5]))
    assert (result.base_offset, result.duplicate) == (10, False)
    assert recovered.append(bytearray(sent[4])).duplicate  # offsets 8-9 survived
    again.close()


def test_a_flush_before_the_checkpoint_keeps_the_synced_part_of_the_active_segment(
        tmp_path: Path) -> None:
    logs = start(tmp_path)
    log = logs.create_log("t", 0)
    for sequence in range(0, 6, 2):
        produce(log, sequence)
    log.flush()
    logs.checkpoint()  # recovery point 6, inside the only segment
    kept = read_all(log)
    for sequence in range(6, 12, 2):
        produce(log, sequence)
    size = active_size(tmp_path, log)
    die(logs)

    assert drop_unsynced_tail(str(tmp_path)) == {"t-0": size - len(kept)}
    again = start(tmp_path)
    recovered = again.logs[("t", 0)]
    assert recovered.log_end_offset == 6 and read_all(recovered) == kept
    assert recovered.producer_state.producers[PID].last_sequence == 5
    again.close()


def test_a_torn_batch_is_cut_by_recovery_which_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    logs = start(tmp_path)
    log = logs.create_log("t", 0)
    produce(log, 0)
    log.flush()
    logs.checkpoint()
    first_size = log.segments.active.size
    produce(log, 2)
    produce(log, 4)
    size = active_size(tmp_path, log)
    die(logs)

    assert drop_unsynced_tail(str(tmp_path), torn_bytes=25) == {"t-0": size - first_size - 25}
    with caplog.at_level(logging.WARNING, logger="strom.storage"):
        again = start(tmp_path)
    assert "recovery truncated the log at offset 2" in caplog.text
    assert f"bytes [{first_size}, {first_size + 25})" in caplog.text
    assert again.logs[("t", 0)].log_end_offset == 2
    again.close()


def test_without_a_checkpoint_entry_only_rolled_segments_survive(tmp_path: Path) -> None:
    logs = start(tmp_path)
    log = logs.create_log("t", 0)
    for sequence in range(0, 4, 2):
        produce(log, sequence)
    log.roll()
    produce(log, 4)
    rolled = read_all(log)[: log.segments[0].size]
    on_disk = read_all_of(tmp_path)
    die(logs)
    assert not (tmp_path / "recovery-point-offset-checkpoint").exists()

    assert drop_unsynced_tail(str(tmp_path))["t-0"] == len(on_disk) - len(rolled) > 0
    again = start(tmp_path)
    recovered = again.logs[("t", 0)]
    assert recovered.log_end_offset == 4 and read_all(recovered) == rolled
    again.close()


def test_a_clean_close_leaves_nothing_to_lose(tmp_path: Path) -> None:
    logs = start(tmp_path)
    log = logs.create_log("t", 0)
    for sequence in range(0, 6, 2):
        produce(log, sequence)
    expected = read_all(log)
    logs.close()
    assert drop_unsynced_tail(str(tmp_path)) == {"t-0": 0}
    again = start(tmp_path)
    assert read_all(again.logs[("t", 0)]) == expected
    again.close()


def read_all_of(data_dir: Path) -> bytes:
    """Every segment's bytes of ``t-0`` as on disk, in offset order."""
    files = sorted((data_dir / "t-0").glob("*.log"))
    data = b"".join(path.read_bytes() for path in files)
    assert next(header.base_offset for _, header in iter_batches(data)) == 0
    return data
