"""Cleaner: compaction against a dict model, tombstones, codecs, keyless records."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.compaction.cleaner import Cleaner, cleanable_range
from strom.compaction.offset_map import ENTRY_BYTES, OffsetMap
from strom.compaction.record_scan import keyless_records
from strom.protocol.compression import CompressionType
from strom.protocol.records import build_record_batch, iter_batches
from strom.storage import Log
from tests.support.storage import open_log, read_all, records_of, summary

Write = tuple[int, bytes | None]  # key number, value (None: tombstone)


def compact_fully(log: Log, cleaner: Cleaner, first_dirty: int | None = None) -> int:
    """Run compactions until the cleanable section is done; returns the first dirty offset."""
    for _ in range(1000):
        end, _ = cleaner.clean(log, first_dirty)
        if end == first_dirty:
            return end
        first_dirty = end
    raise AssertionError("compaction did not converge")


def check_against_model(log: Log, written: dict[int, tuple[bytes, bytes | None]],
                        cleaned_up_to: int, tombstones_kept: bool) -> None:
    records = records_of(log)
    offsets = [record.offset for record in records]
    assert offsets == sorted(set(offsets))
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    seen_below: set[bytes] = set()
    for record in records:
        key, value = bytes(record.key or b""), None if record.value is None else bytes(record.value)
        assert written[record.offset] == (key, value)  # offsets never change
        latest[key] = (record.offset, value)
        if record.offset < cleaned_up_to:
            assert key not in seen_below, f"{key!r} twice in the cleaned section"
            seen_below.add(key)
    model: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, (key, value) in sorted(written.items()):
        model[key] = (offset, value)
    for key, (offset, value) in model.items():
        if value is None and not tombstones_kept:
            assert key not in latest or latest[key] == (offset, None)
        else:
            assert latest[key] == (offset, value)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=st.lists(st.tuples(st.integers(0, 60), st.one_of(st.none(), st.binary(max_size=20))),
                    min_size=1, max_size=400),
    batch_size=st.integers(1, 12),
    codec=st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD]),
    map_keys=st.integers(4, 40),
    clean_every=st.integers(5, 200),
)
def test_compaction_matches_a_dict(tmp_path_factory: pytest.TempPathFactory, writes: list[Write],
                                   batch_size: int, codec: CompressionType, map_keys: int,
                                   clean_every: int) -> None:
    log = open_log(tmp_path_factory.mktemp("log"), segment_bytes=600,
                   delete_retention_ms=2**62)
    cleaner = Cleaner(OffsetMap(map_keys * ENTRY_BYTES * 10 // 9 + 40))
    assert cleaner.map.max_entries < 61  # fewer than the distinct keys: partial passes
    written: dict[int, tuple[bytes, bytes | None]] = {}
    first_dirty: int | None = None
    since_clean = 0
    for start in range(0, len(writes), batch_size):
        chunk = writes[start : start + batch_size]
        batch = build_record_batch([(b"key-%d" % key, value, (), 1000) for key, value in chunk],
                                   compression=codec)
        result = log.append(batch)
        for index, (key, value) in enumerate(chunk):
            written[result.base_offset + index] = (b"key-%d" % key, value)
        since_clean += len(chunk)
        if since_clean >= clean_every:
            first_dirty = compact_fully(log, cleaner, first_dirty)
            since_clean = 0
    first_dirty = compact_fully(log, cleaner, first_dirty)
    check_against_model(log, written, first_dirty, tombstones_kept=True)
    assert first_dirty == log.segments.active.base_offset
    before = summary(log)
    log.close()
    reopened = open_log(Path(log.directory), clean=False, segment_bytes=600)
    assert summary(reopened) == before
    check_against_model(reopened, written, first_dirty, tombstones_kept=True)
    reopened.close()


def build(log: Log, rounds: int, keys: int, seed: int = 1, tombstone_every: int = 0
          ) -> dict[int, tuple[bytes, bytes | None]]:
    rng = random.Random(seed)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    for round_number in range(rounds):
        chunk = []
        for index in range(5):
            key = b"k%d" % rng.randrange(keys)
            tombstone = tombstone_every and (round_number * 5 + index) % tombstone_every == 0
            chunk.append((key, None if tombstone else b"v%d.%d" % (round_number, index)))
        result = log.append(build_record_batch([(k, v, (), 1000) for k, v in chunk]))
        for index, (key, value) in enumerate(chunk):
            written[result.base_offset + index] = (key, value)
    return written


def test_tombstones_go_after_delete_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2000, delete_retention_ms=0)
    written = build(log, 80, 30, tombstone_every=3)
    cleaner = Cleaner(OffsetMap(1 << 20))
    first_dirty = compact_fully(log, cleaner)
    assert any(record.value is None for record in records_of(log)
               if record.offset < first_dirty)  # the first compaction keeps them
    written.update(build(log, 40, 30, seed=2))
    first_dirty = compact_fully(log, cleaner, first_dirty)
    check_against_model(log, written, first_dirty, tombstones_kept=False)
    clean_records = [record for record in records_of(log) if record.offset < first_dirty]
    older = [record for record in clean_records
             if log.segments.floor(record.offset) is not log.segments.floor(first_dirty - 1)]
    assert older and all(record.value is not None for record in older)


def test_batches_keep_base_offsets_codec_and_producer_fields(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1 << 20)
    for round_number in range(4):
        log.append(build_record_batch(
            [(b"k%d" % i, b"r%d" % round_number, (), 1000 + i) for i in range(10)],
            compression=CompressionType.SNAPPY))
    log.append(build_record_batch([(b"k1", b"last", (), 5000)]))
    log.roll()
    before = {header.base_offset: header for _, header in iter_batches(read_all(log))}
    Cleaner(OffsetMap(1 << 20)).clean(log, None)
    after = [header for _, header in iter_batches(read_all(log))]
    assert [h.base_offset for h in after] == [30, 40]
    original = before[30]
    assert after[0].compression == CompressionType.SNAPPY
    assert after[0].last_offset_delta == original.last_offset_delta
    assert (after[0].base_timestamp, after[0].producer_id, after[0].records_count) == \
        (original.base_timestamp, original.producer_id, 9)
    assert [(r.offset, bytes(r.key or b"")) for r in records_of(log)][:2] == \
        [(30, b"k0"), (32, b"k2")]


def test_active_segment_and_min_compaction_lag_are_not_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1 << 20, min_compaction_lag_ms=10**12)
    build(log, 20, 3)
    log.roll()
    build(log, 20, 3, seed=5)
    now = log.clock()
    assert cleanable_range(log, None, now).first_uncleanable_offset == 0  # too recent
    log.config = log.config.with_overrides({"min.compaction.lag.ms": "0"})
    cleanable = cleanable_range(log, None, now)
    assert cleanable.first_uncleanable_offset == log.segments.active.base_offset == 100
    count = len(records_of(log))
    Cleaner(OffsetMap(1 << 20)).clean(log, None)
    assert count - len(records_of(log)) >= 90  # only the first segment shrank
    assert len([r for r in records_of(log) if r.offset >= 100]) == 100


def test_keyless_records_are_found_in_plain_and_compressed_sets() -> None:
    keyed = build_record_batch([(b"k", b"v", (), 1), (b"k2", None, (), 2)])
    keyless = build_record_batch([(b"k", b"v", (), 1), (None, b"v", (), 2)],
                                 compression=CompressionType.LZ4)
    assert keyless_records(keyed) == []
    # Counted over the set: the compressed batch's second record is the set's fourth.
    assert keyless_records(bytes(keyed) + bytes(keyless)) == [3]
    assert keyless_records(bytes(keyless) + bytes(keyed) + bytes(keyless)) == [1, 5]
    assert keyless_records(build_record_batch([(None, b"x" * 300, (("h", b"1"),), 1)])) == [0]


def append_keys(log: Log, written: dict[int, tuple[bytes, bytes | None]],
                keys: Sequence[bytes | None], per_batch: int = 5) -> None:
    for start in range(0, len(keys), per_batch):
        chunk = keys[start : start + per_batch]
        result = log.append(build_record_batch([(key, b"v%d" % (start + index), (), 1000)
                                                for index, key in enumerate(chunk)]))
        for index, key in enumerate(chunk):
            written[result.base_offset + index] = (key or b"", b"v%d" % (start + index))


def test_dirty_segments_with_nothing_to_remove_are_neither_read_nor_rewritten(
        tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    append_keys(log, written, [b"k%d" % i for i in range(100)])
    log.roll()
    before = list(log.segments)[:-1]
    assert len(before) > 3
    cleaner = Cleaner(OffsetMap(1 << 20))
    first_dirty, stats = cleaner.clean(log, None)
    assert first_dirty == log.segments.active.base_offset
    assert stats.segments_skipped == len(before) and stats.bytes_read == 0
    assert stats.segments_cleaned == stats.segments_unchanged == stats.bytes_written == 0
    assert list(log.segments)[:-1] == before  # the very same segment objects and files
    # one key again: only the clean segment holding its older record is rewritten,
    # the other clean segments are read (they might hold it) but stay as they are
    append_keys(log, written, [b"k42"])
    log.roll()
    first_dirty, stats = cleaner.clean(log, first_dirty)
    assert stats.segments_cleaned >= 1 and stats.segments_unchanged >= len(before) - 2
    assert stats.segments_cleaned + stats.segments_unchanged + stats.segments_skipped == \
        len(before) + 1
    assert stats.bytes_written < 500
    check_against_model(log, written, first_dirty, tombstones_kept=True)
    assert sum(1 for record in records_of(log) if record.key == b"k42") == 1


def test_a_keyless_record_makes_its_dirty_segment_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    append_keys(log, written, [b"k%d" % i for i in range(60)] + [None]
                + [b"k%d" % i for i in range(60, 100)])
    log.roll()
    segments = len(log.segments) - 1
    _, stats = Cleaner(OffsetMap(1 << 20)).clean(log, None)
    assert segments > 3
    assert stats.segments_cleaned >= 1 and stats.segments_unchanged == 0
    assert stats.segments_cleaned + stats.segments_skipped == segments
    assert stats.segments_skipped >= segments - 2
    assert all(record.key is not None for record in records_of(log))
    assert len(records_of(log)) == 100


def test_an_unchanged_prefix_is_copied_when_a_later_chunk_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("strom.compaction.cleaner.READ_CHUNK", 400)  # many chunks a segment
    log = open_log(tmp_path, segment_bytes=1 << 20)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    append_keys(log, written, [b"k%d" % i for i in range(200)] + [b"k150", b"k3", b"k199"])
    log.roll()
    first_dirty, stats = Cleaner(OffsetMap(1 << 20)).clean(log, None)
    assert stats.segments_cleaned == 1 and stats.records_kept == 200
    check_against_model(log, written, first_dirty, tombstones_kept=True)
    assert [record.offset for record in records_of(log)] == \
        [o for o in range(203) if o not in (3, 150, 199)]
    before = summary(log)
    log.close()
    reopened = open_log(tmp_path, clean=False, segment_bytes=1 << 20)
    assert summary(reopened) == before
    reopened.close()
