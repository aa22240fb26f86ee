"""ProducerStateManager: idempotent and transactional producers of one partition (KIP-98).

Per producer id the broker keeps the producer epoch, the metadata of the last five
batches appended (a producer has at most five requests in flight, so a retry is
always one of them), the coordinator epoch of the last transaction marker, the
first offset of the producer's open transaction, and the last batch timestamp (for
``producer.id.expiration.ms``). A retried batch is recognised by (epoch, first
sequence, last sequence) and answered with the offsets it was given the first time.

On disk: ``<offset, 20 digits>.snapshot`` files in the partition directory. A snapshot
named N holds the state after every batch below offset N; it is written when a
segment rolls (N = the new segment's base offset, the old one is already synced) and
at a clean shutdown (N = the log end offset, after the final flush), unless the state
is on disk as of N already: nothing was appended since the snapshot N was written or
loaded (Kafka's ``takeSnapshot`` writes only when ``lastMapOffset > lastSnapOffset``),
or, with no snapshot, N is the log start and there is nothing to replay. An idle
partition's clean shutdown thus writes no file and fsyncs no directory. Each file is
written whole by ``write_file_atomically``. Strom's own format, version 1 (Kafka's
v1 keeps one batch per producer; this keeps all five, so a duplicate of any in-flight
batch is still detected after a restart). Big-endian::

    version                   int16   1
    crc                       uint32  CRC-32C (Castagnoli) of every byte after this field
    producer_count            int32
    per producer:
      producer_id             int64
      producer_epoch          int16
      coordinator_epoch       int32   -1: no marker seen
      current_txn_first_offset int64  -1: no open transaction
      last_timestamp          int64
      batch_count             int8    0..5, oldest first
      per batch:              first_sequence int32, last_sequence int32,
                              first_offset int64, last_offset int64, max_timestamp int64

Transactions (Kafka's ``ongoingTxns`` and ``CompletedTxn``): ``ongoing`` maps the first
offset of each open transaction to its producer, in offset order, so the first
unstable offset (the LSO's bound) is its first key. A COMMIT or ABORT marker for a
producer with an open transaction completes it: the append's ``completed`` lists it
with the LSO just after the marker (the first offset of the oldest transaction still
open, necessarily another producer's, else the marker's offset + 1), which the log
writes into the segment's ``.txnindex`` for an abort (``transaction_index``). A marker
for a producer with no open transaction (an empty transaction) completes nothing.
A completed transaction stays unstable until the high watermark passes its marker
(Kafka's ``unreplicatedTxns``; ``on_high_watermark_updated``): read_committed consumers
never read a transaction whose marker a new leader might lack, and the last stable
offset moves only when the high watermark does, so what wakes fetches waiting on the
high watermark wakes those waiting on the LSO too.

Invariants: a snapshot's offset is at most the log end offset (a snapshot above it
describes batches that are gone and is deleted on load); a snapshot that does not
parse or fails its CRC is deleted and the next older one is used. Loading takes the
newest snapshot at or below the log end offset and replays batch *headers* from
there (records are never decoded; a transaction marker's one control record is,
for its coordinator epoch); with no snapshot it replays from the log start. Replay
does not validate sequences: the batches were validated when they were appended.
Replay also rebuilds the transaction indexes from its start on: every index is cut at
the replay's start offset first, and each replayed ABORT appends its entry again.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.records import (
    BatchHeader,
    ControlRecordType,
    decode_batch,
    iter_batches,
    parse_control_record,
)
from strom.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    StorageError,
    TransactionCoordinatorFencedError,
)
from strom.storage.fs import FileSystem, read_file, remove_files, write_file_atomically
from strom.storage.log_segments import LogSegments
from strom.storage.transaction_index import AbortedTxn

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX: Final = ".snapshot"
SNAPSHOT_VERSION: Final = 1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
INT32_MAX: Final = 2**31 - 1
NUM_BATCHES_TO_RETAIN: Final = 5  # Kafka's max.in.flight.requests.per.connection bound

_HEAD: Final = struct.Struct(">hI")
_COUNT: Final = struct.Struct(">i")
_ENTRY: Final = struct.Struct(">qhiqqb")
_BATCH: Final = struct.Struct(">iiqqq")
_REPLAY_CHUNK: Final = 8 << 20


@dataclass(frozen=True, slots=True)
class ProducerStateManagerConfig:
    """Broker settings of producer state (not per topic in Kafka either)."""

    producer_id_expiration_ms: int = field(
        default=86400000, metadata={"kafka": "producer.id.expiration.ms"})


class BatchMetadata(NamedTuple):
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from Int32.MAX to 0 (Kafka's ``DefaultRecordBatch.incrementSequence``)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.current_txn_first_offset, self.last_timestamp,
                                  deque(self.batches, NUM_BATCHES_TO_RETAIN))

    def find_duplicate(self, epoch: int, first_sequence: int,
                       last_sequence: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return batch
        return None

    def update_epoch(self, epoch: int) -> None:
        """A new epoch starts a new sequence space: the old epoch's batches are no duplicates."""
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        self.update_epoch(epoch)
        self.batches.append(batch)
        self.last_timestamp = batch.max_timestamp


