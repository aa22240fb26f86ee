"""Log.append_as_follower: a follower's log built from the leader's bytes — the same
batches, leader epochs and producer state, so a retry reaching it as the new leader is
answered with its original offsets; what it refuses, leaves out and how it rolls."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.compaction.cleaner import Cleaner
from strom.compaction.offset_map import OffsetMap
from strom.protocol.error_codes import ErrorCode
from strom.protocol.records import (
    ControlRecordType,
    build_control_batch,
    build_message_set,
    build_record_batch,
    iter_batches,
)
from strom.storage import FetchIsolation, FileSystem, Log, LogConfig, LogLoader
from strom.storage.errors import (
    InvalidRecordsError,
    KafkaStorageError,
    OffsetsOutOfOrderError,
    UnexpectedAppendOffsetError,
)
from strom.storage.segment import MAX_RELATIVE_OFFSET
from tests.support.storage import Clock, batch, open_log, read_all

PID, OTHER_PID = 4242, 77


def replicate(leader: Log, follower: Log, fetch_bytes: int = 1 << 20) -> int:
    """Fetch from the leader at the follower's LEO until it has everything (as the
    replica fetcher does); returns the number of appends. A small ``fetch_bytes`` cuts
    responses inside batches, as a leader's fetch answer may be cut."""
    appends = 0
    while follower.log_end_offset < leader.log_end_offset:
        result = leader.read(follower.log_end_offset, fetch_bytes, isolation=FetchIsolation.LOG_END)
        assert result.region is not None
        follower.append_as_follower(result.region.read(leader.fs))
        appends += 1
        assert appends < 10_000
    return appends


def produce(log: Log, sequence: int, count: int = 2, *, pid: int = PID, epoch: int = 0,
            transactional: bool = False, leader_epoch: int = 0) -> bytearray:
    """An idempotent producer's batch, appended by a leader; returns it as sent."""
    sent = batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                 is_transactional=transactional, value_size=40, tag=sequence)
    log.append(bytearray(sent), leader_epoch=leader_epoch)
    return sent


def leader_history(log: Log) -> bytearray:
    """Offsets 0-23 in epochs 0, 3 (from 11) and 5 (from 16); plain, idempotent and
    transactional batches, a marker, a transaction left open at 14. Returns the last
    batch producer PID sent (offsets 22-23)."""
    log.append(batch(3), leader_epoch=0)
    for sequence in range(0, 8, 2):
        produce(log, sequence)
    produce(log, 0, pid=OTHER_PID, transactional=True, leader_epoch=3)
    log.append(build_control_batch(ControlRecordType.COMMIT, producer_id=OTHER_PID,
                                   producer_epoch=0, coordinator_epoch=2, timestamp=5000),
               leader_epoch=3)
    produce(log, 2, pid=OTHER_PID, transactional=True, leader_epoch=3)  # left open
    for sequence in range(8, 16, 2):
        last = produce(log, sequence, leader_epoch=5)
    return last


def headers(log: Log) -> list[tuple[int, int, int, int]]:
    return [(header.base_offset, header.partition_leader_epoch, header.crc, header.size)
            for _, header in iter_batches(read_all(log))]


def follower_log(directory: Path, **config: object) -> Log:
    """A follower's log: the HW is the fetcher's to move, not the LEO's."""
    return LogLoader(FileSystem(), str(directory), "topic", 0,
                     LogConfig(**config),  # type: ignore[arg-type]
                     clean_shutdown=True, recovery_point=0, log_start_offset=0,
                     clock=Clock(), hw_follows_leo=False).load()


@pytest.mark.parametrize("fetch_bytes", [1 << 20, 200])
def test_the_follower_holds_the_leaders_bytes_epochs_and_producers(
        tmp_path: Path, fetch_bytes: int) -> None:
    leader = open_log(tmp_path / "leader", segment_bytes=1 << 20)
    leader_history(leader)
    follower = follower_log(tmp_path / "follower", segment_bytes=1 << 20)
    appends = replicate(leader, follower, fetch_bytes)
    assert appends == 1 if fetch_bytes > 1000 else appends > 5
    assert follower.log_end_offset == leader.log_end_offset == 24
    with open(leader.segments.active.log_path, "rb") as original, \
            open(follower.segments.active.log_path, "rb") as copy:
        assert copy.read() == original.read()
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries \
        == [(0, 0), (3, 11), (5, 16)]
    assert follower.latest_epoch == leader.latest_epoch == 5
    assert follower.producer_state.producers == leader.producer_state.producers
    # The committed transaction at 11 stays unstable until the HW passes its marker (12).
    assert follower.producer_state.first_unstable_offset == 11
    assert follower.high_watermark == 0  # not moved: the fetcher sets it
    assert follower.update_high_watermark(12) == 12 and follower.last_stable_offset == 11
    assert follower.update_high_watermark(20) == 20 and follower.last_stable_offset == 14
    follower.update_high_watermark(24)
    assert headers(follower) == headers(leader)


