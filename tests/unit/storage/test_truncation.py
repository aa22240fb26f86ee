"""Log.truncate_to and Log.truncate_fully_and_start_at: reads, appends, indexes, epochs,
producer state, checkpoints, and what recovery does with an interrupted truncation."""

from __future__ import annotations

import logging
import os
from itertools import pairwise
from pathlib import Path

import pytest

from strom.compaction.cleaner import Cleaner, CleanerAborted
from strom.compaction.offset_map import OffsetMap
from strom.protocol.records import build_record_batch, decode_records, iter_batches
from strom.storage import FetchIsolation, Log, LogManager, OffsetOutOfRangeError
from strom.storage.errors import OutOfOrderSequenceError
from strom.storage.truncation import TRUNCATION_MARKER, TruncationKind, write_marker
from tests.support.storage import batch, open_log, read_all

SEGMENT_BYTES = 700  # a few batches of two 100-byte records per segment


def filled(directory: Path, batches: int = 12, **config: object) -> Log:
    """``batches`` batches of two records (offsets 2n, 2n+1; timestamps 1000 + offset)."""
    log = open_log(directory, segment_bytes=SEGMENT_BYTES, index_interval_bytes=1, **config)
    for number in range(batches):
        log.append(batch(2, value_size=100, tag=number, timestamp=1000 + 2 * number))
    return log


def offsets_of(log: Log) -> list[int]:
    return [record.offset for record in decode_records(read_all(log))] \
        if log.log_end_offset > log.log_start_offset else []


def assert_consistent(log: Log) -> None:
    """No hole, no index entry, time index entry or epoch past the log end."""
    assert offsets_of(log) == list(range(log.log_start_offset, log.log_end_offset))
    assert log.segments.active.next_offset == log.log_end_offset
    for segment in log.segments:
        index = segment.offset_index
        starts = {peek.position: peek for peek in segment.iter_batches(0)}
        for slot in range(index.entries):
            offset, position = index.entry(slot)
            assert position in starts and starts[position].next_offset - 1 == offset
        for slot in range(segment.time_index.entries):
            assert segment.time_index.base_offset + segment.time_index.values[slot] \
                < log.log_end_offset
    assert all(entry.start_offset < max(log.log_end_offset, 1)
               for entry in log.leader_epoch_cache.entries)
    assert log.high_watermark <= log.log_end_offset
    assert log.recovery_point <= log.log_end_offset


def test_truncate_to_drops_whole_segments_and_cuts_the_containing_one(tmp_path: Path) -> None:
    log = filled(tmp_path)
    assert len(log.segments) >= 4
    target = log.segments[1].base_offset + 2
    size_before = log.size_in_bytes
    truncation = log.truncate_to(target)
    assert truncation is not None
    assert (truncation.previous_log_end_offset, truncation.log_end_offset) == (24, target)
    assert truncation.bytes_dropped == size_before - log.size_in_bytes
    assert truncation.segments_deleted >= 2 and len(log.segments) == 2
    assert log.log_end_offset == log.high_watermark == target
    assert offsets_of(log) == list(range(target))
    assert log.read(target, 1000).region is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target + 1, 1000)
    assert_consistent(log)
    deleted = [name for name in os.listdir(tmp_path) if name.endswith(".deleted")]
    assert deleted, "deleted segments wait for file.delete.delay.ms"
    assert TRUNCATION_MARKER not in os.listdir(tmp_path)


def test_appends_continue_at_the_new_end_and_survive_reopening(tmp_path: Path) -> None:
    log = filled(tmp_path)
    log.truncate_to(9)  # inside the batch [8, 9]: whole batches only
    assert log.log_end_offset == 8
    result = log.append(batch(3, tag=99, timestamp=5000))
    assert (result.base_offset, result.last_offset) == (8, 10)
    values = [record.value for record in decode_records(read_all(log, 8))]
    assert values == [bytes([99]) * 10] * 3
    assert_consistent(log)
    for clean in (True, False):
        log.close()
        log = open_log(tmp_path, clean=clean, segment_bytes=SEGMENT_BYTES)
        assert log.log_end_offset == 11
        assert_consistent(log)


def test_indexes_answer_for_the_truncated_log(tmp_path: Path) -> None:
    log = filled(tmp_path)
    log.truncate_to(10)
    assert log.offset_for_timestamp(1000 + 8) is not None
    assert log.offset_for_timestamp(1000 + 8).offset == 8  # type: ignore[union-attr]
    assert log.offset_for_timestamp(1000 + 10) is None  # only truncated records had it
    active = log.segments.active
    assert active.max_timestamp == 1009  # the batch [8, 9] has timestamps 1008, 1009
    assert all(active.base_offset + key < 10 for key in active.offset_index.keys)
    log.append(batch(1, timestamp=7000))
    found = log.offset_for_timestamp(6000)
    assert found is not None and found.offset == 10
    index_path = active.offset_index.path
    log.close()
    assert os.path.getsize(index_path) == 8 * active.offset_index.entries