class CompletedTxn(NamedTuple):
    """A transaction a marker ended (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool

    def aborted_entry(self, last_stable_offset: int) -> AbortedTxn:
        return AbortedTxn(self.producer_id, self.first_offset, self.last_offset,
                          last_stable_offset)


class ProducerBatch(NamedTuple):
    """A batch with its final offsets, as the log hands it over; ``marker`` for control batches."""

    header: BatchHeader
    marker: tuple[ControlRecordType | int, int] | None  # (type, coordinator epoch)

    @property
    def metadata(self) -> BatchMetadata:
        header = self.header
        delta = header.last_offset_delta
        return BatchMetadata(
            header.base_sequence, increment_sequence(header.base_sequence, delta),
            header.base_offset, header.base_offset + delta, header.max_timestamp)


class ProducerAppendInfo:
    """The producers touched by one append, validated on copies; applied only once written."""

    def __init__(self, manager: ProducerStateManager, *, validate: bool) -> None:
        self.manager = manager
        self.validate = validate
        self.entries: dict[int, ProducerStateEntry] = {}
        # Transactions ended by this append's markers, each with the LSO right after it.
        self.completed: list[tuple[CompletedTxn, int]] = []
        # The manager's ``ongoing`` as this append leaves it; copied at the first
        # transaction that begins or ends here (None: unchanged).
        self.ongoing: dict[int, int] | None = None

    def _ongoing(self) -> dict[int, int]:
        if self.ongoing is None:
            self.ongoing = dict(self.manager.ongoing)  # keeps the offset order
        return self.ongoing

    def _entry(self, producer_id: int) -> ProducerStateEntry:
        entry = self.entries.get(producer_id)
        if entry is None:
            current = self.manager.producers.get(producer_id)
            entry = current.copy() if current else ProducerStateEntry(producer_id)
            self.entries[producer_id] = entry
        return entry

    def append(self, batch: ProducerBatch) -> None:
        header = batch.header
        entry = self._entry(header.producer_id)
        self._check_epoch(entry, header)
        if batch.marker is not None:
            self._append_marker(entry, header, *batch.marker)
            return
        # A batch without a sequence is a coordinator's (TxnOffsetCommit's offsets): Kafka
        # checks sequences and retries of client appends only (AppendOrigin.CLIENT).
        if self.validate and header.base_sequence != NO_SEQUENCE:
            self._check_sequence(entry, header)
        entry.add_batch(header.producer_epoch, batch.metadata)
        transactional = header.is_transactional
        if entry.current_txn_first_offset >= 0 and not transactional:
            raise InvalidTxnStateError(
                f"producer {header.producer_id} wrote a non-transactional batch at offset "
                f"{header.base_offset} while its transaction is open")
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = header.base_offset
            self._ongoing()[header.base_offset] = header.producer_id  # the highest yet

    def _check_epoch(self, entry: ProducerStateEntry, header: BatchHeader) -> None:
        # Kafka 2.7+ answers a Produce with an old epoch INVALID_PRODUCER_EPOCH, not
        # PRODUCER_FENCED, so the client can abort its transaction and go on (KIP-588).
        if self.validate and header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {header.producer_epoch} at offset "
                f"{header.base_offset} is older than the last seen {entry.producer_epoch}")

    def _check_sequence(self, entry: ProducerStateEntry, header: BatchHeader) -> None:
        sequence = header.base_sequence
        if header.producer_epoch != entry.producer_epoch:
            # KIP-360 (Kafka 2.5+): an unknown producer (state expired or deleted by
            # retention) may continue with any sequence; a known one must restart at 0.
            if sequence != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} new epoch {header.producer_epoch} must "
                    f"start at sequence 0, not {sequence}")
        elif entry.producer_epoch != NO_PRODUCER_EPOCH \
                and not in_sequence(entry.last_sequence, sequence):
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} sent sequence {sequence} after "
                f"{entry.last_sequence} (epoch {header.producer_epoch})")

    def _append_marker(self, entry: ProducerStateEntry, header: BatchHeader,
                       control_type: ControlRecordType | int, coordinator_epoch: int) -> None:
        if self.validate and coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {header.producer_id} has coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch}")
        entry.update_epoch(header.producer_epoch)
        if control_type in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            first_offset = entry.current_txn_first_offset
            if first_offset >= 0:
                ongoing = self._ongoing()
                ongoing.pop(first_offset, None)
                marker_offset = header.base_offset
                self.completed.append((
                    CompletedTxn(header.producer_id, first_offset, marker_offset,
                                 control_type == ControlRecordType.ABORT),
                    next(iter(ongoing), marker_offset + 1)))
            entry.current_txn_first_offset = -1
            entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = header.max_timestamp


class ProducerStateManager:
    """State of every live producer of a partition; mutated under the log's lock only.

    ``first_unstable_offset`` is a plain attribute so that readers (the LSO) need no lock.
    ``ongoing``: open transactions, first offset -> producer id, in offset order (the
    module docstring); ``unreplicated``: completed ones whose marker is at or above the
    high watermark, first offset -> marker offset.
    """

    def __init__(self, fs: FileSystem, directory: str,
                 config: ProducerStateManagerConfig | None = None) -> None:
        self.fs = fs
        self.directory = directory
        self.config = config or ProducerStateManagerConfig()
        self.producers: dict[int, ProducerStateEntry] = {}
        self.first_unstable_offset: int | None = None
        self.ongoing: dict[int, int] = {}
        self.unreplicated: dict[int, int] = {}
        # The offset as of which this state is what ``load`` would rebuild from disk
        # with nothing to replay (a snapshot of that name, or the log start without
        # one); None once an append changed it. A snapshot there would be a rewrite.
        self._on_disk_at: int | None = None

    # --- appends ----------------------------------------------------------------------

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The original metadata of a retried batch, if it is one of the last five."""
        entry = self.producers.get(header.producer_id)
        if entry is None or header.is_control or header.base_sequence == NO_SEQUENCE:
            return None
        last = increment_sequence(header.base_sequence, header.last_offset_delta)
        return entry.find_duplicate(header.producer_epoch, header.base_sequence, last)

    def prepare(self, batches: Iterable[ProducerBatch], *, validate: bool = True
                ) -> ProducerAppendInfo:
        """Check batches (with their final offsets) against the rules; raises a
        ``ProducerStateError`` and changes nothing if one breaks them."""
        info = ProducerAppendInfo(self, validate=validate)
        for batch in batches:
            info.append(batch)
        return info

    def complete(self, info: ProducerAppendInfo) -> None:
        """Apply a prepared append once its batches are in the log."""
        self._on_disk_at = None
        self.producers.update(info.entries)
        # Untouched by appends that begin and end no transaction (an idempotent
        # producer's): no scan of the producers per append.
        if info.ongoing is not None:
            self.ongoing = info.ongoing
            for txn, _ in info.completed:
                self.unreplicated[txn.first_offset] = txn.last_offset
            self._update_first_unstable_offset()

    def active_producers(self) -> list[ProducerStateEntry]:
        """A copy of every producer's state, in producer id order (DescribeProducers,
        Kafka's ``activeProducers``): the caller reads it while appends go on."""
        return [entry.copy() for _, entry in sorted(self.producers.items())]

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is below the HW become stable."""
        if self.unreplicated:
            self.unreplicated = {first: last for first, last in self.unreplicated.items()
                                 if last >= high_watermark}
            self._update_first_unstable_offset()

    def _update_first_unstable_offset(self) -> None:
        first = next(iter(self.ongoing), None)
        if self.unreplicated:
            oldest = min(self.unreplicated)
            first = oldest if first is None else min(first, oldest)
        self.first_unstable_offset = first

    def _rebuild_ongoing(self) -> None:
        """``ongoing`` from the producers' open transactions (after a snapshot is read);
        ``unreplicated`` empty."""
        self.ongoing = dict(sorted((entry.current_txn_first_offset, entry.producer_id)
                                   for entry in self.producers.values()
                                   if entry.current_txn_first_offset >= 0))
        self.unreplicated = {}
        self._update_first_unstable_offset()

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` (not mid-transaction)."""
        expiration = self.config.producer_id_expiration_ms
        expired = [producer_id for producer_id, entry in self.producers.items()
                   if entry.current_txn_first_offset < 0
                   and now_ms - entry.last_timestamp >= expiration]
        for producer_id in expired:
            del self.producers[producer_id]
        return len(expired)

    # --- snapshots --------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def snapshot_offsets(self) -> list[int]:
        names = self.fs.listdir(self.directory)
        return sorted(int(name[: -len(SNAPSHOT_SUFFIX)]) for name in names
                      if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit())

    def take_snapshot(self, offset: int) -> None:
        """Write the state as of ``offset`` (every batch below it appended, none above),
        unless it is on disk as of ``offset`` already (the module docstring)."""
        if offset == self._on_disk_at:
            return
        write_file_atomically(self.fs, self.snapshot_path(offset),
                              encode_snapshot(self.producers.values()))
        self._on_disk_at = offset

    def delete_snapshots_before(self, offset: int) -> None:
        """Retention: snapshots below the first segment can never be replayed from."""
        if self._on_disk_at is not None and self._on_disk_at < offset:
            self._on_disk_at = None
        remove_files(self.fs, [self.snapshot_path(snapshot) for snapshot in
                               self.snapshot_offsets() if snapshot < offset])

    def truncate_and_reload(self, segments: LogSegments, log_start_offset: int,
                            log_end_offset: int, now_ms: int) -> None:
        """The log was truncated to ``log_end_offset`` (Kafka's ``truncateAndReload`` then
        ``rebuildProducerState``): forget everything, delete the snapshots above the new
        end, and load again from the newest one left plus the batches after it. A
        producer's last batches are then those the log still holds: a retry of a
        truncated batch is appended anew, and its sequence must follow what is left."""
        self.producers = {}
        self._rebuild_ongoing()
        self.load(segments, log_start_offset, log_end_offset, now_ms)

    def truncate_fully(self) -> None:
        """The log starts over empty: no producer, no snapshot."""
        remove_files(self.fs, [self.snapshot_path(offset) for offset in self.snapshot_offsets()])
        self.producers = {}
        self._rebuild_ongoing()
        self._on_disk_at = None

    # --- loading ----------------------------------------------------------------------

    def load(self, segments: LogSegments, log_start_offset: int, log_end_offset: int,
             now_ms: int) -> None:
        """Newest usable snapshot at or below the log end offset, then replay from it."""
        start = log_start_offset
        loaded: int | None = None  # the offset of the snapshot used, if any
        for offset in reversed(self.snapshot_offsets()):
            if offset > log_end_offset:
                logger.info("%s: deleting snapshot %d above the log end offset %d",
                            self.directory, offset, log_end_offset)
                remove_files(self.fs, [self.snapshot_path(offset)])
                continue
            try:
                self.producers = {entry.producer_id: entry for entry in
                                  decode_snapshot(read_file(self.fs, self.snapshot_path(offset)))}
            except ValueError as exc:
                logger.warning("%s: %s; deleted, trying an older snapshot", self.directory, exc)
                remove_files(self.fs, [self.snapshot_path(offset)])
                continue
            start, loaded = max(offset, start), offset
            break
        self._rebuild_ongoing()  # the snapshot's open transactions
        for segment in segments.from_offset(start):
            segment.txn_index.truncate_to(start)  # what the replay appends again
        replay = self.prepare(iter_producer_batches(self.fs, segments, start), validate=False)
        self.complete(replay)
        for txn, last_stable_offset in replay.completed:
            if txn.is_aborted:
                segments.floor(txn.last_offset).txn_index.append(
                    txn.aborted_entry(last_stable_offset))
        # On disk as is: the snapshot named ``start``, or no snapshot and no producer.
        self._on_disk_at = start if not replay.entries and loaded in (start, None) else None
        self.remove_expired_producers(now_ms)