def test_a_retry_reaching_the_follower_as_new_leader_gets_its_original_offsets(
        tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    last_sent = leader_history(leader)
    original = leader.append(bytearray(last_sent), leader_epoch=5)
    assert original.duplicate
    follower = open_log(tmp_path / "follower")
    replicate(leader, follower, 300)
    retried = follower.append(bytearray(last_sent), leader_epoch=6)
    assert retried == original
    assert retried.base_offset == 22 and follower.log_end_offset == 24  # nothing written
    older = batch(2, producer_id=PID, producer_epoch=0, base_sequence=10, value_size=40, tag=10)
    assert follower.append(older, leader_epoch=6).duplicate  # one of the last five
    follower.close()
    reopened = open_log(tmp_path / "follower")  # from the snapshot of the clean close
    assert reopened.append(bytearray(last_sent), leader_epoch=6) == original
    following = batch(1, producer_id=PID, producer_epoch=0, base_sequence=16)
    assert reopened.append(following, leader_epoch=6).base_offset == 24


def test_a_start_below_the_log_end_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    leader_history(leader)
    follower = open_log(tmp_path / "follower")
    replicate(leader, follower)
    size = follower.size_in_bytes
    for offset in (0, 16, 22):  # batch starts below the LEO
        region = leader.read(offset, 1 << 20, isolation=FetchIsolation.LOG_END).region
        assert region is not None
        with pytest.raises(UnexpectedAppendOffsetError) as refused:
            follower.append_as_follower(region.read(leader.fs))
        assert refused.value.first_offset == offset and refused.value.last_offset == 23
        assert refused.value.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert follower.size_in_bytes == size and follower.log_end_offset == 24


def test_truncating_follower_appends_rolls_epochs_and_producers_back(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader", segment_bytes=1 << 20)
    leader_history(leader)
    follower = open_log(tmp_path / "follower", segment_bytes=1 << 20)
    replicate(leader, follower)
    # ``partial`` saw only what is below 16 (the epoch-5 batches are what gets truncated)
    partial = open_log(tmp_path / "partial", segment_bytes=1 << 20)
    region = leader.read(0, 1 << 20, isolation=FetchIsolation.LOG_END).region
    assert region is not None
    whole = region.read(leader.fs)
    cut = next(position for position, header in iter_batches(whole) if header.base_offset == 16)
    partial.append_as_follower(whole[:cut])
    truncation = follower.truncate_to(19)  # inside [18, 19]: to 18
    assert truncation is not None and follower.log_end_offset == 18
    kept = [header for _, header in iter_batches(read_all(follower))]
    assert kept[-1].base_offset == 16
    assert follower.leader_epoch_cache.entries == [(0, 0), (3, 11), (5, 16)]
    assert follower.producer_state.producers[PID].last_sequence == 9
    follower.truncate_to(16)
    assert follower.leader_epoch_cache.entries == partial.leader_epoch_cache.entries \
        == [(0, 0), (3, 11)]
    assert follower.producer_state.producers == partial.producer_state.producers
    assert follower.latest_epoch == 3
    # the truncated batch of sequence 8 is no duplicate now: it follows sequence 7
    again = batch(2, producer_id=PID, producer_epoch=0, base_sequence=8, value_size=40, tag=8)
    result = follower.append(again, leader_epoch=6)
    assert (result.base_offset, result.duplicate) == (16, False)
    assert follower.leader_epoch_cache.entries[-1] == (6, 16)


def test_gaps_of_a_compacted_leader_are_kept(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader", segment_bytes=1 << 20, cleanup_policy="compact")
    for number in range(10):
        leader.append(build_record_batch([(b"k%d" % number, b"first", (), 1000),
                                          (b"k%d" % number, b"second", (), 1001)]))
    leader.roll()
    leader.append(batch(1))
    Cleaner(OffsetMap(1 << 16)).clean(leader, None)
    cleaned = [header for _, header in iter_batches(read_all(leader))]
    assert any(header.records_count != header.last_offset_delta + 1 for header in cleaned)
    follower = open_log(tmp_path / "follower", segment_bytes=1 << 20)
    replicate(leader, follower, 100)
    assert read_all(follower) == read_all(leader)
    gap_start = follower.log_end_offset
    follower.append_as_follower(batch(2, base_offset=gap_start + 10))
    assert follower.log_end_offset == gap_start + 12
    region = follower.read(gap_start, 1000).region  # an offset in the gap: the next batch
    assert region is not None
    assert next(iter_batches(region.read(follower.fs)))[1].base_offset == gap_start + 10
    follower.close()
    for clean in (True, False):
        reopened = open_log(tmp_path / "follower", clean=clean, segment_bytes=1 << 20)
        assert reopened.log_end_offset == gap_start + 12
        reopened.close()


def test_a_gap_too_wide_for_one_segment_starts_a_segment_at_the_batch(tmp_path: Path) -> None:
    follower = open_log(tmp_path)
    follower.append_as_follower(batch(2))
    far = 2 + MAX_RELATIVE_OFFSET + 5
    follower.append_as_follower(batch(2, base_offset=far))
    assert follower.segments.active.base_offset == far
    assert follower.log_end_offset == far + 2
    follower.close()
    reopened = open_log(tmp_path, clean=False)
    assert reopened.log_end_offset == far + 2
    assert [header.base_offset for _, header in iter_batches(read_all(reopened))] == [0, far]


def test_a_fetch_larger_than_a_segment_is_split_into_rolled_segments(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader", segment_bytes=1 << 20)
    for number in range(20):
        leader.append(batch(2, value_size=100, tag=number), leader_epoch=1)
    follower = open_log(tmp_path / "follower", segment_bytes=700)
    assert replicate(leader, follower) == 1
    assert read_all(follower) == read_all(leader)
    assert len(follower.segments) >= 6
    assert all(0 < segment.size <= 700 for segment in follower.segments)
    assert follower.recovery_point == follower.segments.active.base_offset


def test_a_partial_last_batch_is_left_out_and_a_partial_only_appends_nothing(
        tmp_path: Path) -> None:
    follower = open_log(tmp_path)
    records = batch(2) + batch(3, base_offset=2)
    result = follower.append_as_follower(records[:-1])
    assert (result.base_offset, result.last_offset) == (0, 1) and follower.log_end_offset == 2
    nothing = follower.append_as_follower(records[len(batch(2)) : -1])
    assert (nothing.base_offset, nothing.last_offset) == (2, 1)
    assert follower.append_as_follower(b"") == nothing
    assert follower.log_end_offset == 2 and follower.size_in_bytes == len(batch(2))


def test_corrupt_or_out_of_order_batches_are_refused_whole(tmp_path: Path) -> None:
    follower = open_log(tmp_path)
    follower.append_as_follower(batch(2))
    corrupt = batch(2, base_offset=2) + batch(2, base_offset=4)
    corrupt[-1] ^= 0xFF
    with pytest.raises(InvalidRecordsError) as bad_crc:
        follower.append_as_follower(corrupt)
    assert bad_crc.value.error_code == ErrorCode.CORRUPT_MESSAGE
    for records in (batch(2, base_offset=4) + batch(2, base_offset=2),
                    batch(3, base_offset=2) + batch(2, base_offset=4)):  # overlapping
        with pytest.raises(OffsetsOutOfOrderError):
            follower.append_as_follower(records)
    assert follower.log_end_offset == 2 and follower.size_in_bytes == len(batch(2))


def test_batches_of_a_newer_epoch_than_the_followers_are_left_out(tmp_path: Path) -> None:
    follower = open_log(tmp_path)
    records = batch(1, partition_leader_epoch=4) + batch(1, base_offset=1, partition_leader_epoch=5) \
        + batch(1, base_offset=2, partition_leader_epoch=4)
    result = follower.append_as_follower(records, current_leader_epoch=4)
    assert (result.base_offset, result.last_offset) == (0, 0)
    assert follower.append_as_follower(records[len(batch(1)) :]).last_offset == 2
    assert follower.leader_epoch_cache.entries == [(4, 0), (5, 1)]


def test_control_batches_and_oversized_batches_are_the_leaders_to_judge(tmp_path: Path) -> None:
    follower = open_log(tmp_path, max_message_bytes=100)
    big = batch(1, value_size=500)
    marker = build_control_batch(ControlRecordType.ABORT, producer_id=PID, producer_epoch=0,
                                 coordinator_epoch=0, timestamp=1, base_offset=1)
    assert follower.append_as_follower(big + marker).last_offset == 1


def test_a_v0_v1_entry_clears_the_leader_epochs_as_kafka_does(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    leader.append(batch(2), leader_epoch=2)
    leader.append(build_message_set([(b"k", b"v", 1000), (b"k", b"w", 1001)], magic=1),
                  leader_epoch=2)
    leader.append(batch(1), leader_epoch=3)
    follower = open_log(tmp_path / "follower")
    replicate(leader, follower)
    assert read_all(follower) == read_all(leader)
    assert follower.leader_epoch_cache.entries == [(3, 4)]


def test_follower_appends_follow_the_flush_policy(tmp_path: Path) -> None:
    follower = open_log(tmp_path, flush_messages=1)
    follower.append_as_follower(batch(3))
    assert follower.recovery_point == follower.log_end_offset == 3
    lazy = open_log(tmp_path / "lazy")
    lazy.append_as_follower(batch(3))
    assert lazy.recovery_point == 0 and lazy.segments.active.unsynced


def test_a_closed_log_refuses_follower_appends(tmp_path: Path) -> None:
    follower = open_log(tmp_path)
    follower.close()
    with pytest.raises(KafkaStorageError, match="offline or closed"):
        follower.append_as_follower(batch(1))


def test_an_unclean_restart_rebuilds_the_same_epochs_and_producers(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader", segment_bytes=600)
    last_sent = leader_history(leader)
    follower = open_log(tmp_path / "follower", segment_bytes=600)
    replicate(leader, follower, 250)
    for segment in follower.segments:  # killed: no flush, no snapshot, indexes untrimmed
        segment.close()
    recovered = open_log(tmp_path / "follower", clean=False, segment_bytes=600)
    assert read_all(recovered) == read_all(leader)
    assert recovered.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    assert recovered.producer_state.producers == leader.producer_state.producers
    assert recovered.append(bytearray(last_sent), leader_epoch=6).base_offset == 22