def test_truncate_at_or_past_the_end_does_nothing(tmp_path: Path) -> None:
    log = filled(tmp_path, batches=3)
    assert log.truncate_to(6) is None and log.truncate_to(100) is None
    assert offsets_of(log) == list(range(6))
    with pytest.raises(ValueError):
        log.truncate_to(-1)


def test_high_watermark_and_recovery_point_follow(tmp_path: Path) -> None:
    log = filled(tmp_path)
    log.hw_follows_leo = False
    log.update_high_watermark(20)
    log.flush()
    assert log.recovery_point == 24
    log.truncate_to(22)
    assert log.high_watermark == 20 and log.recovery_point == 22
    log.truncate_to(12)
    assert log.high_watermark == 12 and log.recovery_point == 12
    assert log.read(0, 1 << 20, isolation=FetchIsolation.HIGH_WATERMARK).region is not None


def test_leader_epochs_truncated_with_their_checkpoint(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(4), leader_epoch=1)
    log.append(batch(4), leader_epoch=2)
    log.append(batch(4), leader_epoch=3)
    log.truncate_to(8)
    assert [tuple(entry) for entry in log.leader_epoch_cache.entries] == [(1, 0), (2, 4)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n2 4\n"
    assert log.end_offset_for_epoch(2) == (2, 8)
    log.truncate_to(4)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"


def idempotent(sequence: int, epoch: int = 0) -> bytearray:
    return batch(1, tag=sequence, producer_id=7, producer_epoch=epoch, base_sequence=sequence)


def test_producer_state_is_rebuilt_for_the_new_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for sequence in range(3):
        log.append(idempotent(sequence))
    log.roll()  # a snapshot at 3
    for sequence in range(3, 6):
        log.append(idempotent(sequence))
    log.roll()  # a snapshot at 6
    log.truncate_to(4)
    assert log.producer_state.snapshot_offsets() == [3]
    retry = log.append(idempotent(1))  # still in the log: answered with its offsets
    assert retry.duplicate and retry.base_offset == 1
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent(5))  # sequence 4 was truncated: 5 is a gap now
    again = log.append(idempotent(4))  # the truncated batch is not a duplicate any more
    assert not again.duplicate and again.base_offset == 4
    assert log.append(idempotent(5)).base_offset == 5
    log.close()
    reopened = open_log(tmp_path, clean=False)
    assert reopened.append(idempotent(5)).duplicate


def test_truncating_a_whole_producer_forgets_it(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(2))
    log.append(idempotent(0))
    log.append(idempotent(1))
    log.truncate_to(2)
    assert 7 not in log.producer_state.producers
    assert log.append(idempotent(9)).base_offset == 2  # an unknown producer (KIP-360)


def test_open_transaction_truncated_away_leaves_the_lso_at_the_hw(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(2))
    log.append(batch(2, producer_id=8, producer_epoch=0, base_sequence=0,
                     is_transactional=True))
    assert log.last_stable_offset == 2
    log.truncate_to(2)
    assert log.last_stable_offset == log.high_watermark == 2


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = filled(tmp_path)
    log.append(idempotent(0), leader_epoch=3)
    log.roll()
    truncation = log.truncate_fully_and_start_at(100)
    assert (truncation.previous_log_end_offset, truncation.log_end_offset) == (25, 100)
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == 100
    assert log.recovery_point == 100 and len(log.segments) == 1
    assert log.leader_epoch_cache.entries == [] and log.producer_state.producers == {}
    assert log.producer_state.snapshot_offsets() == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(50, 100)
    assert log.append(batch(2)).base_offset == 100
    assert log.append(idempotent(5)).base_offset == 102  # the producer is unknown now
    log.close()
    for clean in (True, False):
        log = open_log(tmp_path, clean=clean)
        assert (log.log_start_offset, log.log_end_offset) == (100, 103)
        assert offsets_of(log) == [100, 101, 102]
        log.close()


def test_truncate_to_below_the_first_segment_starts_over(tmp_path: Path) -> None:
    log = filled(tmp_path)
    truncation = log.truncate_to(0)
    assert truncation is not None and truncation.log_end_offset == 0
    assert log.log_end_offset == 0 and offsets_of(log) == []
    log.append(batch(1))
    assert offsets_of(log) == [0]
    restarted = open_log(tmp_path / "other")
    restarted.append(batch(2))
    restarted.truncate_fully_and_start_at(0)  # the new segment reuses the old file name
    assert restarted.append(batch(1)).base_offset == 0
    assert offsets_of(restarted) == [0]


