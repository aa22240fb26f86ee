"""LogManager: every partition log in one data directory — discovery, creation, checkpoints.

Data directory layout (Kafka's, plus ``topic-configs/``)::

    <data-dir>/
      .lock                              flock'ed while a process has the dir open
      .kafka_cleanshutdown               present only between a clean close and the next open
      recovery-point-offset-checkpoint   topic partition offset (see ``checkpoint``)
      log-start-offset-checkpoint
      replication-offset-checkpoint      high watermarks
      topic-configs/<topic>.properties   a topic's overrides (see ``config``)
      <topic>-<partition>/               one per partition (see ``log``, ``segment``)
      <topic>-<partition>.<hex>-delete/  a deleted partition, removed in the background

Invariants: at most one process has the directory open (the lock); the clean-shutdown
marker is removed as soon as the logs are loaded, so any crash after that is seen
as unclean by the next open; checkpoints are only ever replaced atomically and only
hold offsets that are at or below what the logs have made durable.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Final

from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition
from strom.storage.checkpoint import (
    CorruptCheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from strom.storage.config import LogConfig, format_properties, parse_properties
from strom.storage.errors import LogDirLockedError, StorageError
from strom.storage.fs import FileSystem, read_file, remove_files, write_file_atomically
from strom.storage.log import Log
from strom.storage.log_loader import LogLoader
from strom.storage.producer_state import ProducerStateManagerConfig
from strom.storage.truncation import LogTruncation

logger = logging.getLogger(__name__)

LOCK_FILE: Final = ".lock"
CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT: Final = "replication-offset-checkpoint"
TOPIC_CONFIGS: Final = "topic-configs"
BROKER_CONFIGS_DIR: Final = "broker-configs"  # the broker's dynamic configs (strom.broker.dynamic_config)
CLIENT_QUOTAS_FILE: Final = "client-quotas"  # the client quotas (strom.broker.quota.store)
# Kept in the data dir but no log data: a dir holding only these has never held a log.
_NOT_LOG_DATA: Final = frozenset({LOCK_FILE, TOPIC_CONFIGS, BROKER_CONFIGS_DIR, CLIENT_QUOTAS_FILE})
DELETE_SUFFIX: Final = "-delete"
_PARTITION_DIR: Final = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")
_LEGAL_TOPIC: Final = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogManager:
    """Owns the logs of one data directory; the broker schedules its periodic methods."""

    def __init__(self, data_dir: str, default_config: LogConfig | None = None, *,
                 fs: FileSystem | None = None, clock: Callable[[], int] = wall_clock_ms,
                 hw_follows_leo: bool = True,
                 producer_state_config: ProducerStateManagerConfig | None = None) -> None:
        self.data_dir = data_dir
        self.default_config = default_config or LogConfig()
        self.fs = fs or FileSystem()
        self.clock = clock
        self.hw_follows_leo = hw_follows_leo
        self.producer_state_config = producer_state_config or ProducerStateManagerConfig()
        self.logs: dict[TopicPartition, Log] = {}
        self.topic_overrides: dict[str, dict[str, str]] = {}
        self._lock = threading.RLock()
        self._lock_fd: int | None = None
        # Called with (topic, partition) before a log is closed and deleted: the
        # compaction cleaner stops reading it (strom.compaction.log_cleaner).
        self.before_delete: list[Callable[[str, int], None]] = []

    # --- startup and shutdown ---------------------------------------------------------

    def startup(self) -> None:
        """Lock the dir, read checkpoints and topic configs, load (and recover) every log."""
        self.fs.makedirs(self.data_dir)
        try:
            self._lock_fd = self.fs.lock(self._path(LOCK_FILE))
        except OSError as exc:
            raise LogDirLockedError(f"data dir {self.data_dir} is in use: {exc}") from exc
        new = self._is_new()
        clean = self.fs.exists(self._path(CLEAN_SHUTDOWN_FILE))
        recovery_points = self._checkpoint(RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._checkpoint(LOG_START_OFFSET_CHECKPOINT)
        self._load_topic_configs()
        for name in sorted(self.fs.listdir(self.data_dir)):
            path = self._path(name)
            if name.endswith(DELETE_SUFFIX) and self.fs.is_dir(path):
                self._remove_tree(path)
                continue
            match = _PARTITION_DIR.match(name)
            if match is None or not self.fs.is_dir(path):
                continue
            key = (match["topic"], int(match["partition"]))
            self.logs[key] = self._loader(key, clean, recovery_points.get(key, 0),
                                          start_offsets.get(key, 0)).load()
        remove_files(self.fs, [self._path(CLEAN_SHUTDOWN_FILE)])
        self.fs.fsync_dir(self.data_dir)
        if new:
            logger.info("loaded 0 logs from %s (a new data directory)", self.data_dir)
        else:
            logger.info("loaded %d logs from %s (%s shutdown)", len(self.logs), self.data_dir,
                        "clean" if clean else "unclean")

    def _is_new(self) -> bool:
        """No log, checkpoint or marker yet: nothing ever ran here, so no shutdown at all
        (Kafka calls every dir without a marker unclean; that misleads on a first start).
        Topic and dynamic broker configs may be there already: they are no log data."""
        return all(name in _NOT_LOG_DATA for name in self.fs.listdir(self.data_dir))

    def _loader(self, key: TopicPartition, clean: bool, recovery_point: int,
                log_start_offset: int) -> LogLoader:
        topic, partition = key
        return LogLoader(self.fs, self._path(f"{topic}-{partition}"), topic, partition,
                         self.topic_config(topic), clean_shutdown=clean,
                         recovery_point=recovery_point, log_start_offset=log_start_offset,
                         clock=self.clock, hw_follows_leo=self.hw_follows_leo,
                         producer_state_config=self.producer_state_config)

    def _checkpoint(self, name: str) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(self.fs, self._path(name))
        except CorruptCheckpointError as exc:
            logger.warning("%s; every log recovers from its start", exc)
            return {}

    def close(self) -> None:
        """Flush and close every log; mark the shutdown clean if every log closed cleanly."""
        with self._lock:
            clean = all([log.close() for log in self.logs.values()])
            try:
                self.checkpoint()
                if clean:
                    write_file_atomically(self.fs, self._path(CLEAN_SHUTDOWN_FILE), b"")
            finally:
                if self._lock_fd is not None:
                    self.fs.unlock(self._lock_fd)
                    self._lock_fd = None

    # --- logs -------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def create_log(self, topic: str, partition: int) -> Log:
        """The partition's log, created empty if missing (idempotent)."""
        with self._lock:
            key = (topic, partition)
            if key in self.logs:
                return self.logs[key]
            if not _LEGAL_TOPIC.match(topic) or topic in (".", "..") or partition < 0:
                raise StorageError(f"illegal topic partition {topic}-{partition}",
                                   ErrorCode.INVALID_TOPIC_EXCEPTION)
            log = self._loader(key, True, 0, 0).load()
            self.fs.fsync_dir(self.data_dir)
            self.logs[key] = log
            return log

    def delete_log(self, topic: str, partition: int) -> None:
        """Close the log and move its directory aside; its files go at once, the dir after."""
        with self._lock:
            if (topic, partition) not in self.logs:
                return
            for hook in self.before_delete:
                hook(topic, partition)
            log = self.logs.pop((topic, partition))
            log.close()
            doomed = self._path(f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
            self.fs.rename(log.directory, doomed)
            self.fs.fsync_dir(self.data_dir)
            self._remove_tree(doomed)

    def _remove_tree(self, path: str) -> None:
        remove_files(self.fs, [os.path.join(path, name) for name in self.fs.listdir(path)])
        self.fs.rmdir(path)

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """DeleteRecords; the new log start offset is checkpointed before returning."""
        log = self._log_or_error(topic, partition)
        low_watermark = log.delete_records(log.high_watermark if offset == -1 else offset)
        self.checkpoint_log_start_offsets()
        return low_watermark

    def truncate_to(self, topic: str, partition: int, offset: int) -> LogTruncation | None:
        """A follower's truncation (``Log.truncate_to``); the recovery point, high
        watermark and log start offset are checkpointed before returning, as Kafka's
        ``LogManager.truncateTo`` does."""
        truncation = self._log_or_error(topic, partition).truncate_to(offset)
        if truncation is not None:
            self.checkpoint()
        return truncation

    def truncate_fully_and_start_at(self, topic: str, partition: int,
                                    offset: int) -> LogTruncation:
        """``Log.truncate_fully_and_start_at``, checkpointed before returning."""
        truncation = self._log_or_error(topic, partition).truncate_fully_and_start_at(offset)
        self.checkpoint()
        return truncation

    def _log_or_error(self, topic: str, partition: int) -> Log:
        log = self.logs.get((topic, partition))
        if log is None:
            raise StorageError(f"no log for {topic}-{partition}",
                               ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return log

    # --- topic configs ----------------------------------------------------------------

    def topic_config(self, topic: str) -> LogConfig:
        return self.default_config.with_overrides(self.topic_overrides.get(topic, {}))

    def set_topic_config(self, topic: str, overrides: Mapping[str, str]) -> LogConfig:
        """Replace a topic's overrides (validated first), persist them, apply to its logs."""
        with self._lock:
            config = self.default_config.with_overrides(overrides)
            directory = self._path(TOPIC_CONFIGS)
            self.fs.makedirs(directory)
            write_file_atomically(self.fs, os.path.join(directory, f"{topic}.properties"),
                                  format_properties(overrides).encode("utf-8"))
            self.topic_overrides[topic] = dict(overrides)
            for (log_topic, _), log in self.logs.items():
                if log_topic == topic:
                    log.config = config
            return config

    def _load_topic_configs(self) -> None:
        directory = self._path(TOPIC_CONFIGS)
        if not self.fs.is_dir(directory):
            return
        for name in self.fs.listdir(directory):
            if name.endswith(".properties"):
                text = read_file(self.fs, os.path.join(directory, name)).decode("utf-8")
                overrides = parse_properties(text)
                self.default_config.with_overrides(overrides)  # validates
                self.topic_overrides[name[: -len(".properties")]] = overrides

    # --- periodic work ----------------------------------------------------------------

    def run_retention(self, now_ms: int | None = None) -> int:
        """Delete expired/oversized/DeleteRecords'd segments; returns segments deleted."""
        now = self.clock() if now_ms is None else now_ms
        deleted = 0
        for log in list(self.logs.values()):
            deleted += log.delete_old_segments(now)
            log.delete_pending_files(now)
        if deleted:
            self.checkpoint_log_start_offsets()
        return deleted

    def flush_due_logs(self, now_ms: int | None = None) -> None:
        """The ``flush.ms`` scheduler tick."""
        now = self.clock() if now_ms is None else now_ms
        for log in list(self.logs.values()):
            log.flush_if_due(now)

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """The ``producer.id.expiration.check.interval.ms`` tick (Kafka: every 10 minutes)."""
        now = self.clock() if now_ms is None else now_ms
        return sum(log.remove_expired_producers(now) for log in list(self.logs.values()))

    def checkpoint(self) -> None:
        """Write recovery points, log start offsets and high watermarks (Kafka: every 60 s)."""
        with self._lock:
            logs = dict(self.logs)
            write_offset_checkpoint(self.fs, self._path(RECOVERY_POINT_CHECKPOINT),
                                    {key: log.recovery_point for key, log in logs.items()})
            write_offset_checkpoint(self.fs, self._path(REPLICATION_OFFSET_CHECKPOINT),
                                    {key: log.high_watermark for key, log in logs.items()})
            self.checkpoint_log_start_offsets()

    def checkpoint_log_start_offsets(self) -> None:
        with self._lock:
            write_offset_checkpoint(self.fs, self._path(LOG_START_OFFSET_CHECKPOINT),
                                    {key: log.log_start_offset
                                     for key, log in self.logs.items()})

    def _path(self, name: str) -> str:
        return os.path.join(self.data_dir, name)