# --- replay ---------------------------------------------------------------------------


def iter_producer_batches(fs: FileSystem, segments: LogSegments,
                          start_offset: int) -> Iterator[ProducerBatch]:
    """Batches with a producer id from ``start_offset`` on, read in chunks of >= 8 MiB."""
    for segment in segments.from_offset(start_offset):
        peek = segment.translate_offset(start_offset)
        if peek is None:
            continue
        position, end = peek.position, segment.size
        while position < end:
            first_size = _COUNT.unpack(fs.pread(segment.fd, 4, position + 8))[0] + 12
            chunk = fs.pread(segment.fd, min(max(_REPLAY_CHUNK, first_size), end - position),
                             position)
            consumed = 0
            for at, header in iter_batches(chunk):
                consumed = at + header.size
                if header.producer_id != NO_PRODUCER_ID and header.magic == 2:
                    yield producer_batch(chunk, at, header)
            if consumed == 0:
                raise StorageError(f"{segment.log_path}: no whole batch at {position}")
            position += consumed


def producer_batch(buffer: bytes | bytearray, position: int, header: BatchHeader
                   ) -> ProducerBatch:
    """Pair a header with its transaction marker (decoding the control batch's one record)."""
    if not header.is_control:
        return ProducerBatch(header, None)
    try:
        records = decode_batch(buffer, position, verify_crc=False).records
        if not records:
            return ProducerBatch(header, (-1, -1))
        marker = parse_control_record(records[0].key, records[0].value)
    except ProtocolError as exc:
        raise StorageError(f"unreadable control batch at offset {header.base_offset}: {exc}",
                           ErrorCode.CORRUPT_MESSAGE) from exc
    return ProducerBatch(header, (marker.type, marker.coordinator_epoch
                                  if marker.coordinator_epoch is not None else -1))