def test_truncation_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = filled(tmp_path)
    with caplog.at_level(logging.INFO, logger="strom.storage.log"):
        log.truncate_to(10)
    assert "Truncating topic-0 to offset 10: offsets [10, 24) dropped" in caplog.text


def test_log_manager_checkpoints_after_truncating(tmp_path: Path) -> None:
    manager = LogManager(str(tmp_path))
    manager.startup()
    log = manager.create_log("orders", 0)
    for number in range(5):
        log.append(batch(2, tag=number))
    log.flush()
    manager.checkpoint()
    manager.truncate_to("orders", 0, 4)
    checkpoint = (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert checkpoint.splitlines()[2] == "orders 0 4"
    manager.truncate_fully_and_start_at("orders", 0, 40)
    starts = (tmp_path / "log-start-offset-checkpoint").read_text()
    assert starts.splitlines()[2] == "orders 0 40"
    manager.close()


@pytest.mark.parametrize("kind", list(TruncationKind))
def test_loader_finishes_an_interrupted_truncation(tmp_path: Path, kind: TruncationKind,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    log = filled(tmp_path)
    log.append(batch(1), leader_epoch=5)
    log.close()
    write_marker(log.fs, str(tmp_path), kind, 10)  # as if it crashed right after step 1
    with caplog.at_level(logging.WARNING):
        recovered = open_log(tmp_path, clean=False, segment_bytes=SEGMENT_BYTES)
    assert "finishing a truncation" in caplog.text
    start = 10 if kind is TruncationKind.START_AT else 0
    assert (recovered.log_start_offset, recovered.log_end_offset) == (start, 10)
    assert recovered.leader_epoch_cache.entries == []
    assert TRUNCATION_MARKER not in os.listdir(tmp_path)
    assert_consistent(recovered)


def test_cleaning_that_saw_truncated_records_is_not_swapped_in(tmp_path: Path) -> None:
    """Truncate while the cleaner reads, then append and roll so the old group's
    segments are all back in place: the cleaned copy holds records that are gone."""
    log = open_log(tmp_path, segment_bytes=1 << 20, cleanup_policy="compact")
    for segment in range(3):
        for number in range(10):
            log.append(build_record_batch([(b"k%d" % number, b"v%d" % segment, (), 1000)]))
        log.roll()
    log.append(build_record_batch([(b"k0", b"active", (), 1000)]))
    truncated = []

    def truncate_once(target: Log) -> bool:
        if not truncated:
            truncated.append(target.truncate_to(25))
            target.append(build_record_batch([(b"k9", b"after", (), 1000)]))
            target.roll()
            target.append(build_record_batch([(b"k0", b"new active", (), 1000)]))
        return False

    with pytest.raises(CleanerAborted):
        Cleaner(OffsetMap(1 << 16), should_stop=truncate_once).clean(log, None)
    assert truncated
    records = decode_records(read_all(log))
    assert [record.offset for record in records] == list(range(27))
    assert records[25].value == b"after"
    headers = [header for _, header in iter_batches(read_all(log))]
    assert all(a.next_offset <= b.base_offset for a, b in pairwise(headers))


def test_a_compacted_gap_below_the_target_ends_the_log_where_a_reload_would(
        tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1 << 20, cleanup_policy="compact")
    for number in range(10):
        log.append(build_record_batch([(b"k%d" % number, b"first", (), 1000)]))
    log.roll()
    for number in range(10):
        log.append(build_record_batch([(b"k%d" % (5 + number % 5), b"again", (), 1000)]))
    log.roll()
    log.append(build_record_batch([(b"k0", b"active", (), 1000)]))
    Cleaner(OffsetMap(1 << 16)).clean(log, None)
    assert offsets_of_batches(log) == [0, 1, 2, 3, 4, 15, 16, 17, 18, 19, 20]
    truncation = log.truncate_to(10)  # inside the gap [5, 15)
    assert truncation is not None and truncation.log_end_offset == 5
    assert log.log_end_offset == log.segments.active.next_offset == 5
    assert log.append(batch(1)).base_offset == 5
    for clean in (True, False):
        log.close()
        log = open_log(tmp_path, clean=clean, segment_bytes=1 << 20, cleanup_policy="compact")
        assert offsets_of_batches(log) == [0, 1, 2, 3, 4, 5] and log.log_end_offset == 6


def offsets_of_batches(log: Log) -> list[int]:
    return [header.base_offset for _, header in iter_batches(read_all(log))]
