"""What a Log's appends and reads return (Kafka's LogAppendInfo, FetchDataInfo and
FetchIsolation), kept apart from ``log`` so callers that only pass them on need not
know the Log: an append's offsets, a read's file region and bounds, and how far a
reader may read."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from strom.storage.fs import FileSystem
from strom.storage.transaction_index import AbortedTxn


class FetchIsolation(enum.Enum):
    LOG_END = "log_end"  # followers
    HIGH_WATERMARK = "high_watermark"  # read_uncommitted consumers
    TXN_COMMITTED = "txn_committed"  # read_committed consumers


class AppendResult(NamedTuple):
    """What a produce response needs: Kafka's LogAppendInfo, trimmed.

    A NamedTuple rather than a frozen dataclass: one is made per produce request, and a
    frozen dataclass's ``__init__`` costs three times as much.
    """

    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    # A producer's retry of a batch already in the log (one of its last five): nothing
    # was written and the offsets are the original ones. Kafka answers it NONE.
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class FileRegion:
    """Bytes of a segment file for ``os.sendfile(socket, fd, position, length)``.

    The fd stays open at least ``file.delete.delay.ms`` after its segment is deleted,
    so a response being sent when retention runs still completes.
    """

    fd: int
    position: int
    length: int

    def __len__(self) -> int:
        """What the codec sizes it by (``protocol.primitives.Region``)."""
        return self.length

    def read(self, fs: FileSystem) -> bytes:
        return fs.pread(self.fd, self.length, self.position)


@dataclass(frozen=True, slots=True)
class FetchResult:
    """``region`` is None when there is nothing to return yet (offset at the bound).
    ``aborted_transactions``: for a read_committed read, those overlapping the region
    (empty without a region); None for any other isolation (Kafka's Optional)."""

    fetch_offset: int
    region: FileRegion | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    aborted_transactions: tuple[AbortedTxn, ...] | None = None
