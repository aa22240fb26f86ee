"""Cleaner: one compaction of one log, in two passes (Kafka's ``LogCleaner.Cleaner``).

The log is split at two offsets::

    log start ... first dirty offset ... first uncleanable offset ... log end
    |--- clean (compacted before) ---|--- dirty ---|--- not yet cleanable ---|

``first dirty`` comes from the ``cleaner-offset-checkpoint`` (``cleaner_checkpoint``);
``first uncleanable`` is the lowest of: the active segment's base offset (the active
segment is never cleaned), the base of the segment holding the high watermark or the
first unstable offset (an open transaction), and the base of the first segment with a
record newer than ``min.compaction.lag.ms``.

Pass 1 maps each key hash of the dirty section to its latest offset (``OffsetMap``).
When the map is full (or the pass reaches 2^32 - 1 offsets) it stops there, and only
that prefix counts as cleaned: the next compaction starts where this one stopped,
as Kafka's does. The map also tells which dirty segments hold a record to remove:
one whose key comes again later in the mapped range (``put`` reports it), a keyless
record, or a tombstone past the delete horizon.

Pass 2 rewrites the segments below that point, from the log start, into groups of
at most ``segment.bytes``. Two shortcuts keep it from re-reading and rewriting what
would come out unchanged (Kafka rewrites them all): a group of dirty segments in
which pass 1 found nothing to remove is neither read nor rewritten (every record of
it is the latest of its key in the mapped range, and the clean section below cannot
supersede it); and a group that is read but loses no record is not written, so
nothing is swapped (its bytes are only written out from the first chunk that
changes, the unchanged prefix copied then). Otherwise, a record is kept iff it has a key and its offset is at or
after the map's offset for that key (records of keys the map does not hold are kept).
A tombstone (null value) is also removed once its segment was last modified before
the delete horizon: the last clean segment's last-modified time minus
``delete.retention.ms`` (Kafka's rule before KIP-534), so a consumer that reads the
clean section within ``delete.retention.ms`` sees every tombstone. Batches keep their
base offset, last offset delta, timestamps, compression codec and producer fields;
a batch with all records kept is copied byte for byte, a batch with none is dropped
(or emptied: a producer's last, below), any other is rebuilt with its kept records
(re-compressed with its codec) and a new CRC. Offsets never change, so the cleaned
log has gaps.

Transactions (``transactions``, Kafka's ``CleanedTransactionMetadata``): nothing at or
past the first unstable offset is cleaned (``cleanable_range``). Records of aborted
transactions (from the ``.txnindex``) are removed whatever their keys and never enter
the map; markers go once their transaction has no batch left and their segment is
past the delete horizon, as tombstones (the rule before KIP-534); control records take
no part in key-based compaction. An active producer's last batch (or, if its last
entry is a marker, that marker) is kept, emptied of records when none stays (Kafka's
``RETAIN_EMPTY``). The cleaned segment's ``.txnindex`` keeps the aborted transactions
that still have a batch. Pass 1 records the transactional batches it reads, so a
group pass 2 skips still counts for the markers after it.

Keyless records are removed (Kafka counts them as invalid). v0/v1 message sets are
copied unchanged and not mapped.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final, NamedTuple

import numpy as np
from crc32c import crc32c

from strom.compaction.offset_map import MAX_RELATIVE_OFFSET, OffsetMap
from strom.compaction.record_scan import RecordArrays, hash_keys, scan_sections
from strom.compaction.transactions import (
    BatchJudge,
    CleanedTransactions,
    TxnBatch,
    Verdict,
    last_records_of_active_producers,
    map_pass_batches,
)
from strom.protocol.compression import CompressionType, compress, decompress
from strom.protocol.errors import ProtocolError
from strom.protocol.records import BatchHeader, compute_crc, iter_batches
from strom.protocol.records.header import ATTR_COMPRESSION_MASK, V2_HEADER_SIZE
from strom.storage.fs import remove_files
from strom.storage.log import Log
from strom.storage.segment import MAX_RELATIVE_OFFSET as MAX_SEGMENT_SPAN
from strom.storage.segment import AppendedBatch, LogSegment
from strom.storage.segment_swap import CLEANED_SUFFIX

logger = logging.getLogger(__name__)

READ_CHUNK: Final = 1 << 20  # bytes read per step of either pass (Kafka: 512 KiB)
_LENGTH: Final = struct.Struct(">i")
_CRC: Final = struct.Struct(">I")
_ATTRIBUTES: Final = struct.Struct(">h")


class CleanerAborted(Exception):
    """The cleaning stopped (shutdown, the log was deleted); nothing was swapped in."""


@dataclass
class CleanerStats:
    """One compaction's figures; ``bytes_read`` is Kafka's "MB of log processed"."""

    bytes_read: int = 0  # pass 2's input: the log the cleaning went through
    map_bytes_read: int = 0  # pass 1's input (Kafka's "indexed")
    bytes_written: int = 0
    records_read: int = 0  # pass 2
    records_kept: int = 0
    keys_mapped: int = 0  # distinct keys in the map at the end of pass 1
    records_mapped: int = 0
    map_seconds: float = 0.0
    copy_seconds: float = 0.0
    segments_cleaned: int = 0  # rewritten and swapped in
    segments_unchanged: int = 0  # read by pass 2, nothing to remove: not rewritten
    segments_skipped: int = 0  # dirty, pass 1 found nothing to remove: not read again


class CleanableRange(NamedTuple):
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable_range(log: Log, checkpointed: int | None, now_ms: int) -> CleanableRange:
    """Kafka's ``LogCleanerManager.cleanableOffsets`` and the dirty ratio it is judged by."""
    segments = log.segments
    start = log.log_start_offset
    first_dirty = start if checkpointed is None or not start <= checkpointed <= \
        log.log_end_offset else checkpointed
    bounds = [segments.active.base_offset,
              segments.floor(log.high_watermark).base_offset]
    unstable = log.producer_state.first_unstable_offset
    if unstable is not None:
        bounds.append(segments.floor(unstable).base_offset)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        bounds += [segment.base_offset for segment in segments
                   if segment.max_timestamp > now_ms - lag][:1]
    uncleanable = max(min(bounds), first_dirty)
    clean = dirty = 0
    for segment in segments:
        if segment.next_offset <= first_dirty:
            clean += segment.size
        elif segment.base_offset < uncleanable:
            dirty += segment.size
    return CleanableRange(first_dirty, uncleanable, clean, dirty)


