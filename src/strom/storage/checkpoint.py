"""Checkpoint files: Kafka's small text files, replaced atomically.

Offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``), one per data dir::

    0                 <- format version
    2                 <- number of entries
    orders 0 1234     <- topic, partition, offset (space separated)
    orders 1 99

Leader epoch checkpoint (``<partition dir>/leader-epoch-checkpoint``)::

    0
    2
    0 0               <- leader epoch, start offset of that epoch
    3 1200

Invariants: a file is rewritten whole through ``write_file_atomically`` (temp file,
fsync, rename, fsync of the directory), so a reader sees the old or the new version,
never a torn one. A file that does not parse is an error for the caller to decide
on (the log manager falls back to full recovery from offset 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from strom.protocol.topic_partition import TopicPartition
from strom.storage.fs import FileSystem, read_file, write_file_atomically

VERSION: Final = 0


class CorruptCheckpointError(ValueError):
    pass


def _lines(fs: FileSystem, path: str, fields: int) -> list[list[str]]:
    try:
        text = read_file(fs, path).decode("utf-8")
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    try:
        if int(lines[0]) != VERSION:
            raise CorruptCheckpointError(f"{path}: unknown version {lines[0]!r}")
        count = int(lines[1])
        rows = [line.split(" ") for line in lines[2 : 2 + count]]
    except (ValueError, IndexError) as exc:
        raise CorruptCheckpointError(f"{path}: {exc}") from exc
    if len(rows) != count or any(len(row) != fields for row in rows):
        raise CorruptCheckpointError(f"{path}: malformed entries")
    return rows


def _write(fs: FileSystem, path: str, rows: Iterable[str]) -> None:
    body = list(rows)
    text = "\n".join([str(VERSION), str(len(body)), *body]) + "\n"
    write_file_atomically(fs, path, text.encode("utf-8"))


def read_offset_checkpoint(fs: FileSystem, path: str) -> dict[TopicPartition, int]:
    """A missing file is empty; a malformed one raises ``CorruptCheckpointError``."""
    try:
        return {(topic, int(partition)): int(offset)
                for topic, partition, offset in _lines(fs, path, 3)}
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: {exc}") from exc


def write_offset_checkpoint(fs: FileSystem, path: str,
                            offsets: Mapping[TopicPartition, int]) -> None:
    _write(fs, path, (f"{topic} {partition} {offset}"
                      for (topic, partition), offset in sorted(offsets.items())))


def read_leader_epoch_checkpoint(fs: FileSystem, path: str) -> list[tuple[int, int]]:
    try:
        return [(int(epoch), int(offset)) for epoch, offset in _lines(fs, path, 2)]
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: {exc}") from exc


def write_leader_epoch_checkpoint(fs: FileSystem, path: str,
                                  entries: Iterable[tuple[int, int]]) -> None:
    _write(fs, path, (f"{epoch} {offset}" for epoch, offset in entries))
