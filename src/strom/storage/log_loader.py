"""LogLoader: open one partition directory; after an unclean shutdown, recover it.

What a partition directory may hold when it is opened (see ``segment`` for names):
``*.log`` with their ``*.index``/``*.timeindex``, ``leader-epoch-checkpoint``, and
leftovers of an interrupted operation: ``*.deleted`` files (a delete that had not
finished), ``*.tmp`` (a checkpoint being replaced), index files whose ``.log`` is
gone. Leftovers are removed first. An interrupted compaction swap (``.cleaned``,
``.swap`` files) is rolled back or completed before that (see ``segment_swap``).

Recovery (the last shutdown was unclean, i.e. the data dir had no clean-shutdown
marker): segments wholly below the recovery point were fdatasync'ed, so only their
indexes are sanity-checked (rebuilt if insane). Every segment from the one holding
the recovery point to the end is re-read batch by batch — length, magic, CRC,
offset continuity — with both indexes rebuilt; the first bad batch and everything
after it (rest of that segment, all later segments) is removed, and exactly what was
removed is logged (partition, offsets, bytes). Recovered segments before the active
one are fdatasync'ed; the active one is not (Kafka's ``LogLoader`` syncs nothing and
keeps the checkpointed recovery point): the recovery point becomes the old one, at
least the active segment's base, at most the log end offset, and the next flush or the
clean close syncs the rest, as for any append. A broker killed with hundreds of
partitions restarts without an ``fdatasync`` and a directory ``fsync`` for each: a second
crash first only re-validates that tail again. The directory is fsync'ed only when
recovery cut or deleted something.

Producer state (``producer_state``) is loaded last, from the recovered log: the newest
``.snapshot`` at or below the log end offset plus the batch headers after it. That
replay also rebuilds the ``.txnindex`` files from the snapshot's offset on (a recovered
segment first drops the entries of markers it lost; see ``transaction_index``).

A ``truncation-in-progress`` marker (see ``truncation``) means a follower's truncation
was interrupted: ``start-at X`` discards every segment, snapshot and epoch before
loading and starts the log empty at X; ``to X`` truncates the loaded log to X again.

After a clean shutdown nothing is re-validated; a missing or insane index still
triggers the rebuild of its segment.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from strom.protocol.records import BatchHeader
from strom.storage.checkpoint import CorruptCheckpointError
from strom.storage.config import LogConfig
from strom.storage.fs import FileSystem, remove_files
from strom.storage.index_file import CorruptIndexError
from strom.storage.leader_epoch import LeaderEpochFileCache
from strom.storage.log import Log
from strom.storage.log_segments import LogSegments
from strom.storage.producer_state import (
    SNAPSHOT_SUFFIX,
    ProducerStateManager,
    ProducerStateManagerConfig,
)
from strom.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_SEGMENT_POSITION,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from strom.storage.segment_swap import CLEANED_SUFFIX, SWAP_SUFFIX, complete_interrupted_swaps
from strom.storage.transaction_index import TXN_INDEX_SUFFIX, sync_rebuilt_indexes
from strom.storage.truncation import (
    PendingTruncation,
    TruncationKind,
    read_marker,
    remove_marker,
)

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class LogLoader:
    def __init__(
        self, fs: FileSystem, directory: str, topic: str, partition: int, config: LogConfig,
        *, clean_shutdown: bool, recovery_point: int, log_start_offset: int,
        clock: Callable[[], int], hw_follows_leo: bool = True,
        producer_state_config: ProducerStateManagerConfig | None = None,
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.clean_shutdown = clean_shutdown
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.clock = clock
        self.hw_follows_leo = hw_follows_leo
        self.producer_state_config = producer_state_config

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def load(self) -> Log:
        self.fs.makedirs(self.directory)
        pending = self._pending_truncation()
        if pending is not None and pending.kind is TruncationKind.START_AT:
            self._discard_everything(pending.offset)
        base_offsets = self._clean_directory()
        epochs = self._leader_epoch_cache()
        segments = [self._segment(base) for base in base_offsets]
        if segments:
            segments = self._load_segments(segments, epochs)
        else:
            segments = [self._empty_segment(max(self.log_start_offset, 0))]
        log_end_offset = segments[-1].next_offset
        if self.log_start_offset > log_end_offset:
            segments = self._start_over(segments)
            log_end_offset = segments[-1].next_offset
        recovery_point = log_end_offset if self.clean_shutdown or not segments[-1].unsynced \
            else max(min(self.recovery_point, log_end_offset), segments[-1].base_offset)
        epochs.truncate_from_end(log_end_offset)
        epochs.truncate_from_start(max(self.log_start_offset, segments[0].base_offset))
        producer_state = ProducerStateManager(self.fs, self.directory,
                                              self.producer_state_config)
        loaded = LogSegments(segments)
        # Before the Log: the replay rebuilds transaction indexes the Log then looks at.
        producer_state.load(loaded, max(self.log_start_offset, segments[0].base_offset),
                            log_end_offset, self.clock())
        sync_rebuilt_indexes(loaded)
        log = Log(fs=self.fs, directory=self.directory, topic=self.topic,
                  partition=self.partition, config=self.config,
                  segments=loaded, log_start_offset=self.log_start_offset,
                  recovery_point=recovery_point, leader_epoch_cache=epochs,
                  clock=self.clock, hw_follows_leo=self.hw_follows_leo,
                  producer_state=producer_state)
        if pending is not None:
            self._finish_truncation(log, pending)
        return log

    def _pending_truncation(self) -> PendingTruncation | None:
        try:
            return read_marker(self.fs, self.directory)
        except (ValueError, UnicodeDecodeError) as exc:
            logger.warning("%s: ignoring an unreadable truncation marker: %s", self.name, exc)
            remove_marker(self.fs, self.directory)
            return None

    def _discard_everything(self, offset: int) -> None:
        """An interrupted ``truncate_fully_and_start_at``: nothing of the old log stays."""
        names = self.fs.listdir(self.directory)
        doomed = [name for name in names if name == LEADER_EPOCH_CHECKPOINT
                  or name.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX,
                                    TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX, DELETED_SUFFIX,
                                    CLEANED_SUFFIX, SWAP_SUFFIX))]
        remove_files(self.fs, [os.path.join(self.directory, name) for name in doomed])
        self.fs.fsync_dir(self.directory)
        self.log_start_offset = self.recovery_point = offset

    def _finish_truncation(self, log: Log, pending: PendingTruncation) -> None:
        logger.warning("%s: finishing a truncation (%s %d) that a crash interrupted",
                       self.name, pending.kind.value, pending.offset)
        if pending.kind is TruncationKind.TO:
            log.truncate_to(pending.offset)
        remove_marker(self.fs, self.directory)

    def _clean_directory(self) -> list[int]:
        for action in complete_interrupted_swaps(self.fs, self.directory):
            logger.warning("%s: %s", self.name, action)
        names = self.fs.listdir(self.directory)
        leftovers = [n for n in names if n.endswith((DELETED_SUFFIX, ".tmp"))]
        bases = {n[: -len(LOG_SUFFIX)] for n in names if n.endswith(LOG_SUFFIX)}
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            leftovers += [n for n in names if n.endswith(suffix)
                          and n[: -len(suffix)] not in bases]
        remove_files(self.fs, [os.path.join(self.directory, n) for n in leftovers])
        return sorted(int(base) for base in bases if base.isdigit())

    def _leader_epoch_cache(self) -> LeaderEpochFileCache:
        path = os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT)
        try:
            return LeaderEpochFileCache(self.fs, path)
        except CorruptCheckpointError as exc:
            logger.warning("%s: %s; leader epochs rebuilt from recovered batches", self.name, exc)
            remove_files(self.fs, [path])
            return LeaderEpochFileCache(self.fs, path)

    def _segment(self, base_offset: int) -> LogSegment:
        created = self.clock()
        return LogSegment(self.fs, self.directory, base_offset,
                          segment_index_bytes=self.config.segment_index_bytes,
                          index_interval_bytes=self.config.index_interval_bytes,
                          created_ms=created)

    def _load_segments(self, segments: list[LogSegment],
                       epochs: LeaderEpochFileCache) -> list[LogSegment]:
        first_unflushed = len(segments) if self.clean_shutdown else \
            LogSegments(segments).floor_index(self.recovery_point)
        loaded: list[LogSegment] = []
        recovered: list[LogSegment] = []
        cut = False
        for number, segment in enumerate(segments):
            if number < first_unflushed and self._try_load(segment):
                loaded.append(segment)
                continue
            truncated = self._recover(segment, epochs)
            recovered.append(segment)
            loaded.append(segment)
            cut = cut or truncated > 0
            if truncated and number + 1 < len(segments):
                self._drop_after_truncation(segments[number + 1 :])
                break
        self._finish(loaded, recovered, cut)
        return loaded

    def _try_load(self, segment: LogSegment) -> bool:
        try:
            segment.load()
            return True
        except CorruptIndexError as exc:
            logger.warning("%s: %s; rebuilding the indexes of %s", self.name, exc,
                           segment.log_path)
            return False

    def _recover(self, segment: LogSegment, epochs: LeaderEpochFileCache) -> int:
        def on_batch(header: BatchHeader) -> None:
            if header.magic == 2:
                epochs.assign(header.partition_leader_epoch, header.base_offset)

        truncated = segment.recover(on_batch)
        if truncated:
            logger.warning(
                "%s: recovery truncated the log at offset %d: bytes [%d, %d) of %s were "
                "torn or corrupt; every offset from %d on is gone", self.name,
                segment.next_offset, segment.size, segment.size + truncated, segment.log_path,
                segment.next_offset)
        return truncated

    def _drop_after_truncation(self, later: list[LogSegment]) -> None:
        for segment in later:
            segment.size = self.fs.file_size(segment.fd)
            logger.warning("%s: recovery deleted segment %s (offsets from %d, %d bytes) after "
                           "the truncation", self.name, segment.log_path, segment.base_offset,
                           segment.size)
            segment.rename_to_deleted()
            segment.delete_files()

    def _finish(self, loaded: list[LogSegment], recovered: list[LogSegment], cut: bool) -> None:
        """Rebuilt indexes written; recovered segments synced but the active one (the
        module docstring); the directory synced if a file was cut or deleted."""
        for segment in recovered:
            segment.persist_rebuilt_indexes()
            if segment is not loaded[-1]:
                segment.flush()
        if cut:
            self.fs.fsync_dir(self.directory)
        loaded[-1].make_active()

    def _start_over(self, segments: list[LogSegment]) -> list[LogSegment]:
        logger.warning("%s: log start offset %d is beyond the recovered log end offset %d; "
                       "starting an empty log there", self.name, self.log_start_offset,
                       segments[-1].next_offset)
        for segment in segments:
            segment.rename_to_deleted()
            segment.delete_files()
        return [self._empty_segment(self.log_start_offset)]

    def _empty_segment(self, base_offset: int) -> LogSegment:
        segment = self._segment(base_offset)
        segment.make_empty()
        if self.config.preallocate:
            segment.preallocate(min(self.config.segment_bytes, MAX_SEGMENT_POSITION))
        segment.make_active()
        return segment