class _Sections(NamedTuple):
    """The v2 record sections of a chunk in one buffer, and which batch each is."""

    arena: bytes | bytearray
    spans: list[tuple[int, int]]
    batch_index: list[int]  # per section, its batch's index in the chunk
    base_offsets: np.ndarray  # per section


class Cleaner:
    """Cleans one log at a time with one ``OffsetMap``; a cleaner thread owns one."""

    def __init__(self, offset_map: OffsetMap, *, throttle: Callable[[int], None] | None = None,
                 should_stop: Callable[[Log], bool] | None = None) -> None:
        self.map = offset_map
        self.throttle = throttle or (lambda _: None)
        self.should_stop = should_stop or (lambda _: False)

    def clean(self, log: Log, first_dirty_offset: int | None, now_ms: int | None = None
              ) -> tuple[int, CleanerStats]:
        """Compact what is cleanable; returns the new first dirty offset and the stats.

        Raises ``CleanerAborted`` when ``should_stop`` says so between chunks.
        """
        now = log.clock() if now_ms is None else now_ms
        cleanable = cleanable_range(log, first_dirty_offset, now)
        stats = CleanerStats()
        start, stop = cleanable.first_dirty_offset, cleanable.first_uncleanable_offset
        if start >= stop:
            return start, stats
        log.cleaner_reading = True
        try:
            began = time.perf_counter()
            horizon = self._delete_horizon(log, start)
            end, removable, txn_batches = self._build_map(log, start, stop, horizon, stats)
            stats.map_seconds = time.perf_counter() - began
            began = time.perf_counter()
            groups = list(_groups(log, end))
            judge = BatchJudge(CleanedTransactions(log.collect_aborted_transactions(
                log.log_start_offset, groups[-1][-1].next_offset) if groups else ()),
                last_records_of_active_producers(log))
            for group in groups:
                if group[0].base_offset >= start and not any(
                        segment.base_offset in removable for segment in group):
                    stats.segments_skipped += len(group)
                    judge.replay(batch for segment in group
                                 for batch in txn_batches.get(segment.base_offset, ()))
                    continue
                self._clean_group(log, group, horizon, now, judge, stats)
            stats.copy_seconds = time.perf_counter() - began
        finally:
            log.cleaner_reading = False
        return end, stats

    # --- pass 1 -----------------------------------------------------------------------

    def _build_map(self, log: Log, start: int, stop: int, horizon: int, stats: CleanerStats
                   ) -> tuple[int, set[int], dict[int, list[TxnBatch]]]:
        """Map the dirty section from ``start`` (records of aborted transactions left out).

        Returns where the map ends (exclusive), the base offsets of the dirty segments
        holding a record or batch to remove (superseded, keyless, aborted, a tombstone
        or a marker in a segment last modified at or before ``horizon``), and the
        transactional batches of each segment read.
        """
        offset_map = self.map
        offset_map.clear(start)
        limit = min(stop, start + MAX_RELATIVE_OFFSET)
        segments = [segment for segment in log.segments.from_offset(start)
                    if segment.base_offset < limit]
        bases = np.array([segment.base_offset for segment in segments], dtype=np.int64)
        removable = np.zeros(len(segments), dtype=bool)
        transactions = CleanedTransactions(log.collect_aborted_transactions(start, limit))
        txn_batches: dict[int, list[TxnBatch]] = {}
        end = limit
        for number, segment in enumerate(segments):
            retain_deletes = log.fs.mtime_ms(segment.log_path) > horizon
            position = segment.offset_index.lookup(start).position
            recorded = txn_batches.setdefault(segment.base_offset, [])
            for chunk, headers in self._chunks(log, segment, position, stats, mapping=True):
                aborted, found = map_pass_batches(chunk, headers, transactions, recorded,
                                                  retain_deletes)
                if found:
                    removable[number] = True
                sections = _sections(chunk, headers)
                if not sections.spans:
                    continue
                records = scan_sections(sections.arena, sections.spans)
                offsets = sections.base_offsets[records.section] + records.offset_delta
                inside = (offsets >= start) & (offsets < limit)
                keyed = records.key_length >= 0
                live = keyed & inside
                if found:
                    live &= ~np.array([aborted[batch] for batch in sections.batch_index],
                                      dtype=bool)[records.section]
                chosen = np.flatnonzero(live)
                room = offset_map.free_entries
                full = len(chosen) > room
                if full:
                    chosen = chosen[:room]
                    inside &= offsets <= offsets[chosen[-1]] if room else offsets < offsets[0]
                dropped = ~keyed if retain_deletes else ~keyed | (records.value_length < 0)
                if bool((inside & dropped).any()):
                    removable[number] = True
                keys = hash_keys(sections.arena, records.key_start[chosen],
                                 records.key_length[chosen])
                superseded = offset_map.put(keys, offsets[chosen])
                if len(superseded):
                    removable[np.searchsorted(bases, superseded, "right") - 1] = True
                stats.records_mapped += len(chosen)
                if full:
                    removable[number] = True  # its transactional batches are not all recorded
                    logger.info("%s: offset map full at offset %d (%d keys); cleaning up to "
                                "there", log, offset_map.latest_offset, offset_map.size)
                    end = offset_map.latest_offset + 1
                    break
            if end != limit:
                break
        stats.keys_mapped = offset_map.size
        return end, {segment.base_offset for segment, marked
                     in zip(segments, removable.tolist(), strict=True) if marked}, txn_batches

    # --- pass 2 -----------------------------------------------------------------------

    def _delete_horizon(self, log: Log, first_dirty: int) -> int:
        clean = [segment for segment in log.segments if segment.base_offset < first_dirty]
        if not clean:
            return 0
        return log.fs.mtime_ms(clean[-1].log_path) - log.config.delete_retention_ms

    def _clean_group(self, log: Log, group: list[LogSegment], horizon: int, now: int,
                     judge: BatchJudge, stats: CleanerStats) -> None:
        config = log.config
        judge.transactions.kept_aborted = []
        cleaned: LogSegment | None = None
        swapped = False
        try:
            modified = 0
            for source in group:
                source_modified = log.fs.mtime_ms(source.log_path)
                modified = max(modified, source_modified)
                retain_deletes = source_modified > horizon
                position = 0
                for chunk, headers in self._chunks(log, source, 0, stats):
                    out, batches = self._filter(chunk, headers, retain_deletes, judge, stats)
                    position += len(chunk)
                    if out is chunk and cleaned is None:
                        continue
                    if cleaned is None:  # the first change: write out the unchanged prefix
                        cleaned = LogSegment(
                            log.fs, log.directory, group[0].base_offset,
                            segment_index_bytes=config.segment_index_bytes,
                            index_interval_bytes=config.index_interval_bytes,
                            created_ms=now, file_suffix=CLEANED_SUFFIX)
                        log.fs.ftruncate(cleaned.fd, 0)
                        for earlier in group[: group.index(source)]:
                            self._copy(log, earlier, earlier.size, cleaned, stats)
                        self._copy(log, source, position - len(chunk), cleaned, stats)
                    if batches:
                        cleaned.append(out, batches)
                        stats.bytes_written += len(out)
                        self.throttle(len(out))
            if cleaned is None:
                stats.segments_unchanged += len(group)
                return
            cleaned.persist_rebuilt_indexes()
            cleaned.flush()
            log.fs.set_mtime_ms(cleaned.log_path, modified)
            swapped = log.replace_segments(cleaned, group, group[-1].next_offset,
                                           judge.transactions.kept_aborted)
            if not swapped:
                raise CleanerAborted(f"{log} changed under the cleaner")
            stats.segments_cleaned += len(group)
        finally:
            if cleaned is not None and not swapped:
                cleaned.close()
                if cleaned.file_suffix == CLEANED_SUFFIX:  # else the swap got under way:
                    remove_files(log.fs, [cleaned.log_path,  # recovery finishes it
                                          cleaned.offset_index.path, cleaned.time_index.path])

    def _copy(self, log: Log, source: LogSegment, end: int, cleaned: LogSegment,
              stats: CleanerStats) -> None:
        """Append ``source``'s batches below file position ``end`` to ``cleaned`` as they are."""
        for chunk, headers in self._chunks(log, source, 0, None, end=end):
            cleaned.append(chunk, _as_appended(headers))
            stats.bytes_written += len(chunk)
            self.throttle(len(chunk))

    def _filter(self, chunk: bytes, headers: list[tuple[int, BatchHeader]],
                retain_deletes: bool, judge: BatchJudge, stats: CleanerStats
                ) -> tuple[bytes, list[AppendedBatch]]:
        """The chunk's batches with only the records to keep; and their index entries.

        Returns ``chunk`` itself when every batch comes out unchanged.
        """
        verdicts = judge.judge(chunk, headers, retain_deletes)
        sections = _sections(chunk, headers)
        record_counts: list[int] = []
        kept_counts: list[int] = []
        runs = _Runs([], [], np.zeros(0, dtype=np.int64))
        if sections.spans:
            records = scan_sections(sections.arena, sections.spans)
            keep = self._keep(sections, records, retain_deletes)
            discard = [verdicts[batch].discard_records for batch in sections.batch_index]
            if any(discard):
                keep &= ~np.array(discard, dtype=bool)[records.section]
            stats.records_read += len(records)
            kept = int(np.count_nonzero(keep))
            stats.records_kept += kept
            count = len(sections.spans)
            record_counts = np.bincount(records.section, minlength=count).tolist()
            kept_counts = np.bincount(records.section[keep], minlength=count).tolist()
            if kept != len(records):
                runs = _kept_runs(records, keep)
        section_of = {batch: index for index, batch in enumerate(sections.batch_index)}
        parts: list[bytes | bytearray | memoryview] = []
        batches: list[AppendedBatch] = []
        changed = False
        size = 0
        view = memoryview(chunk)
        for number, (position, header) in enumerate(headers):
            whole = view[position : position + header.size]
            section = section_of.get(number)
            entry: bytes | bytearray | memoryview | None = whole
            if section is not None:
                if kept_counts[section] == 0:
                    entry = _emptied(chunk, position, header) \
                        if verdicts[number].retain_empty else None
                elif kept_counts[section] != record_counts[section]:
                    entry = _rebuild(chunk, position, header, sections.arena,
                                     runs.of(section), kept_counts[section])
            elif header.magic == 2:
                entry = _without_records(chunk, position, header, verdicts[number])
            if entry is not whole:
                changed = True
            if entry is None:
                continue
            parts.append(entry)
            batches.append(AppendedBatch(size, header.last_offset, header.max_timestamp,
                                         len(entry)))
            size += len(entry)
        if not changed:
            return chunk, _as_appended(headers)
        return b"".join(parts), batches

    def _keep(self, sections: _Sections, records: RecordArrays,
              retain_deletes: bool) -> np.ndarray:
        offsets = sections.base_offsets[records.section] + records.offset_delta
        keyed = np.flatnonzero(records.key_length >= 0)
        latest = np.full(len(records), np.iinfo(np.int64).max, dtype=np.int64)
        keys = hash_keys(sections.arena, records.key_start[keyed], records.key_length[keyed])
        latest[keyed] = self.map.get(keys)
        keep: np.ndarray = offsets >= latest
        if not retain_deletes:
            keep &= records.value_length >= 0
        return keep

    # --- reading ----------------------------------------------------------------------

    def _chunks(self, log: Log, segment: LogSegment, position: int,
                stats: CleanerStats | None, *, mapping: bool = False, end: int | None = None
                ) -> Iterator[tuple[bytes, list[tuple[int, BatchHeader]]]]:
        """Whole batches of ``segment`` from ``position`` to ``end`` (default: its size),
        about ``READ_CHUNK`` at a time; counted as pass 1's or pass 2's input."""
        end = segment.size if end is None else end
        max_batch = max(log.config.max_message_bytes, READ_CHUNK)
        while position < end:
            if self.should_stop(log):
                raise CleanerAborted(f"cleaning of {log} stopped")
            chunk = log.fs.pread(segment.fd, min(READ_CHUNK, end - position), position)
            headers = list(iter_batches(chunk))
            if not headers:  # a batch larger than the chunk
                chunk = log.fs.pread(segment.fd, min(max_batch * 2, end - position), position)
                headers = list(iter_batches(chunk))
                if not headers:
                    raise ProtocolError(f"no whole batch at {position} of {segment.log_path}")
            used = headers[-1][0] + headers[-1][1].size
            if used < len(chunk):
                chunk = chunk[:used]
            if stats is not None:
                if mapping:
                    stats.map_bytes_read += used
                else:
                    stats.bytes_read += used
            self.throttle(used)
            yield chunk, headers
            position += used


