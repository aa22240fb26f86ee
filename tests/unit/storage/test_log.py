from __future__ import annotations

from pathlib import Path

import pytest

from strom.protocol.compression import CompressionType
from strom.protocol.error_codes import ErrorCode
from strom.protocol.records import (
    TimestampType,
    build_message_set,
    decode_records,
    iter_batches,
    validate_crc,
)
from strom.storage import FetchIsolation, InvalidRecordsError, OffsetOutOfRangeError
from tests.support.storage import Clock, batch, open_log, read_all


def test_append_assigns_offsets_and_reads_back(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    results = [log.append(batch(3, tag=i, base_offset=777)) for i in range(4)]
    assert [r.base_offset for r in results] == [0, 3, 6, 9]
    assert results[-1].last_offset == 11 and results[-1].log_append_time == -1
    assert log.log_end_offset == log.high_watermark == log.last_stable_offset == 12
    records = decode_records(read_all(log))
    assert [r.offset for r in records] == list(range(12))


def test_read_boundaries(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600)
    for i in range(10):
        log.append(batch(2, value_size=100, tag=i))
    assert len(log.segments) > 2
    for segment in log.segments:  # exactly at a segment base
        result = log.read(segment.base_offset, 10_000)
        assert result.region is not None and result.region.position == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)
    assert log.read(20, 100).region is None  # at the end: empty, not an error
    region = log.read(5, 100_000).region  # inside a batch: the batch holding it
    assert region is not None
    first = next(iter_batches(region.read(log.fs)))[1]
    assert first.base_offset == 4
    assert log.read(5, 100_000).region.length <= log.segments.floor(5).size  # type: ignore[union-attr]


def test_kip74_first_batch_whole_even_above_max_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(5, value_size=200))
    log.append(batch(1))
    region = log.read(0, 10).region
    assert region is not None
    validate_crc(region.read(log.fs))  # the whole first batch
    assert log.read(0, 10, min_one_message=False).region is None
    assert log.read(0, 10**6).region.length == log.segments.active.size  # type: ignore[union-attr]


def test_high_watermark_bounds_reads_and_is_separate(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.hw_follows_leo = False
    log.append(batch(2))
    log.append(batch(2))
    assert log.high_watermark == 0
    assert log.read(0, 1000).region is None
    assert log.read(0, 1000, isolation=FetchIsolation.LOG_END).region is not None
    assert log.update_high_watermark(2) == 2
    region = log.read(0, 1000).region
    assert region is not None
    assert [h.next_offset for _, h in iter_batches(region.read(log.fs))] == [2]
    assert log.update_high_watermark(99) == 4


def test_last_stable_offset_stops_at_open_transaction(tmp_path: Path) -> None:
    from strom.protocol.records import ControlRecordType, build_control_batch

    log = open_log(tmp_path)
    log.append(batch(2))
    log.append(batch(2, producer_id=7, producer_epoch=0, base_sequence=0,
                     is_transactional=True))
    assert log.last_stable_offset == 2 and log.high_watermark == 4
    assert log.read(2, 1000, isolation=FetchIsolation.TXN_COMMITTED).region is None
    log.append(build_control_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=0,
                                   coordinator_epoch=0, timestamp=5))
    assert log.last_stable_offset == 5


def test_log_append_time_rewrites_and_returns_it(tmp_path: Path) -> None:
    clock = Clock(123_456)
    log = open_log(tmp_path, clock=clock, message_timestamp_type="LogAppendTime")
    result = log.append(batch(2, timestamp=5))
    assert result.log_append_time == 123_456
    header = validate_crc(read_all(log))
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 123_456


