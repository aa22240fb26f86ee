from __future__ import annotations

from pathlib import Path

import pytest

from strom.protocol.records import iter_batches
from strom.storage.fs import FileSystem
from strom.storage.index_file import CorruptIndexError
from strom.storage.segment import AppendedBatch, LogSegment, segment_file_name
from tests.support.storage import batch

FS = FileSystem()


def new_segment(tmp_path: Path, base: int = 50, interval: int = 100) -> LogSegment:
    segment = LogSegment(FS, str(tmp_path), base, segment_index_bytes=4096,
                         index_interval_bytes=interval, created_ms=0)
    segment.make_active()
    return segment


def fill(segment: LogSegment, batches: int, records: int = 3) -> list[bytes]:
    written = []
    for i in range(batches):
        data = batch(records, value_size=40, timestamp=1000 + 10 * i, tag=i,
                     base_offset=segment.next_offset)
        header = next(iter_batches(data))[1]
        segment.append(data, [AppendedBatch(0, header.last_offset, header.max_timestamp,
                                            header.size)])
        written.append(bytes(data))
    return written


def test_file_names_are_20_digit_base_offsets() -> None:
    assert segment_file_name(0, ".log") == "00000000000000000000.log"
    assert segment_file_name(1234, ".timeindex") == "00000000000000001234.timeindex"


def test_empty_segment(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    assert segment.size == 0 and segment.next_offset == 50
    assert segment.translate_offset(50) is None
    assert list(segment.iter_batches(0)) == []
    assert segment.find_offset_by_timestamp(0, 0) is None
    assert segment.recover() == 0


def test_append_indexes_and_translate(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    written = fill(segment, 10)
    assert segment.next_offset == 80
    assert segment.offset_index.entries > 0  # ~150-byte batches, 100-byte interval
    assert segment.offset_index.values[0] > 0
    position = 0
    for i, data in enumerate(written):
        for offset in range(50 + 3 * i, 53 + 3 * i):  # every offset, exactly at a base too
            peek = segment.translate_offset(offset)
            assert peek is not None and peek.position == position and peek.base_offset == 50 + 3 * i
        position += len(data)
    assert segment.translate_offset(0) is not None  # before the base: the first batch
    assert segment.translate_offset(80) is None  # after the end


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    fill(segment, 5)  # batch i has records at 1000+10i, 1001+10i, 1002+10i
    assert segment.find_offset_by_timestamp(1021, 0) == (1021, 57)
    assert segment.find_offset_by_timestamp(1023, 0) == (1030, 59)
    assert segment.find_offset_by_timestamp(0, 0) == (1000, 50)
    assert segment.find_offset_by_timestamp(0, 52) == (1002, 52)
    assert segment.find_offset_by_timestamp(5000, 0) is None


def test_load_after_roll_matches_and_insane_index_is_detected(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    fill(segment, 10)
    segment.on_roll()
    segment.close()
    again = LogSegment(FS, str(tmp_path), 50, segment_index_bytes=4096,
                       index_interval_bytes=100, created_ms=0)
    again.load()
    assert (again.next_offset, again.size, again.max_timestamp) == (80, segment.size, 1092)
    (tmp_path / segment_file_name(50, ".index")).write_bytes(b"\xff" * 8)
    broken = LogSegment(FS, str(tmp_path), 50, segment_index_bytes=4096,
                        index_interval_bytes=100, created_ms=0)
    with pytest.raises(CorruptIndexError):
        broken.load()
    assert broken.recover() == 0
    assert list(broken.offset_index.keys) == list(segment.offset_index.keys)


def test_recover_truncates_a_torn_tail(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    written = fill(segment, 4)
    with open(segment.log_path, "ab") as file:
        file.write(written[0][:30])  # half a batch
    assert segment.recover() == 30
    assert segment.next_offset == 62 and segment.size == sum(map(len, written))


def test_recover_stops_at_offsets_going_backwards(tmp_path: Path) -> None:
    # Gaps forward are legal (compaction leaves them); going back is not.
    segment = new_segment(tmp_path)
    fill(segment, 2)
    stray = batch(1, base_offset=3)  # valid CRC, offset already used
    with open(segment.log_path, "ab") as file:
        file.write(stray)
    assert segment.recover() == len(stray)
    assert segment.next_offset == 56


def test_recover_keeps_a_compacted_segment_with_gaps(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    fill(segment, 2)
    later = batch(1, base_offset=999)
    with open(segment.log_path, "ab") as file:
        file.write(later)
    assert segment.recover() == 0
    assert segment.next_offset == 1000


def test_failed_append_leaves_segment_unchanged(tmp_path: Path) -> None:
    from tests.support.storage import FaultyFileSystem

    fs = FaultyFileSystem()
    segment = LogSegment(fs, str(tmp_path), 0, segment_index_bytes=4096,
                         index_interval_bytes=0, created_ms=0)
    segment.make_active()
    fill(segment, 2)
    size, entries = segment.size, segment.offset_index.entries
    fs.fail_writes_after = 20
    with pytest.raises(OSError):
        fill(segment, 1)
    fs.fail_writes_after = None
    assert (segment.size, segment.next_offset, segment.offset_index.entries) == (size, 6, entries)
    assert Path(segment.log_path).stat().st_size == size


def test_truncate_to(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    written = fill(segment, 6)
    dropped = segment.truncate_to(59)
    assert dropped == sum(map(len, written[3:]))
    assert segment.next_offset == 59 and segment.translate_offset(59) is None
    with pytest.raises(ValueError):
        segment.truncate_to(55)


def test_delete_is_rename_then_unlink(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    fill(segment, 2)
    segment.rename_to_deleted()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [segment_file_name(50, s) + ".deleted" for s in (".index", ".log",
                                                                     ".timeindex")]
    assert len(segment.read_batch(segment.translate_offset(50))) > 0  # fd still readable
    segment.delete_files()
    assert list(tmp_path.iterdir()) == []