def _as_appended(headers: list[tuple[int, BatchHeader]]) -> list[AppendedBatch]:
    return [AppendedBatch(position, header.last_offset, header.max_timestamp, header.size)
            for position, header in headers]


class _Runs(NamedTuple):
    """Maximal runs of consecutive kept records of one section: arena spans."""

    start: list[int]
    end: list[int]
    section: np.ndarray

    def of(self, section: int) -> list[tuple[int, int]]:
        low = int(np.searchsorted(self.section, section, "left"))
        high = int(np.searchsorted(self.section, section, "right"))
        return list(zip(self.start[low:high], self.end[low:high], strict=True))


def _kept_runs(records: RecordArrays, keep: np.ndarray) -> _Runs:
    kept = np.flatnonzero(keep)
    if not kept.size:
        return _Runs([], [], np.zeros(0, dtype=np.int64))
    section = records.section[kept]
    breaks = np.ones(len(kept), dtype=bool)
    breaks[1:] = (kept[1:] != kept[:-1] + 1) | (section[1:] != section[:-1])
    last = np.ones(len(kept), dtype=bool)
    last[:-1] = breaks[1:]
    return _Runs(records.start[kept[breaks]].tolist(), records.end[kept[last]].tolist(),
                 section[breaks])


def _sections(chunk: bytes, headers: list[tuple[int, BatchHeader]]) -> _Sections:
    """v2 data batches with records; compressed ones inflated into one arena."""
    pieces: list[tuple[bytes | bytearray | memoryview, int, int]] = []
    batch_index: list[int] = []
    bases: list[int] = []
    inflated = False
    view = memoryview(chunk)
    for number, (position, header) in enumerate(headers):
        if header.magic != 2 or header.is_control or header.records_count == 0:
            continue
        start, end = position + V2_HEADER_SIZE, position + header.size
        codec = header.attributes & ATTR_COMPRESSION_MASK
        if codec:
            data = decompress(CompressionType(codec), view[start:end], 1 << 31)
            pieces.append((data, 0, len(data)))
            inflated = True
        else:
            pieces.append((chunk, start, end))
        batch_index.append(number)
        bases.append(header.base_offset)
    base_offsets = np.array(bases, dtype=np.int64)
    if not inflated:
        return _Sections(chunk, [(start, end) for _, start, end in pieces], batch_index,
                         base_offsets)
    spans: list[tuple[int, int]] = []
    at = 0
    for _, start, end in pieces:
        spans.append((at, at + end - start))
        at += end - start
    arena = b"".join(memoryview(buf)[start:end] for buf, start, end in pieces)
    return _Sections(arena, spans, batch_index, base_offsets)


