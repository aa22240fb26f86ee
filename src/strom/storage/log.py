"""Log: one partition's append-only log — offsets, appends, reads, rolls, flushes, retention,
and a follower's truncation (``truncation``).

On disk a partition is the directory ``<data-dir>/<topic>-<partition>/`` holding its
segments (``segment``), ``leader-epoch-checkpoint`` (``leader_epoch``), producer state
snapshots (``producer_state``), ``truncation-in-progress`` while a truncation runs
(``truncation``), and nothing else; the data dir's checkpoint files hold its recovery
point and log start offset.

A follower appends the leader's batches as they are (``append_as_follower``): offsets,
epochs and producer fields kept, the leader epochs and producer state learnt from them
(unvalidated, as recovery replays them), so a retry that reaches this replica once it
leads is still recognised. The HW is the fetcher's to set.

Idempotence: every batch with a producer id is checked against ``producer_state``
after offsets are assigned in memory and before a byte is written, so a rejected
append (``ProducerStateError``) writes nothing, and a retried batch is answered with
its original offsets (``AppendResult.duplicate``).

Offsets (Kafka's vocabulary)::

    log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset

- ``log_end_offset`` (LEO): the next offset to assign; every batch below it is whole.
- ``high_watermark``: the end of what consumers may read. Kept apart from the LEO
  for replication (a later issue); with ``hw_follows_leo`` (single node) it moves
  to the LEO after every append.
- ``last_stable_offset``: the HW, or the first offset of the oldest transaction still
  open, if lower (read_committed consumers stop there; their reads list the aborted
  transactions they overlap, from the segments' ``.txnindex``, ``transaction_index``).
- ``recovery_point``: everything below it is fdatasync'ed; recovery after a crash
  re-validates from the segment that holds it.

Durability (Kafka's defaults ``flush.messages`` = ``flush.ms`` = 2**63-1): appends go
to the page cache and the log never calls fdatasync except when a segment rolls
(the old segment is synced and the recovery point moves to the new one) and at a
clean shutdown. A *process* crash (SIGKILL, OOM) therefore loses nothing that was
acknowledged, because the kernel still has the pages. An *operating-system* crash or
power loss can lose every batch written since the last roll of that partition — up
to ``segment.bytes`` (1 GiB) — and recovery truncates to the last whole, valid batch
the disk kept. Kafka relies on replication for durability; a single Strom node
that must not lose acknowledged data sets ``flush.messages=1`` (every append is
fdatasync'ed before it returns) or a small ``flush.ms`` (bounded loss window).

Concurrency: one writer at a time (a lock around every mutation); readers take no
lock — they read ``segments`` once (copy-on-write, see ``log_segments``) and bound
every read by an offset they read before the sizes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Final

from strom.protocol.records import iter_batches
from strom.storage.config import LogConfig
from strom.storage.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    UnexpectedAppendOffsetError,
)
from strom.storage.fs import FileSystem
from strom.storage.leader_epoch import LeaderEpochFileCache
from strom.storage.log_results import AppendResult, FetchIsolation, FetchResult
from strom.storage.log_segments import LogSegments
from strom.storage.log_validator import (
    FollowerRun,
    assign_legacy_offsets,
    assign_offsets,
    find_duplicate,
    follower_runs,
    validate_records,
)
from strom.storage.producer_state import CompletedTxn, ProducerStateManager
from strom.storage.retention import deletable_prefix
from strom.storage.segment import (
    MAX_RELATIVE_OFFSET,
    MAX_SEGMENT_POSITION,
    AppendedBatch,
    LogSegment,
)
from strom.storage.segment_swap import swap_in
from strom.storage.time_index import TimestampOffset
from strom.storage.transaction_index import (
    AbortedTxn,
    carry_aborted_txns,
    collect_aborted,
    fetch_upper_bound,
    sync_rebuilt_indexes,
)
from strom.storage.truncation import (
    LogTruncation,
    TruncationKind,
    batch_boundary,
    delete_highest_first,
    remove_marker,
    truncate_segments,
    write_marker,
)

logger = logging.getLogger(__name__)

_HIGH_WATERMARK: Final = FetchIsolation.HIGH_WATERMARK
_TXN_COMMITTED: Final = FetchIsolation.TXN_COMMITTED


class Log:
    """A partition's log; built by ``LogLoader.load`` (which runs recovery if needed)."""

    def __init__(
        self, *, fs: FileSystem, directory: str, topic: str, partition: int,
        config: LogConfig, segments: LogSegments, log_start_offset: int,
        recovery_point: int, leader_epoch_cache: LeaderEpochFileCache,
        clock: Callable[[], int], hw_follows_leo: bool = True,
        producer_state: ProducerStateManager | None = None,
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments = segments
        self.leader_epoch_cache = leader_epoch_cache
        self.clock = clock
        self.hw_follows_leo = hw_follows_leo
        self._lock = threading.RLock()
        self._log_end_offset = segments.active.next_offset
        self._log_start_offset = max(log_start_offset, segments.first.base_offset)
        self._high_watermark = self._log_end_offset if hw_follows_leo else self._log_start_offset
        self._recovery_point = min(recovery_point, self._log_end_offset)
        self.producer_state = producer_state or ProducerStateManager(fs, directory)
        # Whether a segment may hold an aborted transaction: False spares read_committed
        # fetches of a log without transactions any index walk.
        self._has_aborted_txns = any(segment.txn_index.entries for segment in segments)
        self.producer_state.on_high_watermark_updated(self._high_watermark)  # replayed txns
        self._unflushed_messages = 0
        self._last_flush_ms = clock()
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.offline = False  # set after an fdatasync failure; appends then refuse
        self.closed = False
        # Set by the compaction cleaner while it reads segments: deleted segments' fds
        # then stay open past file.delete.delay.ms (a closed fd number could be reused).
        self._cleaner_reading = False
        # Truncations so far, and how many there had been when the cleaner began: a
        # cleaning that saw records since truncated must not be swapped in.
        self._truncations = 0
        self._truncations_when_cleaning_began = 0

    def __repr__(self) -> str:
        return f"Log({self.topic}-{self.partition}, start={self._log_start_offset}, " \
               f"end={self._log_end_offset})"

    @property
    def cleaner_reading(self) -> bool:
        return self._cleaner_reading

    @cleaner_reading.setter
    def cleaner_reading(self, reading: bool) -> None:
        if reading:
            self._truncations_when_cleaning_began = self._truncations
        self._cleaner_reading = reading

    # --- offsets ----------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """min(HW, first unstable offset), never below the log start (Kafka's: an open
        transaction whose first records DeleteRecords or retention removed)."""
        first_unstable = self.producer_state.first_unstable_offset
        if first_unstable is None:
            return self._high_watermark
        return min(self._high_watermark, max(first_unstable, self._log_start_offset))

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return self.segments.size_in_bytes

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW (replication's job), clamped to [log start, LEO]; returns it."""
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)
            self.producer_state.on_high_watermark_updated(self._high_watermark)
            return self._high_watermark

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch in the log (-1 if none): a follower's ``last_fetched_epoch``."""
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset), or (-1, -1) if unknown."""
        return self.leader_epoch_cache.end_offset_for(leader_epoch, self._log_end_offset)

    # --- append -----------------------------------------------------------------------

    def append(self, records: bytes | bytearray | memoryview, *, leader_epoch: int = -1,
               now_ms: int | None = None, from_client: bool = False) -> AppendResult:
        """Append a producer's batches as sent; assign offsets; maybe roll and flush.

        A ``bytearray`` argument is rewritten in place (offsets, epoch, append time);
        anything else is copied first. Raises ``InvalidRecordsError`` or a
        ``ProducerStateError`` (nothing written), or ``KafkaStorageError`` (the disk
        failed; nothing of this append is readable). A producer's retry of one of its
        last five batches writes nothing and returns the original offsets with
        ``duplicate=True``. ``from_client`` refuses control batches (transaction markers
        come from the coordinator, never from a producer), as Kafka's client origin does.

        Validation, duplicate detection and offset assignment are ``log_validator``'s;
        every batch header is parsed once, by the CRC check, and the producer state gets
        the same header with the offset and epoch it was given.
        """
        buffer = records if isinstance(records, bytearray) else bytearray(records)
        config = self.config
        headers, legacy, idempotent = validate_records(
            buffer, segment_bytes=config.segment_bytes,
            max_message_bytes=config.max_message_bytes, from_client=from_client)
        with self._lock:
            if self.offline or self.closed:
                raise KafkaStorageError(f"{self} is offline or closed")
            if idempotent:
                original = find_duplicate(headers, self.producer_state.find_duplicate)
                if original is not None:
                    # Kafka answers a retry with the original batch's max timestamp as its
                    # log append time, whatever the topic's timestamp type (UnifiedLog.append).
                    return AppendResult(original.first_offset, original.last_offset,
                                        original.max_timestamp, self._log_start_offset, duplicate=True)
            now = self.clock() if now_ms is None else now_ms
            append_time = now if config.log_append_time else -1
            base_offset = self._log_end_offset
            if legacy:
                buffer = assign_legacy_offsets(buffer, headers, base_offset,
                                               max_uncompressed_size=max(config.segment_bytes, 1))
                headers = list(iter_batches(buffer))
            batches, producer_batches = assign_offsets(buffer, headers, base_offset,
                                                       leader_epoch, append_time)
            producers = self.producer_state.prepare(producer_batches) \
                if producer_batches else None
            segment = self._maybe_roll(len(buffer), batches, now)
            try:
                segment.append(buffer, batches)
            except OSError as exc:
                raise KafkaStorageError(f"append to {self} failed: {exc}") from exc
            if producers is not None:
                self.producer_state.complete(producers)
                if producers.completed:
                    self._index_aborted_txns(segment, producers.completed)
            last_offset = batches[-1].last_offset
            self._after_append(base_offset, last_offset, leader_epoch, now)
            return AppendResult(base_offset, last_offset, append_time, self._log_start_offset)

    def _after_append(self, base_offset: int, last_offset: int, leader_epoch: int,
                      now: int) -> None:
        self._log_end_offset = last_offset + 1
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, base_offset)
        if self.hw_follows_leo:
            self._high_watermark = self._log_end_offset
            if self.producer_state.unreplicated:
                self.producer_state.on_high_watermark_updated(self._high_watermark)
        self._unflushed_messages += last_offset + 1 - base_offset
        if self._unflushed_messages >= self.config.flush_messages \
                or now - self._last_flush_ms >= self.config.flush_ms:
            self.flush(now)

    def append_as_follower(self, records: bytes | bytearray | memoryview, *,
                           current_leader_epoch: int | None = None,
                           now_ms: int | None = None) -> AppendResult:
        """Append the leader's batches as they are (Kafka's ``appendAsFollower``).

        Checks and splitting are ``log_validator.follower_runs``'s (a trailing partial
        batch is left out; with ``current_leader_epoch``, so are batches of a newer
        epoch). Raises ``UnexpectedAppendOffsetError`` if the first batch starts below
        the log end offset (nothing written); a start above it is a compacted leader's
        gap. Each batch's epoch goes to the leader-epoch cache, each producer batch to
        the producer state, unvalidated. The HW moves only with ``hw_follows_leo``.
        Returns the first and last offsets appended; with no whole batch, nothing is
        written and the last offset is the log end offset - 1.
        """
        buffer = records if isinstance(records, (bytes, bytearray)) else bytes(records)
        runs = follower_runs(buffer, segment_bytes=self.config.segment_bytes,
                             current_leader_epoch=current_leader_epoch)
        with self._lock:
            self._check_writable()
            end = self._log_end_offset
            if not runs:
                return AppendResult(end, end - 1, -1, self._log_start_offset)
            first = runs[0].first_offset
            if first < end:
                raise UnexpectedAppendOffsetError(
                    f"unexpected offset in a follower's append to {self}: the first batch "
                    f"starts at {first}, below the log end offset {end}", first,
                    runs[-1].last_offset)
            now = self.clock() if now_ms is None else now_ms
            for run in runs:
                self._append_run(run, now)
            return AppendResult(first, self._log_end_offset - 1, -1, self._log_start_offset)

    def _append_run(self, run: FollowerRun, now: int) -> None:
        producers = self.producer_state.prepare(run.producer_batches, validate=False) \
            if run.producer_batches else None
        segment = self._maybe_roll(len(run.records), run.batches, now)
        if run.last_offset - segment.base_offset > MAX_RELATIVE_OFFSET:
            segment = self._roll_at(run.first_offset, now)  # a gap of 2**31 offsets
        try:
            segment.append(run.records, run.batches)
        except OSError as exc:
            raise KafkaStorageError(f"append to {self} failed: {exc}") from exc
        if producers is not None:
            self.producer_state.complete(producers)
            if producers.completed:
                self._index_aborted_txns(segment, producers.completed)
        self.leader_epoch_cache.assign_from_leader(run.headers)
        self._after_append(run.first_offset, run.last_offset, -1, now)

    def _index_aborted_txns(self, segment: LogSegment,
                            completed: list[tuple[CompletedTxn, int]]) -> None:
        """The aborts an append's markers made, into the segment that holds the markers."""
        try:
            if segment.txn_index.append_aborted(completed):
                self._has_aborted_txns = True
        except OSError as exc:
            self.offline = True  # the markers are in, their index is not: recovery rebuilds it
            raise KafkaStorageError(f"indexing aborted transactions of {self} failed: "
                                    f"{exc}") from exc

    def remove_expired_producers(self, now_ms: int) -> int:
        """``producer.id.expiration.ms``: the broker calls this periodically."""
        with self._lock:
            return self.producer_state.remove_expired_producers(now_ms)

    # --- roll and flush ---------------------------------------------------------------

    def _maybe_roll(self, size: int, batches: list[AppendedBatch], now: int) -> LogSegment:
        segment = self.segments.active
        if segment.size == 0:
            return segment
        if (segment.size + size > min(self.config.segment_bytes, MAX_SEGMENT_POSITION)
                or segment.time_waited_for_roll(batches, now) >= self.config.segment_ms
                or segment.index_full()
                or batches[-1].last_offset - segment.base_offset > MAX_RELATIVE_OFFSET):
            return self.roll(now)
        return segment

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the LEO; the old one is trimmed and synced."""
        with self._lock:  # the LEO read under it: an append may be under way
            return self._roll_at(self._log_end_offset,
                                 self.clock() if now_ms is None else now_ms)

    def _roll_at(self, new_base: int, now: int) -> LogSegment:
        """``roll``, at ``new_base`` >= the LEO (above it only for a follower's gap)."""
        with self._lock:
            active = self.segments.active
            if active.base_offset == new_base:
                return active  # empty: nothing to roll
            try:
                active.on_roll()
                segment = self._new_segment(new_base, now)
                self.fs.fsync_dir(self.directory)
                self.producer_state.take_snapshot(new_base)
            except OSError as exc:
                raise KafkaStorageError(f"rolling {self} failed: {exc}") from exc
            self.segments = self.segments.with_appended(segment)
            self._recovery_point = max(self._recovery_point, new_base)
            logger.info("rolled %s-%d at offset %d", self.topic, self.partition, new_base)
            return segment

    def _new_segment(self, base_offset: int, now: int) -> LogSegment:
        segment = LogSegment(self.fs, self.directory, base_offset,
                             segment_index_bytes=self.config.segment_index_bytes,
                             index_interval_bytes=self.config.index_interval_bytes,
                             created_ms=now)
        segment.make_empty()
        if self.config.preallocate:
            segment.preallocate(min(self.config.segment_bytes, MAX_SEGMENT_POSITION))
        segment.make_active()
        return segment

    def flush(self, now_ms: int | None = None) -> None:
        """fdatasync every segment from the recovery point on; move the recovery point."""
        with self._lock:
            end = self._log_end_offset
            if end > self._recovery_point:
                try:
                    for segment in self.segments.from_offset(self._recovery_point):
                        segment.flush()
                except OSError as exc:
                    # After a failed fsync the page cache cannot be trusted (it may have
                    # dropped the dirty pages); only a restart with recovery can.
                    self.offline = True
                    raise KafkaStorageError(f"flush of {self} failed: {exc}") from exc
                self._recovery_point = end
            self._unflushed_messages = 0
            self._last_flush_ms = self.clock() if now_ms is None else now_ms

    def flush_if_due(self, now_ms: int) -> bool:
        """The ``flush.ms`` timer: the broker calls this periodically."""
        if self._unflushed_messages and now_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush(now_ms)
            return True
        return False

    # --- read -------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *,
             isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
             min_one_message: bool = True) -> FetchResult:
        """A file region starting at the batch holding ``offset`` (KIP-74: the first
        batch whole even if larger than ``max_bytes``; later ones may be cut, as in Kafka).
        """
        end, start = self._log_end_offset, self._log_start_offset
        # Enum members bound to module names, no dict per read: the fetch path's hottest call.
        if isolation is _HIGH_WATERMARK:
            bound = self._high_watermark
        elif isolation is _TXN_COMMITTED:
            bound = self.last_stable_offset
        else:
            bound = end
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{start}, {end}] of {self.topic}-{self.partition}")
        region = self.segments.region(offset, max_bytes, bound, min_one_message) \
            if offset < bound else None
        if isolation is not _TXN_COMMITTED:
            return FetchResult(offset, region, self._high_watermark, self.last_stable_offset,
                               start, end)
        aborted: tuple[AbortedTxn, ...] = ()
        if region is not None and self._has_aborted_txns:
            aborted = tuple(self.collect_aborted_transactions(
                offset, fetch_upper_bound(self.segments.from_offset(offset), region, bound)))
        return FetchResult(offset, region, self._high_watermark, self.last_stable_offset,
                           start, end, aborted)

    def collect_aborted_transactions(self, start_offset: int,
                                     upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``,
        those that began before ``start_offset`` included (Kafka's LocalLog
        ``collectAbortedTransactions``): from the segment holding ``start_offset`` on,
        until an entry shows that every transaction below the bound had completed."""
        if not self._has_aborted_txns:
            return []
        return collect_aborted((segment.txn_index
                                for segment in self.segments.from_offset(start_offset)),
                               start_offset, upper_bound_offset)

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """ListOffsets by time: the first record with timestamp >= ``timestamp`` below the HW."""
        return self.segments.offset_for_timestamp(timestamp, self._log_start_offset,
                                                  self._high_watermark)

    # --- DeleteRecords and retention --------------------------------------------------

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (<= HW); returns it.

        Whole segments below it are deleted by the next ``delete_old_segments``.
        """
        with self._lock:
            if offset < 0 or offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: the high watermark is "
                    f"{self._high_watermark}")
            if offset > self._log_start_offset:
                self._log_start_offset = offset
                self.leader_epoch_cache.truncate_from_start(offset)
                logger.info("log start offset of %s-%d moved to %d", self.topic,
                            self.partition, offset)
            return self._log_start_offset

    def delete_old_segments(self, now_ms: int) -> int:
        """Apply retention.ms, retention.bytes and the log start offset; returns segments deleted."""
        with self._lock:
            count = deletable_prefix(self.fs, self.segments, self.config,
                                     high_watermark=self._high_watermark,
                                     log_start_offset=self._log_start_offset, now_ms=now_ms)
            if count == 0:
                return 0
            if count == len(self.segments):
                self.roll(now_ms)  # never leave a log without an active segment
            doomed = tuple(self.segments)[:count]
            self.segments = self.segments.without_first(count)
            self._log_start_offset = max(self._log_start_offset, self.segments.first.base_offset)
            self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
            self.producer_state.delete_snapshots_before(self.segments.first.base_offset)
            for segment in doomed:
                segment.rename_to_deleted()
                self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms,
                                              segment))
            logger.info("deleted %d segment(s) of %s-%d; log start offset now %d", count,
                        self.topic, self.partition, self._log_start_offset)
            return count

    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment],
                         end_offset: int, aborted_txns: Sequence[AbortedTxn] | None = None
                         ) -> bool:
        """The cleaner's swap of ``old`` (covering ``[old[0].base, end_offset)``) for
        ``cleaned``, in one step under the writer lock (``segment_swap``); False if
        retention or a truncation changed those segments first. ``aborted_txns``: the
        cleaned segment's ``.txnindex`` entries (those whose transactions kept a batch);
        None keeps every entry of ``old``."""
        with self._lock:
            if self.closed or self.offline \
                    or self._truncations != self._truncations_when_cleaning_began:
                return False
            try:
                if self.segments.replaced(old, cleaned) is not None:
                    carry_aborted_txns(cleaned.txn_index, [segment.txn_index for segment in old],
                                       aborted_txns)
                replaced = swap_in(self.fs, self.directory, self.segments, cleaned, old,
                                   end_offset)
            except OSError as exc:
                self.offline = True  # half-renamed files: only recovery may sort them out
                raise KafkaStorageError(f"swapping cleaned segments into {self} failed: "
                                        f"{exc}") from exc
            if replaced is None:
                return False
            self.segments = replaced
            due = self.clock() + self.config.file_delete_delay_ms
            self._pending_deletes += [(due, segment) for segment in old]
            return True

    def delete_pending_files(self, now_ms: int) -> None:
        """Unlink ``.deleted`` segments whose ``file.delete.delay.ms`` has passed."""
        if self.cleaner_reading and now_ms < 2**63 - 1:
            return
        with self._lock:
            due = [item for item in self._pending_deletes if item[0] <= now_ms]
            self._pending_deletes = [item for item in self._pending_deletes if item[0] > now_ms]
        for _, segment in due:
            segment.delete_files()

    # --- truncation (followers) -------------------------------------------------------

    def truncate_to(self, offset: int) -> LogTruncation | None:
        """Drop every record at or above ``offset`` (Kafka's ``UnifiedLog.truncateTo``);
        None if ``offset`` is at or past the log end offset.

        Whole batches only: an offset inside a batch truncates to the batch's base. At or
        below the first segment's base this is ``truncate_fully_and_start_at``, as in
        Kafka. Indexes, leader epochs, producer state, the recovery point and the high
        watermark follow the new end; crash-safe as ``truncation`` describes. Readers
        that already hold a region of a dropped batch may see it cut short.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset {offset}")
        with self._lock:
            self._check_writable()
            if offset >= self._log_end_offset:
                return None
            target = batch_boundary(self.segments, offset)
            if target <= self.segments.first.base_offset:
                return self.truncate_fully_and_start_at(target)
            previous_end = self._log_end_offset
            try:
                write_marker(self.fs, self.directory, TruncationKind.TO, target)
                self._move_end(target, min(self._log_start_offset, target))
                kept, doomed, dropped = truncate_segments(self.fs, self.directory,
                                                          self.segments, target)
                self.segments = kept
                self._delete_later(doomed)
                # A compacted segment may end below the target (a gap): the log ends there,
                # as a reload would find it.
                end = min(target, kept.active.next_offset)
                self._move_end(end, self._log_start_offset)
                self.leader_epoch_cache.truncate_from_end(end)
                self.producer_state.truncate_and_reload(kept, self._log_start_offset, end,
                                                        self.clock())
                self.producer_state.on_high_watermark_updated(self._high_watermark)
                self._has_aborted_txns = sync_rebuilt_indexes(kept)
                remove_marker(self.fs, self.directory)
            except OSError as exc:
                self.offline = True  # half done: only recovery (it finishes the job) may go on
                raise KafkaStorageError(f"truncating {self} failed: {exc}") from exc
            return self._truncated(LogTruncation(previous_end, end, dropped, len(doomed)))

    def truncate_fully_and_start_at(self, offset: int) -> LogTruncation:
        """Delete every segment and start an empty log at ``offset`` (Kafka's
        ``truncateFullyAndStartAt``): log start = LEO = HW = recovery point = ``offset``;
        no producer state, no leader epoch. Crash-safe as ``truncation`` describes."""
        if offset < 0:
            raise ValueError(f"cannot start a log at a negative offset {offset}")
        with self._lock:
            self._check_writable()
            previous_end, doomed = self._log_end_offset, tuple(self.segments)
            dropped = self.size_in_bytes
            try:
                write_marker(self.fs, self.directory, TruncationKind.START_AT, offset)
                early_end = min(offset, self._log_end_offset)
                self._move_end(early_end, min(early_end, self._log_start_offset))
                delete_highest_first(self.fs, self.directory, doomed)
                self.producer_state.truncate_fully()
                self.leader_epoch_cache.clear()
                segment = self._new_segment(offset, self.clock())
                self.fs.fsync_dir(self.directory)
                remove_marker(self.fs, self.directory)
            except OSError as exc:
                self.offline = True
                raise KafkaStorageError(f"truncating {self} fully failed: {exc}") from exc
            self.segments = LogSegments([segment])
            self._delete_later(doomed)
            self._move_end(offset, offset)
            self._recovery_point = offset
            return self._truncated(LogTruncation(previous_end, offset, dropped, len(doomed)))

    def _check_writable(self) -> None:
        if self.offline or self.closed:
            raise KafkaStorageError(f"{self} is offline or closed")

    def _move_end(self, log_end_offset: int, log_start_offset: int) -> None:
        """The end first, then what must stay below it (readers take no lock)."""
        self._log_end_offset = log_end_offset
        self._log_start_offset = log_start_offset
        self._high_watermark = log_end_offset if self.hw_follows_leo \
            else max(log_start_offset, min(self._high_watermark, log_end_offset))
        self._recovery_point = min(self._recovery_point, log_end_offset)

    def _delete_later(self, segments: tuple[LogSegment, ...]) -> None:
        due = self.clock() + self.config.file_delete_delay_ms
        self._pending_deletes += [(due, segment) for segment in segments]

    def _truncated(self, truncation: LogTruncation) -> LogTruncation:
        self._truncations += 1
        logger.info("Truncating %s-%d to offset %d: %s", self.topic, self.partition,
                    truncation.log_end_offset, truncation.describe())
        return truncation

    # --- shutdown ---------------------------------------------------------------------

    def close(self) -> bool:
        """Flush, trim the active indexes, close files; True if the shutdown was clean."""
        with self._lock:
            if self.closed:
                return not self.offline
            clean = not self.offline
            try:
                if clean:
                    self.flush()
                    self.segments.active.on_roll()
                    self.producer_state.take_snapshot(self._log_end_offset)
            except (OSError, KafkaStorageError) as exc:
                logger.error("closing %s uncleanly: %s", self, exc)
                clean = False
            clean = clean and not any(segment.dirty for segment in self.segments)
            for segment in self.segments:
                segment.close()
            self.delete_pending_files(2**63 - 1)
            self.closed = True
            return clean