# --- snapshot format ------------------------------------------------------------------


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    count = 0
    for entry in entries:
        body += _ENTRY.pack(entry.producer_id, entry.producer_epoch, entry.coordinator_epoch,
                            entry.current_txn_first_offset, entry.last_timestamp,
                            len(entry.batches))
        for batch in entry.batches:
            body += _BATCH.pack(*batch)
        count += 1
    body[0:0] = _COUNT.pack(count)
    from crc32c import crc32c  # importlib.metadata inside: see decode_snapshot

    return _HEAD.pack(SNAPSHOT_VERSION, crc32c(body)) + body


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Raises ``ValueError`` for a wrong version, a CRC mismatch or a short file."""
    try:
        version, crc = _HEAD.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"unknown producer snapshot version {version}")
        body = memoryview(data)[_HEAD.size :]
        # The crc32c package reads its own version through importlib.metadata (~30 ms,
        # a tenth of strom serve's start-up): imported by the first checksum, not at start.
        from crc32c import crc32c

        if crc32c(body) != crc:
            raise ValueError("producer snapshot CRC mismatch")
        (count,), position = _COUNT.unpack_from(body, 0), _COUNT.size
        entries = []
        for _ in range(count):
            *fields, batch_count = _ENTRY.unpack_from(body, position)
            position += _ENTRY.size
            entry = ProducerStateEntry(*fields)
            for _ in range(batch_count):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, position)))
                position += _BATCH.size
            entries.append(entry)
    except struct.error as exc:
        raise ValueError(f"truncated producer snapshot: {exc}") from exc
    if position != len(body):
        raise ValueError("trailing bytes after the producer snapshot's entries")
    return entries
