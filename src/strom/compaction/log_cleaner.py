"""LogCleaner: the background threads that compact logs (Kafka's LogCleaner + LogCleanerManager).

On disk: ``<data-dir>/cleaner-offset-checkpoint``, Kafka's offset checkpoint format
(``strom.storage.checkpoint``): per partition, the first dirty offset, i.e. where
the last compaction's offset map ended. Replaced atomically after every compaction;
a missing or unreadable file means every log is dirty from its log start offset
(compaction is idempotent, so that only costs time).

Scheduling: each of ``log.cleaner.threads`` threads picks the compacted log
(``cleanup.policy`` has ``compact``) with the highest dirty ratio — dirty bytes over
clean plus dirty bytes — above its ``min.cleanable.dirty.ratio`` (strictly, as Kafka; or whose
oldest dirty record is older than ``max.compaction.lag.ms``), and not being cleaned
by another thread; with none, it sleeps ``log.cleaner.backoff.ms``. Each thread has
its own ``OffsetMap`` of ``log.cleaner.dedupe.buffer.size / threads`` bytes, allocated
when it first cleans. Reads and writes go through one shared ``Throttler``
(``log.cleaner.io.max.bytes.per.second``).

Produce and fetch are never blocked: the cleaner reads only non-active segments
(readers take no lock) and takes the log's writer lock only for the swap, a few
renames (``Log.replace_segments``). It does share the GIL: the numpy and hashing
work releases it in C for most of the pass, the per-batch Python code does not.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from strom.protocol.errors import ProtocolError
from strom.protocol.topic_partition import TopicPartition
from strom.storage.checkpoint import (
    CorruptCheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from strom.storage.errors import StorageError
from strom.storage.log import Log
from strom.storage.log_manager import LogManager

# The cleaner and its offset map are numpy through and through (~0.1 s to import, some
# MB resident): they are imported when a compacted log is first looked at, so a broker
# without one starts and runs without numpy (benchmarks/startup.py).
if TYPE_CHECKING:
    from strom.compaction.cleaner import CleanableRange, Cleaner

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
UNLIMITED: Final = 1.7976931348623157e308  # Kafka's default: Double.MAX_VALUE


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` properties, Kafka's defaults."""

    enable: bool = True  # log.cleaner.enable
    threads: int = 1  # log.cleaner.threads
    dedupe_buffer_size: int = 128 << 20  # log.cleaner.dedupe.buffer.size
    io_buffer_load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor (offset_map.DEFAULT_LOAD_FACTOR)
    io_max_bytes_per_second: float = UNLIMITED  # log.cleaner.io.max.bytes.per.second
    backoff_ms: int = 15000  # log.cleaner.backoff.ms

    def __post_init__(self) -> None:
        if self.threads < 1 or self.dedupe_buffer_size // self.threads < 1 << 10:
            raise ValueError("log.cleaner.threads must be >= 1 with >= 1 KiB of "
                             "log.cleaner.dedupe.buffer.size each")
        if self.io_max_bytes_per_second <= 0 or self.backoff_ms < 0:
            raise ValueError("log.cleaner.io.max.bytes.per.second must be > 0, "
                             "log.cleaner.backoff.ms >= 0")