def test_leader_epoch_stamped_and_recorded(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(2), leader_epoch=0)
    log.append(batch(3), leader_epoch=0)
    log.append(batch(1), leader_epoch=4)
    assert [h.partition_leader_epoch for _, h in iter_batches(read_all(log))] == [0, 0, 4]
    assert log.end_offset_for_epoch(0) == (0, 5)
    assert log.end_offset_for_epoch(2) == (0, 5)
    assert log.end_offset_for_epoch(4) == (4, 6)
    assert log.end_offset_for_epoch(9) == (-1, -1)
    text = (tmp_path / "leader-epoch-checkpoint").read_text()
    assert text == "0\n2\n0 0\n4 5\n"


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP])
def test_legacy_message_sets(tmp_path: Path, magic: int, compression: CompressionType) -> None:
    log = open_log(tmp_path)
    log.append(batch(2))
    records = [(b"k", b"v%d" % i, 1000 + i) for i in range(3)]
    result = log.append(build_message_set(records, magic=magic, compression=compression,
                                          base_offset=40))
    assert (result.base_offset, result.last_offset, log.log_end_offset) == (2, 4, 5)
    log.append(batch(1))
    assert [r.offset for r in decode_records(read_all(log))] == list(range(6))


def test_rejections_write_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_bytes=500, segment_bytes=2000)
    log.append(batch(1))
    size = log.segments.active.size
    broken = batch(2)
    broken[-1] ^= 0xFF
    cases = [
        (batch(1) + broken, ErrorCode.CORRUPT_MESSAGE),
        (batch(1)[:-3], ErrorCode.CORRUPT_MESSAGE),
        (b"", ErrorCode.CORRUPT_MESSAGE),
        (batch(1, value_size=600), ErrorCode.MESSAGE_TOO_LARGE),
        (batch(1, value_size=400) * 5, ErrorCode.RECORD_LIST_TOO_LARGE),
    ]
    impossible = batch(1)
    impossible[8:12] = (3).to_bytes(4, "big")
    cases.append((impossible, ErrorCode.CORRUPT_MESSAGE))
    for records, code in cases:
        with pytest.raises(InvalidRecordsError) as caught:
            log.append(records)
        assert caught.value.error_code == code
    assert log.log_end_offset == 1 and log.segments.active.size == size


def test_rolls_on_size_and_time_and_trims_indexes(tmp_path: Path) -> None:
    clock = Clock(0)
    log = open_log(tmp_path, clock=clock, segment_bytes=1000, segment_ms=10_000,
                   index_interval_bytes=0)
    for i in range(8):
        log.append(batch(1, value_size=200, timestamp=-1, tag=i))
    assert len(log.segments) == 3
    first = log.segments.first
    assert (tmp_path / "00000000000000000000.index").stat().st_size == 8 * (first.offset_index.entries)
    assert (tmp_path / f"{log.segments.active.base_offset:020d}.index").stat().st_size == 10 << 20
    clock.now = 20_000
    log.append(batch(1, timestamp=-1))
    assert len(log.segments) == 4  # segment.ms by wall clock (no timestamps)
    clock.now = 40_000
    log.append(batch(1, timestamp=1_000))  # rolls by wall clock again; first record time 1000
    log.append(batch(1, timestamp=5_000))
    assert len(log.segments) == 5
    log.append(batch(1, timestamp=12_000))  # segment.ms by record time: 12000 - 1000
    assert len(log.segments) == 6
    assert log.recovery_point == log.segments.active.base_offset


def test_roll_on_index_full(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_index_bytes=24, index_interval_bytes=0)
    for _ in range(10):
        log.append(batch(1))
    assert all(s.offset_index.entries <= 3 for s in log.segments)
    assert len(log.segments) > 2


def test_flush_messages_moves_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path, flush_messages=3)
    log.append(batch(2))
    assert log.recovery_point == 0
    log.append(batch(1))
    assert log.recovery_point == 3
    log.flush_if_due(10**12)
    assert log.recovery_point == 3


def test_flush_ms(tmp_path: Path) -> None:
    clock = Clock(0)
    log = open_log(tmp_path, clock=clock, flush_ms=100)
    log.append(batch(1))
    assert not log.flush_if_due(50) and log.recovery_point == 0
    assert log.flush_if_due(150) and log.recovery_point == 1


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    for i in range(6):
        log.append(batch(2, timestamp=1000 + 100 * i, value_size=100))
    assert len(log.segments) > 1
    assert log.offset_for_timestamp(0) == (1000, 0)
    assert log.offset_for_timestamp(1201) == (1201, 5)
    assert log.offset_for_timestamp(1202) == (1300, 6)
    assert log.offset_for_timestamp(10**9) is None
