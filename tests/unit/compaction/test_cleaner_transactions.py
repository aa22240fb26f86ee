"""Cleaner and transactions: aborted records, markers, producers' last batches, the LSO,
the cleaned ``.txnindex``, and reads at both isolation levels before and after."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from strom.broker.group.group_loader import LoadState, read_partition
from strom.broker.group.offsets_topic import (
    OffsetCommitValue,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from strom.compaction.cleaner import Cleaner
from strom.compaction.offset_map import OffsetMap
from strom.protocol.compression import CompressionType
from strom.protocol.records import (
    BatchHeader,
    ControlRecordType,
    build_end_txn_marker,
    build_record_batch,
    decode_batch,
    iter_batches,
    parse_control_record,
)
from strom.storage import Log
from tests.support.storage import open_log, read_all

Row = tuple[int, bytes, bytes | None]  # offset, key, value


@dataclass
class Batch:
    header: BatchHeader
    rows: list[Row]
    control: int | None  # ControlRecordType of a marker; -1 for an empty control batch


def batches_of(log: Log) -> list[Batch]:
    raw = read_all(log)
    out: list[Batch] = []
    for position, header in iter_batches(raw):
        records = decode_batch(raw, position).records
        control = None
        if header.is_control:
            control = int(parse_control_record(records[0].key, records[0].value).type) \
                if records else -1
        rows = [] if header.is_control else [
            (record.offset, bytes(record.key or b""),
             None if record.value is None else bytes(record.value)) for record in records]
        out.append(Batch(header, rows, control))
    return out


def read_uncommitted(log: Log) -> list[Row]:
    return [row for batch in batches_of(log) for row in batch.rows]


def read_committed(log: Log) -> list[Row]:
    """What a read_committed consumer keeps: Kafka's consumer algorithm over the
    aborted transactions the log's ``.txnindex`` files list."""
    pending = sorted(log.collect_aborted_transactions(log.log_start_offset,
                                                      log.last_stable_offset),
                     key=lambda entry: entry.first_offset)
    aborted: set[int] = set()
    rows: list[Row] = []
    for batch in batches_of(log):
        header = batch.header
        if header.base_offset >= log.last_stable_offset:
            break
        while pending and pending[0].first_offset <= header.last_offset:
            aborted.add(pending.pop(0).producer_id)
        if header.is_control:
            if batch.control == ControlRecordType.ABORT:
                aborted.discard(header.producer_id)
            continue
        if not (header.is_transactional and header.producer_id in aborted):
            rows += batch.rows
    return rows


def latest(rows: list[Row]) -> dict[bytes, tuple[int, bytes | None]]:
    return {key: (offset, value) for offset, key, value in rows}


@dataclass
class Writer:
    """Producers writing to a log; what each wrote, and the fate of their transactions."""

    log: Log
    compression: CompressionType = CompressionType.NONE
    sequences: dict[tuple[int, int], int] = field(default_factory=dict)  # by producer, epoch
    open_txn: dict[int, list[Row]] = field(default_factory=dict)
    committed: list[Row] = field(default_factory=list)
    aborted: list[Row] = field(default_factory=list)

    def write(self, producer_id: int, pairs: list[tuple[bytes, bytes | None]],
              *, transactional: bool = True, epoch: int = 0) -> None:
        sequence = self.sequences.get((producer_id, epoch), 0)
        self.sequences[producer_id, epoch] = sequence + len(pairs)
        result = self.log.append(build_record_batch(
            [(key, value, (), 1000) for key, value in pairs], producer_id=producer_id,
            producer_epoch=epoch, base_sequence=sequence, is_transactional=transactional,
            compression=self.compression))
        rows = [(result.base_offset + i, key, value) for i, (key, value) in enumerate(pairs)]
        if transactional:
            self.open_txn.setdefault(producer_id, []).extend(rows)
        else:
            self.committed += rows

    def end(self, producer_id: int, commit: bool, *, epoch: int = 0) -> int:
        rows = self.open_txn.pop(producer_id, [])
        (self.committed if commit else self.aborted).extend(rows)
        return self.log.append(build_end_txn_marker(producer_id, epoch, commit, 0, 1000)
                               ).base_offset

    def settle(self) -> None:
        """Everything written replicated and in closed segments."""
        self.log.update_high_watermark(self.log.log_end_offset)
        self.log.roll()


