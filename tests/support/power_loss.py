"""What an operating-system crash or power loss takes from a broker's data dir, for tests.

A SIGKILL loses nothing the process wrote (the kernel keeps its page cache); losing
power also loses the page cache: every byte not yet ``fdatasync``'ed. With Strom's
default flush policy (Kafka's: ``flush.messages`` = ``flush.ms`` = 2**63-1) the log
syncs only when a segment rolls (the old segment) and at a clean close, so what is
lost is the tail of each partition's active (last) segment after its recovery point.
Everything else survives: rolled segments were synced, and checkpoints, producer
snapshots and leader-epoch files are replaced by ``write_file_atomically`` (fsync'ed).

``drop_unsynced_tail`` applies that loss to the data dir of a process already killed:
for each ``<topic>-<partition>`` directory it cuts the active segment's ``.log`` after
the last batch below the recovery point that ``recovery-point-offset-checkpoint``
records (the first segment's base offset if the partition has no entry), and deletes
the active segment's ``.index`` and ``.timeindex`` (never synced by an append; the next
start's recovery, which re-reads every segment from the recovery point's, rebuilds
them); its ``.txnindex`` keeps the entries of markers below the recovery point (synced
with the ``.log``) and loses the rest. The checkpoint is written periodically and after truncations, so it may lag a
flush: with ``flush.messages`` or ``flush.ms`` set this cuts more than a power loss
would, never less.

``torn_bytes`` keeps that many bytes of the first lost batch, as a disk that wrote part
of the last page does: recovery must find the torn batch, cut it and say so.
"""

from __future__ import annotations

import os
import re
import struct
from typing import Final

from strom.protocol.errors import ProtocolError
from strom.protocol.records import read_batch_header
from strom.storage.checkpoint import read_offset_checkpoint
from strom.storage.fs import FileSystem
from strom.storage.log_manager import DELETE_SUFFIX, RECOVERY_POINT_CHECKPOINT
from strom.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from strom.storage.transaction_index import ENTRY_SIZE, TXN_INDEX_SUFFIX

_PARTITION_DIR: Final = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")
_PREFIX: Final = struct.Struct(">qi")  # base offset, batch length
_LAST_OFFSET: Final = struct.Struct(">q")  # a .txnindex entry's, after version, pid, first
_LOG_OVERHEAD: Final = _PREFIX.size


def drop_unsynced_tail(data_dir: str, *, torn_bytes: int = 0) -> dict[str, int]:
    """Cut every partition's unsynced tail (the module docstring); per partition
    directory name, how many bytes of its active segment were cut."""
    fs = FileSystem()
    recovery_points = read_offset_checkpoint(fs, os.path.join(data_dir, RECOVERY_POINT_CHECKPOINT))
    cut: dict[str, int] = {}
    for name in sorted(os.listdir(data_dir)):
        match = _PARTITION_DIR.match(name)
        directory = os.path.join(data_dir, name)
        if match is None or name.endswith(DELETE_SUFFIX) or not os.path.isdir(directory):
            continue
        bases = sorted(int(file[: -len(LOG_SUFFIX)]) for file in os.listdir(directory)
                       if file.endswith(LOG_SUFFIX) and file[: -len(LOG_SUFFIX)].isdigit())
        if not bases:
            cut[name] = 0
            continue
        recovery_point = recovery_points.get((match["topic"], int(match["partition"])), bases[0])
        cut[name] = _cut_active_segment(directory, bases[-1], recovery_point, torn_bytes)
    return cut


def _cut_active_segment(directory: str, base_offset: int, recovery_point: int,
                        torn_bytes: int) -> int:
    stem = os.path.join(directory, f"{base_offset:020d}")
    with open(stem + LOG_SUFFIX, "r+b") as segment:
        data = segment.read()
        keep = _synced_prefix(data, recovery_point)
        if keep < len(data) and torn_bytes > 0:  # part of the first lost batch, never all
            keep += min(torn_bytes, _entry_size(data, keep, len(data) - keep) - 1)
        segment.truncate(keep)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        if os.path.exists(stem + suffix):
            os.unlink(stem + suffix)
    if os.path.exists(stem + TXN_INDEX_SUFFIX):
        with open(stem + TXN_INDEX_SUFFIX, "r+b") as txn_index:
            entries = txn_index.read()
            synced = [at for at in range(0, len(entries) - ENTRY_SIZE + 1, ENTRY_SIZE)
                      if _LAST_OFFSET.unpack_from(entries, at + 18)[0] < recovery_point]
            txn_index.truncate(len(synced) * ENTRY_SIZE)
    return len(data) - keep


def _synced_prefix(data: bytes, recovery_point: int) -> int:
    """Bytes of the whole batches at the start of ``data`` that end below ``recovery_point``."""
    position = 0
    while position + _LOG_OVERHEAD <= len(data):
        _, length = _PREFIX.unpack_from(data, position)
        end = position + _LOG_OVERHEAD + length
        if length <= 0 or end > len(data):
            break  # a torn write or a preallocated zero tail: never synced either
        try:
            header = read_batch_header(data, position)
        except ProtocolError:
            break
        if header.last_offset >= recovery_point:
            break
        position = end
    return position


def _entry_size(data: bytes, position: int, available: int) -> int:
    if available < _LOG_OVERHEAD:
        return available
    length: int = _PREFIX.unpack_from(data, position)[1]
    return min(_LOG_OVERHEAD + max(length, 0), available)
