from __future__ import annotations

from pathlib import Path

import pytest

from strom.storage.fs import FileSystem
from strom.storage.index_file import CorruptIndexError
from strom.storage.offset_index import OffsetIndex, OffsetPosition
from strom.storage.time_index import TimeIndex, TimestampOffset

FS = FileSystem()


def offset_index(tmp_path: Path, entries: int = 10, base: int = 100) -> OffsetIndex:
    index = OffsetIndex(FS, str(tmp_path / "x.index"), base, entries * 8)
    index.open_for_append()
    return index


def test_offset_index_lookup_boundaries(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    assert index.lookup(100) == OffsetPosition(100, 0)  # empty: start of segment
    index.append(110, 500)
    index.append(120, 900)
    assert index.lookup(99) == OffsetPosition(100, 0)  # before the base
    assert index.lookup(109) == OffsetPosition(100, 0)
    assert index.lookup(110) == OffsetPosition(110, 500)  # exactly an entry
    assert index.lookup(119) == OffsetPosition(110, 500)
    assert index.lookup(10**9) == OffsetPosition(120, 900)  # after the end
    assert index.last_offset == 120


def test_offset_index_rejects_non_increasing_and_full(tmp_path: Path) -> None:
    index = offset_index(tmp_path, entries=2)
    index.append(101, 10)
    with pytest.raises(ValueError):
        index.append(101, 20)
    index.append(102, 20)
    assert index.is_full
    with pytest.raises(ValueError):
        index.append(103, 30)


def test_offset_index_preallocated_then_trimmed_and_reloaded(tmp_path: Path) -> None:
    index = offset_index(tmp_path, entries=1000)
    assert (tmp_path / "x.index").stat().st_size == 0  # preallocated by the first entry
    index.append(105, 64)
    assert (tmp_path / "x.index").stat().st_size == 8000
    index.append(107, 128)
    index.trim()
    assert (tmp_path / "x.index").read_bytes() == bytes.fromhex(
        "00000005 00000040 00000007 00000080".replace(" ", ""))
    reloaded = OffsetIndex(FS, str(tmp_path / "x.index"), 100, 8000)
    reloaded.load()
    assert reloaded.lookup(106) == OffsetPosition(105, 64)
    assert reloaded.entries == 2


def test_offset_index_truncate_to_offset(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 6):
        index.append(100 + 10 * i, 100 * i)
    index.truncate_to_offset(130)
    assert index.last_offset == 120
    index.truncate_to_offset(0)
    assert index.entries == 0


@pytest.mark.parametrize("content", [b"\x00" * 7, b"\x00" * 16, bytes.fromhex("0000000500000040")
                                     + bytes.fromhex("0000000300000080")])
def test_offset_index_insane_files_are_refused(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "x.index").write_bytes(content)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(FS, str(tmp_path / "x.index"), 100, 8000).load()


def test_offset_index_untrimmed_after_crash_is_refused(tmp_path: Path) -> None:
    index = offset_index(tmp_path, entries=100)
    index.append(101, 64)
    index.close_without_trim()  # what a crash leaves: 800 bytes, mostly zeros
    with pytest.raises(CorruptIndexError):
        OffsetIndex(FS, str(tmp_path / "x.index"), 100, 800).load()


def test_time_index_monotonic_lookup_and_reload(tmp_path: Path) -> None:
    index = TimeIndex(FS, str(tmp_path / "x.timeindex"), 100, 12 * 10)
    index.open_for_append()
    assert index.lookup(5) == TimestampOffset(-1, 100)
    index.maybe_append(1000, 105)
    index.maybe_append(900, 106)  # older: ignored, the index stays monotonic
    index.maybe_append(1000, 107)  # equal: ignored
    index.maybe_append(2000, 110)
    assert index.entries == 2
    assert index.lookup(999) == TimestampOffset(-1, 100)
    assert index.lookup(1000) == TimestampOffset(1000, 105)
    assert index.lookup(1999) == TimestampOffset(1000, 105)
    assert index.lookup(10**12) == TimestampOffset(2000, 110)
    assert index.last_entry == TimestampOffset(2000, 110)
    index.trim()
    assert (tmp_path / "x.timeindex").stat().st_size == 24
    reloaded = TimeIndex(FS, str(tmp_path / "x.timeindex"), 100, 120)
    reloaded.load()
    assert list(reloaded.keys) == [1000, 2000]
    reloaded.truncate_to_offset(110)
    assert reloaded.last_entry == TimestampOffset(1000, 105)


def test_time_index_full_stops_adding(tmp_path: Path) -> None:
    index = TimeIndex(FS, str(tmp_path / "x.timeindex"), 0, 24)
    index.maybe_append(1, 1)
    index.maybe_append(2, 2)
    assert index.is_full
    index.maybe_append(3, 3)
    assert index.entries == 2