def compact_fully(log: Log, cleaner: Cleaner, first_dirty: int | None = None) -> int:
    for _ in range(100):
        end, _ = cleaner.clean(log, first_dirty)
        if end == first_dirty:
            return end
        first_dirty = end
    raise AssertionError("compaction did not converge")


def age_segments(log: Log) -> None:
    """Every closed segment last modified at the same moment: with delete.retention.ms 0
    each is then at or before the delete horizon once a clean section exists."""
    for segment in list(log.segments)[:-1]:
        log.fs.set_mtime_ms(segment.log_path, 1_000_000)


def markers(log: Log) -> dict[int, int | None]:
    return {batch.header.base_offset: batch.control for batch in batches_of(log)
            if batch.header.is_control}


def test_aborted_records_go_whatever_their_keys(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500, delete_retention_ms=2**62)
    writer = Writer(log)
    writer.write(1, [(b"only-aborted-%d" % i, b"a") for i in range(3)])
    writer.write(2, [(b"k%d" % i, b"committed") for i in range(3)])
    writer.write(1, [(b"k%d" % i, b"aborted-later") for i in range(3)])  # newer, same keys
    writer.end(2, commit=True)
    abort_offset = writer.end(1, commit=False)
    writer.write(3, [(b"plain", b"p")], transactional=False)
    writer.settle()
    committed_before = read_committed(log)
    assert [entry.last_offset for entry in log.collect_aborted_transactions(0, 2**62)] \
        == [abort_offset]

    compact_fully(log, Cleaner(OffsetMap(1 << 16)))

    assert read_uncommitted(log) == read_committed(log) == committed_before
    assert {key for _, key, _ in read_uncommitted(log)} == {b"k0", b"k1", b"k2", b"plain"}
    # The ABORT marker stays while a batch of its transaction did (the producer's last
    # batch is kept, emptied), and so does its index entry.
    assert markers(log)[abort_offset] == ControlRecordType.ABORT
    assert [entry.last_offset for entry in log.collect_aborted_transactions(0, 2**62)] \
        == [abort_offset]
    last = [batch for batch in batches_of(log) if batch.header.producer_id == 1
            and not batch.header.is_control]
    assert [(batch.header.base_sequence, batch.header.records_count) for batch in last] \
        == [(3, 0)]


def test_markers_go_once_their_transactions_have_no_batch_left(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400, delete_retention_ms=0)
    writer = Writer(log)
    writer.write(1, [(b"k%d" % i, b"aborted") for i in range(4)])
    abort_offset = writer.end(1, commit=False)
    writer.write(2, [(b"k%d" % i, b"old") for i in range(4)])
    commit_offset = writer.end(2, commit=True)
    writer.write(2, [(b"k%d" % i, b"kept") for i in range(4)])  # supersedes the first txn
    last_commit = writer.end(2, commit=True)
    writer.write(1, [(b"other", b"x")], transactional=True)  # producer 1's last batch
    writer.end(1, commit=True)
    writer.write(2, [(b"tail", b"t")], transactional=True)  # producer 2's last batch
    writer.end(2, commit=True)
    writer.settle()
    committed_before = latest(read_committed(log))
    cleaner = Cleaner(OffsetMap(1 << 16))

    age_segments(log)
    first_dirty = compact_fully(log, cleaner)
    # First pass: the aborted records and the superseded ones go; each marker stays,
    # as a batch of its transaction was seen (and no clean section made a horizon).
    assert {abort_offset, commit_offset, last_commit} <= set(markers(log))
    assert log.collect_aborted_transactions(0, 2**62)
    assert latest(read_committed(log)) == committed_before

    age_segments(log)
    compact_fully(log, cleaner, first_dirty - 1)  # redo the whole log with a clean section
    remaining = markers(log)
    assert abort_offset not in remaining and commit_offset not in remaining
    assert remaining[last_commit] == ControlRecordType.COMMIT  # its batch is still there
    assert log.collect_aborted_transactions(0, 2**62) == []  # no aborted batch left
    assert latest(read_committed(log)) == latest(read_uncommitted(log)) == committed_before