def _rebuild(chunk: bytes, position: int, header: BatchHeader, arena: bytes | bytearray,
             runs: list[tuple[int, int]], kept: int) -> bytearray:
    """The batch at ``position`` with only the records in ``runs``; new length, count, CRC."""
    if compute_crc(chunk, position, header) != header.crc:
        raise ProtocolError(f"CRC mismatch in the batch at offset {header.base_offset}")
    view = memoryview(arena)
    records = b"".join([view[start:end] for start, end in runs])
    codec = header.attributes & ATTR_COMPRESSION_MASK
    out = bytearray(chunk[position : position + V2_HEADER_SIZE])
    out += compress(CompressionType(codec), records) if codec else records
    _LENGTH.pack_into(out, 8, len(out) - 12)
    _LENGTH.pack_into(out, 57, kept)
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[21:]))
    return out


def _without_records(chunk: bytes, position: int, header: BatchHeader, verdict: Verdict
                     ) -> memoryview | bytearray | None:
    """A v2 batch with no data records to scan: a marker, or a batch already emptied.

    An empty batch stays only as a producer's last (Kafka's ``RETAIN_EMPTY``); a marker
    whose records may go is dropped, or emptied when it is a producer's last."""
    whole = memoryview(chunk)[position : position + header.size]
    if header.is_control and not verdict.discard_records:
        return whole
    if header.records_count == 0 or not verdict.retain_empty:
        return whole if verdict.retain_empty else None
    return _emptied(chunk, position, header)


