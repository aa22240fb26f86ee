"""LeaderEpochFileCache: which leader epoch began at which offset, for OffsetForLeaderEpoch.

Persisted as ``<partition dir>/leader-epoch-checkpoint`` (format in ``checkpoint``),
rewritten whenever an epoch is added or the list is truncated.

A leader adds its epoch at the first offset it appends in it (``Log.append``); a
follower, the partition leader epoch the leader stamped on each batch it copies
(``assign_from_leader``), so both hold the same entries for the same log.

Invariants: epochs strictly increase and so do their start offsets; every start
offset is within [log start offset, log end offset]. Truncating the log's end drops
epochs that start at or after the new end; moving the log start offset moves the
start of the epoch in force there up to it and drops the older ones.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Iterable
from typing import Final, NamedTuple

from strom.protocol.records import BatchHeader
from strom.storage.checkpoint import read_leader_epoch_checkpoint, write_leader_epoch_checkpoint
from strom.storage.fs import FileSystem

logger = logging.getLogger(__name__)

UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    def __init__(self, fs: FileSystem, path: str) -> None:
        self.fs = fs
        self.path = path
        self._entries = [EpochEntry(*entry) for entry in read_leader_epoch_checkpoint(fs, path)]

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` began at ``start_offset`` (ignored unless it is newer)."""
        if epoch < 0 or epoch <= self.latest_epoch:
            return
        while self._entries and self._entries[-1].start_offset >= start_offset:
            self._entries.pop()  # a newer epoch starting no later replaces them
        self._entries.append(EpochEntry(epoch, start_offset))
        self._flush()

    def assign_from_leader(self, headers: Iterable[BatchHeader]) -> None:
        """A follower's append: each v2 batch's partition leader epoch, as the leader
        stamped it, begins at the batch's base offset if it is newer (Kafka's
        ``appendAsFollower``). A v0/v1 entry carries no epoch, so the epochs around it
        cannot be known: the cache is cleared, as Kafka does, and a later leader change
        truncates this replica to its high watermark instead of by epochs."""
        for header in headers:
            if header.magic >= 2:
                self.assign(header.partition_leader_epoch, header.base_offset)
            elif self._entries:
                logger.warning("%s: clearing the leader epochs after a v%d entry at offset %d "
                               "from the leader", self.path, header.magic, header.base_offset)
                self.clear()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's answer to OffsetForLeaderEpoch: (epoch, end offset of that epoch).

        The end offset is where the next larger epoch starts, or the log end offset
        for the latest epoch; for an epoch older than all known ones, the first known
        epoch's start offset. Unknown future epochs get (-1, -1).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        epochs = [entry.epoch for entry in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._entries[0].start_offset
        return epochs[higher - 1], self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: drop epochs that start at or after it."""
        keep = [entry for entry in self._entries if entry.start_offset < end_offset]
        if keep != self._entries:
            self._entries = keep
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch in force there starts there."""
        older = [entry for entry in self._entries if entry.start_offset <= start_offset]
        if not older or (len(older) == 1 and older[0].start_offset == start_offset):
            return
        kept = EpochEntry(older[-1].epoch, start_offset)
        self._entries = [kept, *self._entries[len(older):]]
        self._flush()

    def clear(self) -> None:
        self._entries = []
        self._flush()

    def _flush(self) -> None:
        write_leader_epoch_checkpoint(self.fs, self.path, self._entries)