def test_markers_stay_within_delete_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400, delete_retention_ms=2**62)
    writer = Writer(log)
    writer.write(1, [(b"k", b"aborted")])
    abort_offset = writer.end(1, commit=False)
    writer.write(2, [(b"k", b"old")])
    commit_offset = writer.end(2, commit=True)
    for value in range(6):
        writer.write(3, [(b"k", b"v%d" % value)], transactional=False)
    writer.write(1, [(b"tail-1", b"t")], transactional=False)
    writer.write(2, [(b"tail-2", b"t")], transactional=False)
    writer.settle()
    cleaner = Cleaner(OffsetMap(1 << 16))
    first_dirty = compact_fully(log, cleaner)
    compact_fully(log, cleaner, first_dirty - 1)
    assert {abort_offset, commit_offset} <= set(markers(log))
    assert read_uncommitted(log) == read_committed(log)


def test_a_producers_last_marker_is_kept_for_its_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300, delete_retention_ms=0)
    writer = Writer(log)
    writer.write(7, [(b"k", b"aborted")], epoch=3)
    abort_offset = writer.end(7, commit=False, epoch=4)  # a TV2 marker bumps the epoch
    for value in range(8):
        writer.write(8, [(b"k", b"v%d" % value)], transactional=False)
    writer.settle()
    cleaner = Cleaner(OffsetMap(1 << 16))
    age_segments(log)
    first_dirty = compact_fully(log, cleaner)
    age_segments(log)
    compact_fully(log, cleaner, first_dirty - 1)
    kept = [batch for batch in batches_of(log) if batch.header.producer_id == 7]
    assert [(batch.header.base_offset, batch.header.producer_epoch, batch.header.is_control)
            for batch in kept] == [(abort_offset, 4, True)]
    # Its record may go (the transaction has no batch left); the batch, with the epoch, stays.
    assert kept[0].control in (ControlRecordType.ABORT, -1)
    reopened = open_log(tmp_path, segment_bytes=300, delete_retention_ms=0, clean=False)
    producers = {entry.producer_id: entry.producer_epoch
                 for entry in reopened.producer_state.active_producers()}
    assert producers[7] == 4


def test_cleaning_stops_at_an_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300, delete_retention_ms=2**62)
    writer = Writer(log)
    for value in range(6):
        writer.write(2, [(b"k", b"v%d" % value)], transactional=False)
    writer.settle()
    writer.write(1, [(b"k", b"open")])  # never ended: the LSO stays here
    open_offset = log.log_end_offset - 1
    for value in range(6):
        writer.write(2, [(b"k", b"w%d" % value)], transactional=False)
    writer.settle()
    assert log.last_stable_offset == open_offset
    first_dirty = compact_fully(log, Cleaner(OffsetMap(1 << 16)))
    assert first_dirty <= open_offset
    written = sorted(writer.committed + writer.open_txn[1])
    assert [row for row in read_uncommitted(log) if row[0] >= open_offset] == \
        [row for row in written if row[0] >= open_offset]  # nothing past the LSO cleaned
    assert len(read_uncommitted(log)) < len(written)  # while the prefix was
    writer.end(1, commit=False)
    writer.settle()
    compact_fully(log, Cleaner(OffsetMap(1 << 16)), first_dirty)
    assert b"open" not in {value for _, _, value in read_uncommitted(log)}


def test_random_transactions_read_the_same_after_cleaning_and_a_reopen(tmp_path: Path) -> None:
    for seed in range(4):
        directory = tmp_path / str(seed)
        rng = random.Random(seed)
        log = open_log(directory, segment_bytes=rng.choice([300, 700, 2000]),
                       delete_retention_ms=0)
        writer = Writer(log, rng.choice([CompressionType.NONE, CompressionType.ZSTD]))
        cleaner = Cleaner(OffsetMap(rng.choice([1 << 16, 1200])))
        first_dirty: int | None = None
        for step in range(120):
            producer = rng.randrange(1, 5)
            if producer in writer.open_txn and rng.random() < 0.3:
                writer.end(producer, commit=rng.random() < 0.5)
            else:
                transactional = producer != 4
                pairs = [(b"k%d" % rng.randrange(12), None if rng.random() < 0.1
                          else b"%d.%d" % (step, i)) for i in range(rng.randrange(1, 4))]
                writer.write(producer, pairs, transactional=transactional)
            if step % 30 == 29:
                writer.settle()
                age_segments(log)
                first_dirty = compact_fully(log, cleaner, first_dirty)
        for producer in list(writer.open_txn):
            writer.end(producer, commit=rng.random() < 0.5)
        writer.settle()
        expected = {key: (offset, value) for offset, key, value in sorted(writer.committed)}
        before = read_committed(log)
        assert latest(before) == expected
        age_segments(log)
        compact_fully(log, cleaner, first_dirty)
        after = read_committed(log)
        aborted_offsets = {offset for offset, _, _ in writer.aborted}
        live = {key: row for key, row in expected.items() if row[1] is not None}
        assert {key: row for key, row in latest(after).items() if row[1] is not None} \
            == live, seed  # tombstones may go (delete.retention.ms 0): nothing under them
        assert not aborted_offsets & {offset for offset, _, _ in read_uncommitted(log)}, seed
        assert set(after) <= set(before)
        log.close()
        reopened = open_log(directory, segment_bytes=300, delete_retention_ms=0, clean=False)
        assert read_committed(reopened) == after
        reopened.close()