class Throttler:
    """Kafka's Throttler: sleeps when bytes over the last ~300 ms exceed the rate."""

    def __init__(self, bytes_per_second: float, *, period_s: float = 0.3,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = bytes_per_second
        self.period_s = period_s
        self.clock, self.sleep = clock, sleep
        self._lock = threading.Lock()
        self._start = clock()
        self._observed = 0.0

    def __call__(self, count: int) -> None:
        if self.rate >= UNLIMITED:
            return
        with self._lock:
            self._observed += count
            now = self.clock()
            elapsed = now - self._start
            if elapsed < self.period_s:
                return
            pause = self._observed / self.rate - elapsed
            self._start, self._observed = now + max(pause, 0.0), 0.0
        if pause > 0:
            self.sleep(pause)


class LogCleaner:
    def __init__(self, log_manager: LogManager, config: CleanerConfig | None = None) -> None:
        self.log_manager = log_manager
        self.config = config or CleanerConfig()
        self.throttler = Throttler(self.config.io_max_bytes_per_second)
        self.checkpoints: dict[TopicPartition, int] = {}
        self._in_progress: set[TopicPartition] = set()
        self._aborting: set[TopicPartition] = set()
        self._state = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._checkpoint_lock = threading.Lock()
        # For /metrics (issue 21): the highest dirty ratio seen at the last look for a log to
        # compact (Kafka's max-dirty-percent) and when that look was (ms), None before the first.
        self.max_dirty_ratio = 0.0
        self.last_run_ms: int | None = None
        log_manager.before_delete.append(self.abort_cleaning)

    @property
    def _checkpoint_path(self) -> str:
        return os.path.join(self.log_manager.data_dir, CLEANER_OFFSET_CHECKPOINT)

    # --- lifecycle --------------------------------------------------------------------

    def startup(self) -> None:
        """Read the checkpoint (after the log manager has loaded the logs)."""
        try:
            self.checkpoints = read_offset_checkpoint(self.log_manager.fs, self._checkpoint_path)
        except CorruptCheckpointError as exc:
            logger.warning("%s; every compacted log is dirty from its start", exc)
            self.checkpoints = {}

    def start(self) -> None:
        if not self.config.enable or self._threads:
            return
        self._stop.clear()
        for number in range(self.config.threads):
            thread = threading.Thread(target=self._run, name=f"log-cleaner-{number}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def shutdown(self) -> None:
        """Stop the threads (a compaction in progress is abandoned, nothing swapped)."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []

    def reconfigure(self, config: CleanerConfig) -> None:
        """New ``log.cleaner.*`` settings at run time (dynamic broker configs), as Kafka's
        LogCleaner.reconfigure: stop the threads, take the config, start them again if
        they were running. A compaction in progress is abandoned and redone later."""
        running = bool(self._threads)
        self.shutdown()
        self.config = config
        self.throttler = Throttler(config.io_max_bytes_per_second)
        if running:
            self.start()

    def abort_cleaning(self, topic: str, partition: int) -> None:
        """Before a log is deleted: stop its compaction, wait until the thread left it."""
        key = (topic, partition)
        with self._state:
            self._aborting.add(key)
            while key in self._in_progress:
                self._state.wait(0.1)
            self._aborting.discard(key)
            self.checkpoints.pop(key, None)

    # --- the threads ------------------------------------------------------------------

    def _run(self) -> None:
        cleaner: Cleaner | None = None
        while not self._stop.is_set():
            if cleaner is None and self._any_compacted_log():
                cleaner = self._new_cleaner()  # its offset map: allocated when first needed
            try:
                cleaned = cleaner is not None and self.clean_filthiest(cleaner)
            except Exception:  # a bug must not kill the thread silently forever
                logger.exception("log cleaner thread failed; backing off")
                cleaned = False
            if not cleaned:
                self._stop.wait(self.config.backoff_ms / 1000)

    def _any_compacted_log(self) -> bool:
        return any(log.config.compacts for log in list(self.log_manager.logs.values()))

    def _new_cleaner(self) -> Cleaner:
        from strom.compaction.cleaner import Cleaner  # numpy: see the imports above
        from strom.compaction.offset_map import OffsetMap

        memory = self.config.dedupe_buffer_size // self.config.threads
        return Cleaner(OffsetMap(memory, self.config.io_buffer_load_factor),
                       throttle=self.throttler, should_stop=self._should_stop)

    def _should_stop(self, log: Log) -> bool:
        return self._stop.is_set() or (log.topic, log.partition) in self._aborting \
            or log.closed

    def clean_filthiest(self, cleaner: Cleaner) -> bool:
        """Compact the dirtiest log that needs it; False if none did."""
        with self._state:
            chosen = self._filthiest()
            if chosen is None:
                return False
            key, log, _ = chosen
            self._in_progress.add(key)
        try:
            return self._clean(cleaner, key, log)
        finally:
            with self._state:
                self._in_progress.discard(key)
                self._state.notify_all()

    def _filthiest(self) -> tuple[TopicPartition, Log, CleanableRange] | None:
        from strom.compaction.cleaner import cleanable_range  # numpy: see the imports above

        now = self.log_manager.clock()
        best: tuple[TopicPartition, Log, CleanableRange] | None = None
        self.last_run_ms, highest = now, 0.0
        for key, log in list(self.log_manager.logs.items()):
            if not log.config.compacts or key in self._in_progress or key in self._aborting \
                    or log.closed or log.offline:
                continue
            cleanable = cleanable_range(log, self.checkpoints.get(key), now)
            highest = max(highest, cleanable.dirty_ratio)
            if cleanable.dirty_bytes == 0:
                continue
            if cleanable.dirty_ratio <= log.config.min_cleanable_dirty_ratio \
                    and not _past_max_lag(log, cleanable, now):
                continue
            if best is None or cleanable.dirty_ratio > best[2].dirty_ratio:
                best = (key, log, cleanable)
        self.max_dirty_ratio = highest
        return best

    def _clean(self, cleaner: Cleaner, key: TopicPartition, log: Log) -> bool:
        from strom.compaction.cleaner import CleanerAborted  # numpy: see the imports above

        try:
            end, stats = cleaner.clean(log, self.checkpoints.get(key))
        except CleanerAborted as exc:
            logger.info("%s", exc)
            return False
        except (OSError, StorageError, ProtocolError) as exc:
            logger.error("compaction of %s failed: %s", log, exc)
            return False
        self.update_checkpoint(key, end)
        seconds = stats.map_seconds + stats.copy_seconds
        logger.info(
            "compacted %s up to offset %d: %d segment(s) rewritten, %d unchanged, %d skipped; "
            "%d keys from %.1f MB indexed; %.1f MB of log processed, %.1f MB written, %d of %d "
            "records kept; %.2f s (%.1f MB/s)", log, end, stats.segments_cleaned,
            stats.segments_unchanged, stats.segments_skipped, stats.keys_mapped,
            stats.map_bytes_read / 1e6, stats.bytes_read / 1e6, stats.bytes_written / 1e6,
            stats.records_kept, stats.records_read, seconds,
            stats.bytes_read / 1e6 / seconds if seconds else 0.0)
        return True

    def update_checkpoint(self, key: TopicPartition, first_dirty_offset: int) -> None:
        with self._checkpoint_lock:
            self.checkpoints[key] = first_dirty_offset
            live = {k: v for k, v in self.checkpoints.items() if k in self.log_manager.logs}
            try:
                write_offset_checkpoint(self.log_manager.fs, self._checkpoint_path, live)
            except OSError as exc:  # the next compaction redoes some work, nothing is lost
                logger.warning("cannot write %s: %s", self._checkpoint_path, exc)


def _past_max_lag(log: Log, cleanable: CleanableRange, now: int) -> bool:
    """``max.compaction.lag.ms``: the first dirty segment's newest record is too old."""
    lag = log.config.max_compaction_lag_ms
    if lag >= 2**63 - 1:
        return False
    first = log.segments.floor(cleanable.first_dirty_offset)
    return 0 <= first.max_timestamp < now - lag