def _emptied(chunk: bytes, position: int, header: BatchHeader) -> bytearray:
    """The batch's header alone: no records, uncompressed, new length and CRC (Kafka's
    ``writeEmptyHeader``); its offsets, timestamps and producer fields stay."""
    if compute_crc(chunk, position, header) != header.crc:
        raise ProtocolError(f"CRC mismatch in the batch at offset {header.base_offset}")
    out = bytearray(chunk[position : position + V2_HEADER_SIZE])
    _LENGTH.pack_into(out, 8, V2_HEADER_SIZE - 12)
    _ATTRIBUTES.pack_into(out, 21, header.attributes & ~ATTR_COMPRESSION_MASK)
    _LENGTH.pack_into(out, 57, 0)
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[21:]))
    return out


def _groups(log: Log, end_offset: int) -> Iterator[list[LogSegment]]:
    """Segments below ``end_offset`` (never the active one), in runs that fit one segment."""
    candidates = [segment for segment in list(log.segments)[:-1]
                  if segment.base_offset < end_offset]
    limit = min(log.config.segment_bytes, 2**31 - 1)
    group: list[LogSegment] = []
    size = 0
    for segment in candidates:
        if group and (size + segment.size > limit
                      or segment.next_offset - group[0].base_offset > MAX_SEGMENT_SPAN):
            yield group
            group, size = [], 0
        group.append(segment)
        size += segment.size
    if group:
        yield group