def offsets_record(group: str, partition: int, offset: int) -> tuple[bytes, bytes]:
    return (encode_offset_commit_key(group, "t", partition),
            encode_offset_commit_value(OffsetCommitValue(offset, "", 1000)))


def test_an_aborted_transactional_offset_commit_is_not_resurrected(tmp_path: Path) -> None:
    """``__consumer_offsets``: a plain commit, a transactional commit aborted, then a
    later transaction of the same producer committed. If the ABORT marker went before
    the aborted record, a reload would take that record for part of the committed
    transaction."""
    log = open_log(tmp_path, segment_bytes=400, delete_retention_ms=0)
    writer = Writer(log)
    writer.write(9, [offsets_record("g", 0, 5)], transactional=False)
    writer.write(1, [offsets_record("g", 0, 50)])
    writer.end(1, commit=False)
    writer.write(1, [offsets_record("g", 1, 70)])
    writer.end(1, commit=True)
    writer.write(9, [offsets_record("h", 0, 1)], transactional=False)
    for filler in range(6):
        writer.write(9, [offsets_record("filler", 0, filler)], transactional=False)
    writer.write(1, [offsets_record("h", 0, 2)], epoch=1)
    writer.end(1, commit=True, epoch=1)
    writer.settle()
    cleaner = Cleaner(OffsetMap(1 << 16))
    first_dirty = None
    for _ in range(3):
        age_segments(log)
        first_dirty = compact_fully(log, cleaner, first_dirty and first_dirty - 1)
        state = LoadState()
        read_partition(log, state)
        committed = {(group, tp[1]): appended.offset.offset
                     for group, offsets in state.offsets.items() for tp, appended in offsets.items()}
        assert committed[("g", 0)] == 5
        assert committed[("g", 1)] == 70
        assert committed[("h", 0)] == 2
        assert not any(state.pending.values())


def test_a_skipped_segments_transaction_keeps_its_commit_marker(tmp_path: Path) -> None:
    """A dirty segment with nothing to remove is not read again, but its transactional
    batches still count: the COMMIT marker of its transaction, in a later segment that
    is rewritten, stays (without it a reload would leave the offset pending)."""
    log = open_log(tmp_path, segment_bytes=200, delete_retention_ms=0)
    writer = Writer(log)
    writer.write(9, [offsets_record("g", 0, 1)], transactional=False)
    writer.settle()
    cleaner = Cleaner(OffsetMap(1 << 16))
    first_dirty = compact_fully(log, cleaner)  # a clean section, for the delete horizon
    writer.write(1, [offsets_record("g", 1, 10)])
    writer.settle()
    commit_offset = writer.end(1, commit=True)
    writer.write(9, [offsets_record("g", 2, 20)], transactional=False)
    writer.settle()
    writer.write(9, [offsets_record("g", 2, 21)], transactional=False)  # supersedes 20
    writer.write(1, [offsets_record("h", 0, 1)])
    writer.end(1, commit=True)
    writer.settle()
    age_segments(log)
    _, stats = cleaner.clean(log, first_dirty)
    assert stats.segments_skipped >= 1 and stats.segments_cleaned >= 1
    assert commit_offset in markers(log)
    state = LoadState()
    read_partition(log, state)
    committed = {(group, tp[1]): appended.offset.offset
                 for group, offsets in state.offsets.items() for tp, appended in offsets.items()}
    assert committed == {("g", 0): 1, ("g", 1): 10, ("g", 2): 21, ("h", 0): 1}
    assert not any(state.pending.values())
