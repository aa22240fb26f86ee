"""LogSegment: one ``.log`` file of whole record batches, with its offset and time index.

Files in the partition directory, named by the segment's base offset in 20 digits:
``00000000000000000000.log`` (batches), ``.index`` (``OffsetIndex``),
``.timeindex`` (``TimeIndex``), and, once it holds an ABORT marker, ``.txnindex``
(``TransactionIndex``). A segment being deleted has ``.deleted`` appended to each
name and is unlinked ``file.delete.delay.ms`` later.

The ``.log`` file is a plain concatenation of log entries exactly as producers sent
them (RecordBatch v2, or v0/v1 messages; see ``strom.protocol.records``), with the
broker-assigned offsets written into them. There is no segment header or footer.

Invariants:
- ``size`` (in memory) is the end of the last whole, acknowledged batch. Bytes past it
  (a failed write's leftovers) are never served and are cut off by recovery.
- Offsets inside a segment increase from ``base_offset``: each batch starts at or after
  the previous batch's next offset (recovery rejects anything else). Appended segments
  are contiguous; segments written by the compaction cleaner have gaps where records
  were removed (batches keep their base and last offsets).
- Every offset in the segment is < 2**31 above ``base_offset`` (index entries are
  int32), and ``size`` < 2**31 (positions are int32); the log rolls before either.
- The offset and time indexes are caches: recovery rebuilds them from the ``.log``
  alone. The transaction index is synced with the ``.log`` and rebuilt by the producer
  state's replay (see ``transaction_index``).
- With ``preallocate`` (Kafka's topic config, off by default) the active segment's file
  is ``posix_fallocate``'d to ``segment.bytes`` when created, so past ``size`` it reads
  zeros. Rolling and a clean close cut the file back to ``size``, so only the active
  segment of a log that crashed can have such a tail; recovery reads the length field
  0 there as the end of the log, not as a torn batch, and cuts the zeros silently.

Preallocation, measured (``benchmarks/storage.py``; this 2-core VM, ext4 with
``discard``, memory reclaimed by DAMON, so rounds swing 2x): 1 GiB of 1 MiB batches
through ``Log.append`` + ``flush`` into a new segment, segment creation timed too, 5
interleaved rounds, best / median seconds, two runs::

    plain new file (no preallocation)        0.81 / 1.33    0.68 / 1.11
    posix_fallocate (Kafka's preallocate)    0.81 / 1.48    0.54 / 0.72
    fallocate(FALLOC_FL_KEEP_SIZE)           0.65 / 0.67    0.56 / 0.71
    recycled segment file, pages cached      0.42 / 0.45    0.30 / 0.39
    recycled segment file, pages dropped     0.44 / 0.57    0.48 / 0.59

(Two earlier runs that did not time the fallocate call: plain 0.55 / 0.56, fallocate
0.45 / 0.49.) Writes that do not extend the file skip ext4's per-write block
allocation and size update, so ``posix_fallocate`` is faster in three runs of four
and ``preallocate`` is implemented with Kafka's semantics. Recycling deleted segment
files is faster still but is not done: a fetch may still ``sendfile`` from a deleted
segment during ``file.delete.delay.ms``, a recycled file's stale bytes past ``size``
would need the same care as the zero tail, and it only helps once retention deletes.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

from strom.protocol.errors import ProtocolError
from strom.protocol.records import BatchHeader, decode_records, validate_crc
from strom.protocol.records.header import LOG_OVERHEAD, MAGIC_OFFSET, MIN_LENGTH, V2_HEADER_SIZE
from strom.storage.fs import FileSystem, remove_files, write_fully
from strom.storage.index_file import CorruptIndexError
from strom.storage.offset_index import OffsetIndex
from strom.storage.time_index import TimeIndex, TimestampOffset
from strom.storage.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
DELETED_SUFFIX: Final = ".deleted"
MAX_RELATIVE_OFFSET: Final = 2**31 - 1
MAX_SEGMENT_POSITION: Final = 2**31 - 1

_SCAN_CHUNK: Final = 64 << 10
_ZERO_TAIL_SAMPLE: Final = 64 << 10
_RECOVERY_CHUNK: Final = 8 << 20
_PREFIX: Final = struct.Struct(">qii")  # offset, length, leader epoch (v2) / crc (v0/v1)
_V2_DELTA_AND_TIMES: Final = struct.Struct(">iqq")  # last_offset_delta, base/max timestamp
_INT64: Final = struct.Struct(">q")


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class BatchPeek(NamedTuple):
    """What a scan needs of a stored batch, read from its first bytes only."""

    position: int
    base_offset: int  # v0/v1: the entry's stored offset (a wrapper's LAST offset)
    size: int
    next_offset: int
    max_timestamp: int
    partition_leader_epoch: int


class AppendedBatch(NamedTuple):
    """One batch of an append, as the log hands it to the segment."""

    position: int  # inside the appended buffer
    last_offset: int
    max_timestamp: int
    size: int


def peek_batch(raw: bytes, at: int, position: int) -> BatchPeek | None:
    """Parse the batch starting at ``raw[at]`` (file ``position``); None if cut short.

    Raises ``ProtocolError`` for an impossible magic or length (a stored batch that
    is not one): scans stop there rather than wander into garbage.
    """
    if at + MAGIC_OFFSET + 1 > len(raw):
        return None
    offset, length, epoch = _PREFIX.unpack_from(raw, at)
    magic = raw[at + MAGIC_OFFSET]
    if magic > 2 or length < MIN_LENGTH[magic]:
        raise ProtocolError(f"impossible batch (magic {magic}, length {length}) at {position}")
    if magic == 2:
        if at + V2_HEADER_SIZE > len(raw):
            return None
        delta, _, max_timestamp = _V2_DELTA_AND_TIMES.unpack_from(raw, at + 23)
        return BatchPeek(position, offset, length + LOG_OVERHEAD, offset + delta + 1,
                         max_timestamp, epoch)
    timestamp = -1
    if magic == 1:
        if at + 26 > len(raw):
            return None
        timestamp = _INT64.unpack_from(raw, at + 18)[0]
    return BatchPeek(position, offset, length + LOG_OVERHEAD, offset + 1, timestamp, -1)


class LogSegment:
    """A ``.log`` file and its indexes; appends go to the end, reads anywhere below ``size``."""

    def __init__(
        self, fs: FileSystem, directory: str, base_offset: int, *,
        segment_index_bytes: int, index_interval_bytes: int, created_ms: int,
        file_suffix: str = "",
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.base_offset = base_offset
        # "" for a live segment; ".cleaned" while the cleaner writes it (see segment_swap)
        self.file_suffix = file_suffix
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.fd = fs.open(self._path(LOG_SUFFIX), os.O_RDWR | os.O_CREAT)
        self.offset_index = OffsetIndex(fs, self._path(INDEX_SUFFIX), base_offset,
                                        segment_index_bytes)
        self.time_index = TimeIndex(fs, self._path(TIME_INDEX_SUFFIX), base_offset,
                                    segment_index_bytes)
        self.txn_index = TransactionIndex(fs, self._path(TXN_INDEX_SUFFIX), base_offset)
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp = -1
        self._bytes_since_index = 0
        self.deleted = False
        self.dirty = False  # a failed write could not be cut off; recovery must run
        # The ``.log`` changed since it was last fdatasync'ed: a clean close must sync it.
        # A file opened as found is durable (a clean close or a roll synced it last, or
        # recovery is about to rewrite and sync it).
        self.unsynced = False

    def _path(self, suffix: str) -> str:
        return os.path.join(self.directory,
                            segment_file_name(self.base_offset, suffix) + self.file_suffix)

    def rename_indexes(self, file_suffix: str) -> None:
        """Give the index files ``file_suffix`` (the ``.log`` is renamed by the caller)."""
        for index, suffix in ((self.offset_index, INDEX_SUFFIX),
                              (self.time_index, TIME_INDEX_SUFFIX),
                              (self.txn_index, TXN_INDEX_SUFFIX)):
            index.rename(os.path.join(self.directory,
                                      segment_file_name(self.base_offset, suffix) + file_suffix))
        self.file_suffix = file_suffix

    @property
    def log_path(self) -> str:
        return self._path(LOG_SUFFIX)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size}, next={self.next_offset})"

    # --- opening ----------------------------------------------------------------------

    def load(self) -> None:
        """Trust the files after a clean shutdown: load indexes, find the end by scanning.

        Raises ``CorruptIndexError`` if an index is missing or insane, or the file does
        not end on a batch boundary; the loader then runs ``recover``.
        """
        self.size = self.fs.file_size(self.fd)
        for index in (self.offset_index, self.time_index):
            if not self.fs.exists(index.path):
                raise CorruptIndexError(f"{index.path} is missing")
            index.load()
        if self.offset_index.entries and self.offset_index.values[-1] >= self.size:
            raise CorruptIndexError(f"{self.offset_index.path} points past the log's end")
        start = self.offset_index.values[-1] if self.offset_index.entries else 0
        self.next_offset = max(self.base_offset, self.offset_index.last_offset)
        last = self.time_index.last_entry
        self.max_timestamp, self.offset_of_max_timestamp = last.timestamp, last.offset
        end = start
        try:
            for peek in self.iter_batches(start):
                self._note_timestamp(peek.max_timestamp, peek.next_offset - 1)
                self.next_offset, end = peek.next_offset, peek.position + peek.size
        except ProtocolError as exc:
            raise CorruptIndexError(str(exc)) from exc
        if end != self.size:
            raise CorruptIndexError(f"{self.log_path} does not end on a batch boundary")
        self.first_batch_timestamp = self._first_timestamp()
        self.txn_index.load()

    def _first_timestamp(self) -> int:
        for peek in self.iter_batches(0):
            return peek.max_timestamp
        return -1

    def preallocate(self, size: int) -> None:
        """Reserve the whole segment now: later appends overwrite allocated zeros."""
        self.unsynced = True
        self.fs.fallocate(self.fd, size)

    def make_empty(self) -> None:
        """A new segment starts from an empty file (a leftover of the same name is cut)."""
        if self.fs.file_size(self.fd):
            self.unsynced = True
            self.fs.ftruncate(self.fd, 0)
        self.txn_index.reset()

    def make_active(self) -> None:
        """Open both indexes for appending (preallocated); the log's last segment only."""
        self.offset_index.open_for_append()
        self.time_index.open_for_append()

    # --- appending --------------------------------------------------------------------

    def append(self, buffer: bytes | bytearray | memoryview, batches: list[AppendedBatch]) -> None:
        """Write whole batches at the end; on any error the segment is as it was before."""
        start = self.size
        saved = (self.next_offset, self.max_timestamp, self.offset_of_max_timestamp,
                 self.first_batch_timestamp, self._bytes_since_index,
                 self.offset_index.entries, self.time_index.entries)
        self.unsynced = True
        try:
            # One pwrite nearly always writes it all; write_fully's loop only for the rest.
            written = self.fs.pwrite(self.fd, buffer, start)
            if written != len(buffer):
                if written <= 0:
                    raise OSError(errno.ENOSPC, "write made no progress")
                write_fully(self.fs, self.fd, memoryview(buffer)[written:], start + written)
            for batch in batches:
                self._index_batch(start + batch.position, batch.last_offset,
                                  batch.max_timestamp, batch.size)
        except BaseException:
            (self.next_offset, self.max_timestamp, self.offset_of_max_timestamp,
             self.first_batch_timestamp, self._bytes_since_index, offsets, times) = saved
            self.offset_index.truncate_entries(offsets)
            self.time_index.truncate_entries(times)
            self._cut_file(start)
            raise
        self.size = start + len(buffer)

    def _cut_file(self, size: int) -> None:
        # Best effort: if this fails too, the bytes past ``size`` are unreachable in
        # memory and cut by recovery (the log then refuses a clean shutdown marker).
        try:
            self.fs.ftruncate(self.fd, size)
        except OSError:
            self.dirty = True

    def _index_batch(self, position: int, last_offset: int, max_timestamp: int,
                     size: int) -> None:
        if self.first_batch_timestamp < 0 and position == 0:
            self.first_batch_timestamp = max_timestamp
        self._note_timestamp(max_timestamp, last_offset)
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size
        self.next_offset = last_offset + 1

    def _note_timestamp(self, timestamp: int, offset: int) -> None:
        if timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = timestamp, offset

    def time_waited_for_roll(self, batches: list[AppendedBatch], now: int) -> int:
        """Kafka's rule for ``segment.ms``: by record time when both batches carry one
        (the new batches' max timestamp minus the segment's first), else by wall clock
        since the segment was created.
        """
        newest = batches[0].max_timestamp
        for batch in batches:  # a loop: cheaper than max() over a generator for one batch
            if batch.max_timestamp > newest:
                newest = batch.max_timestamp
        if self.first_batch_timestamp >= 0 and newest >= 0:
            return newest - self.first_batch_timestamp
        return now - self.created_ms

    def index_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    # --- reading ----------------------------------------------------------------------

    def iter_batches(self, start: int, end: int | None = None) -> Iterator[BatchPeek]:
        """Batches from file position ``start`` up to ``end`` (default: ``size``), headers only."""
        end = self.size if end is None else end
        raw, raw_start, position = b"", start, start
        while position + MAGIC_OFFSET + 1 <= end:
            at = position - raw_start
            peek = peek_batch(raw, at, position)
            if peek is None:
                raw, raw_start, at = self.fs.pread(self.fd, min(_SCAN_CHUNK, end - position),
                                                   position), position, 0
                peek = peek_batch(raw, at, position)
                if peek is None:
                    return
            if position + peek.size > end:
                return
            yield peek
            position += peek.size

    def translate_offset(self, offset: int, end: int | None = None) -> BatchPeek | None:
        """The first batch holding ``offset`` or a later one (None if all end before it)."""
        start = self.offset_index.lookup(offset).position
        for peek in self.iter_batches(start, end):
            if peek.next_offset > offset:
                return peek
        return None

    def read_batch(self, peek: BatchPeek) -> bytes:
        return self.fs.pread(self.fd, peek.size, peek.position)

    def find_offset_by_timestamp(self, timestamp: int,
                                 starting_offset: int) -> TimestampOffset | None:
        """The first record at or after ``starting_offset`` with timestamp >= ``timestamp``.

        Decodes the one batch that holds it, as ListOffsets must name a record.
        """
        indexed = self.time_index.lookup(timestamp).offset
        start = self.offset_index.lookup(max(indexed, starting_offset)).position
        for peek in self.iter_batches(start):
            if peek.max_timestamp < timestamp or peek.next_offset <= starting_offset:
                continue
            for record in decode_records(self.read_batch(peek), verify_crc=False):
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return TimestampOffset(record.timestamp, record.offset)
        return None

    # --- recovery and truncation ------------------------------------------------------

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Re-validate every batch, rebuild both indexes, cut at the first bad batch.

        A batch is bad if its length or magic is impossible, it runs past the file's
        end (a torn write), its CRC fails, or its offsets do not continue the previous
        batch's. Returns the number of bytes truncated.
        """
        self.unsynced = True  # what was read may be a killed process's page cache
        self.offset_index.reset()
        self.time_index.reset()
        self.size, self.next_offset = 0, self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.first_batch_timestamp, self._bytes_since_index = -1, 0
        file_size = self.fs.file_size(self.fd)
        for position, header in self._valid_batches(file_size):
            self._index_batch(position, header.last_offset, header.max_timestamp, header.size)
            self.size = position + header.size
            if on_batch is not None:
                on_batch(header)
        # Entries of markers cut off go; the producer state's replay appends the rest.
        self.txn_index.load(segment_end=self.next_offset)
        truncated = file_size - self.size
        if truncated:
            if self._zero_tail(file_size):
                truncated = 0  # preallocated space never written: the log's end, not damage
            self.fs.ftruncate(self.fd, self.size)
        return truncated

    def _zero_tail(self, file_size: int) -> bool:
        """Whether the bytes after ``size`` are zeros, judged by their first 64 KiB.

        Sampling keeps recovery of a 1 GiB preallocated segment from reading 1 GiB of
        zeros; a torn write that left zeros first is cut just the same, only not warned of.
        """
        sample = self.fs.pread(self.fd, min(_ZERO_TAIL_SAMPLE, file_size - self.size),
                               self.size)
        return not sample.strip(b"\0")

    def _valid_batches(self, file_size: int) -> Iterator[tuple[int, BatchHeader]]:
        raw, raw_start, position, expected = b"", 0, 0, self.base_offset
        while position < file_size:
            at = position - raw_start
            if at + V2_HEADER_SIZE > len(raw):
                raw, raw_start, at = self._read_chunk(position, file_size, 0), position, 0
            try:
                peek = peek_batch(raw, at, position)
                if peek is None or position + peek.size > file_size:
                    return
                if at + peek.size > len(raw):
                    raw, raw_start, at = self._read_chunk(position, file_size, peek.size), \
                        position, 0
                header = validate_crc(raw, at)
            except ProtocolError:
                return
            first = header.base_offset if header.magic == 2 else None
            if (first is not None and first < expected) or header.last_offset < expected \
                    or header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                return
            yield position, header
            expected = header.next_offset
            position += header.size

    def _read_chunk(self, position: int, file_size: int, at_least: int) -> bytes:
        size = min(max(_RECOVERY_CHUNK, at_least), file_size - position)
        return self.fs.pread(self.fd, size, position)

    def truncate_to(self, offset: int) -> int:
        """Drop every batch holding offsets >= ``offset``; returns bytes dropped.

        The index entries go first (in memory and in the files), then the ``.log`` is
        cut, so the files never hold an index entry past the log's end.
        """
        peek = self.translate_offset(offset)
        if peek is not None and peek.base_offset < offset:
            raise ValueError(f"offset {offset} is inside the batch at {peek.position}")
        position = self.size if peek is None else peek.position
        dropped = self.size - position
        self.offset_index.truncate_to_offset(offset)
        self.time_index.truncate_to_offset(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.drop_stale_entries()
        self.time_index.drop_stale_entries()
        self.unsynced = True
        self.fs.ftruncate(self.fd, position)
        self.size = position
        # The segment ends after its last batch kept: below ``offset`` if a compacted
        # segment has a gap there (as a reload of the file would find it).
        self.next_offset = self.base_offset
        last = self.time_index.last_entry
        self.max_timestamp, self.offset_of_max_timestamp = last.timestamp, last.offset
        for batch in self.iter_batches(self.offset_index.lookup(offset).position):
            self._note_timestamp(batch.max_timestamp, batch.next_offset - 1)
            self.next_offset = batch.next_offset
        if position == 0:
            self.first_batch_timestamp = -1
        self._bytes_since_index = 0
        return dropped

    def persist_rebuilt_indexes(self) -> None:
        """After ``recover`` on a segment that takes no more appends: write trimmed indexes."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.write_all()
        self.time_index.write_all()

    # --- rolling, flushing, closing, deleting ----------------------------------------

    def flush(self) -> None:
        """Sync the ``.log`` and the transaction index: the offset and time indexes are
        rebuilt by recovery, syncing them buys nothing."""
        self.unsynced = False  # before: a write racing the sync marks it again
        self.fs.fdatasync(self.fd)
        self.txn_index.flush()

    def on_roll(self) -> None:
        """The segment stops taking appends: final time entry, trim indexes and a
        preallocated tail, sync. Files unchanged since they were last durable are only
        closed (an idle log's clean shutdown costs no ``fdatasync``)."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.trim()
        self.time_index.trim()
        if self.fs.file_size(self.fd) > self.size:
            self.unsynced = True
            self.fs.ftruncate(self.fd, self.size)
        if self.unsynced:
            self.flush()
        self.txn_index.flush()  # (a replay's entries: the .log was synced already)
        self.txn_index.close()  # reopened only if a truncation's replay appends again

    def close(self) -> None:
        self.offset_index.close_without_trim()
        self.time_index.close_without_trim()
        self.txn_index.close()
        self.fs.close(self.fd)

    def rename_to_deleted(self) -> None:
        """Step one of a delete; open file descriptors (and readers using them) still work."""
        self.deleted = True
        self.offset_index.close_without_trim()
        self.time_index.close_without_trim()
        self.txn_index.close()
        self.txn_index.path += DELETED_SUFFIX  # readers keep its entries in memory
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            path = self._path(suffix)
            if self.fs.exists(path):
                self.fs.rename(path, path + DELETED_SUFFIX)
        self.offset_index.path += DELETED_SUFFIX
        self.time_index.path += DELETED_SUFFIX

    def delete_files(self) -> None:
        """Step two, ``file.delete.delay.ms`` later: close the log fd and unlink the files."""
        self.fs.close(self.fd)
        remove_files(self.fs, [self._path(suffix) + DELETED_SUFFIX for suffix in
                               (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)])
