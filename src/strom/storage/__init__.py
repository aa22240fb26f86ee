"""Strom's storage engine: partition logs on local disk, knowing nothing of the network.

Modules, bottom up: ``fs`` (the filesystem seam), ``index_file``/``offset_index``/
``time_index`` (sparse indexes), ``segment`` (``LogSegment``), ``log_segments``
(copy-on-write segment list), ``leader_epoch`` and ``checkpoint`` (small text files),
``producer_state`` (``ProducerStateManager``: idempotence, transactions, snapshots),
``log_validator`` (an append's checks and offsets, pure bytes), ``retention``,
``truncation`` (followers' truncation steps and their crash marker), ``log_results`` (what
appends and reads return), ``log`` (``Log``: append, read, flush, retention, truncation),
``log_loader`` (open + crash recovery), ``log_manager`` (a data directory of logs),
``config`` (``LogConfig``).
"""

from __future__ import annotations

from strom.storage.config import LogConfig
from strom.storage.errors import (
    InvalidProducerEpochError,
    InvalidRecordsError,
    InvalidTxnStateError,
    KafkaStorageError,
    LogDirLockedError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    ProducerStateError,
    StorageError,
    TransactionCoordinatorFencedError,
)
from strom.storage.fs import FileSystem
from strom.storage.log import Log
from strom.storage.log_loader import LogLoader
from strom.storage.log_manager import LogManager
from strom.storage.log_results import AppendResult, FetchIsolation, FetchResult, FileRegion
from strom.storage.producer_state import ProducerStateManager, ProducerStateManagerConfig
from strom.storage.time_index import TimestampOffset
from strom.storage.truncation import LogTruncation

__all__ = [
    "AppendResult",
    "FetchIsolation",
    "FetchResult",
    "FileRegion",
    "FileSystem",
    "InvalidProducerEpochError",
    "InvalidRecordsError",
    "InvalidTxnStateError",
    "KafkaStorageError",
    "Log",
    "LogConfig",
    "LogDirLockedError",
    "LogLoader",
    "LogManager",
    "LogTruncation",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProducerStateError",
    "ProducerStateManager",
    "ProducerStateManagerConfig",
    "StorageError",
    "TimestampOffset",
    "TransactionCoordinatorFencedError",
]
