"""Shared helpers for storage, compaction and crash tests: batches, logs on a temp dir, a
log's records read back, a fault-injecting fs."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from strom.protocol.records import Record, build_record_batch, decode_records
from strom.storage import FileSystem, Log, LogConfig, LogLoader
from strom.storage.fs import Buffer


def batch(count: int = 1, *, value_size: int = 10, timestamp: int = 1000, tag: int = 0,
          **options: object) -> bytearray:
    """A v2 batch of ``count`` records whose values identify it (``tag``)."""
    records = [(b"k%d" % i, bytes([tag % 251]) * value_size, (), timestamp + i)
               for i in range(count)]
    return build_record_batch(records, **options)  # type: ignore[arg-type]


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(directory: Path, *, clean: bool = True, recovery_point: int = 0,
             log_start_offset: int = 0, fs: FileSystem | None = None,
             clock: Callable[[], int] | None = None, **config: object) -> Log:
    return LogLoader(fs or FileSystem(), str(directory), "topic", 0,
                     LogConfig(**config),  # type: ignore[arg-type]
                     clean_shutdown=clean, recovery_point=recovery_point,
                     log_start_offset=log_start_offset, clock=clock or Clock()).load()


def read_all(log: Log, start: int | None = None) -> bytes:
    """Every byte the log serves from ``start`` to its end, following segments."""
    out = bytearray()
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 30)
        assert result.region is not None
        chunk = result.region.read(log.fs)
        out += chunk
        from strom.protocol.records import iter_batches
        last = [header for _, header in iter_batches(chunk)][-1]
        offset = last.next_offset
    return bytes(out)


def records_of(log: Log) -> list[Record]:
    return decode_records(read_all(log))


def summary(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record as (offset, key, value): what compaction must keep or drop."""
    return [(r.offset, None if r.key is None else bytes(r.key),
             None if r.value is None else bytes(r.value)) for r in records_of(log)]


class FaultyFileSystem(FileSystem):
    """Fails chosen calls: ``fail_writes_after`` bytes of pwrite then ``write_errno``
    (a short write first, as a filling disk does), or every fdatasync with ``sync_errno``.
    """

    def __init__(self) -> None:
        self.fail_writes_after: int | None = None
        self.write_errno = errno.ENOSPC
        self.sync_errno: int | None = None
        self.fail_truncate = False

    def pwrite(self, fd: int, data: Buffer, position: int) -> int:
        if self.fail_writes_after is None:
            return super().pwrite(fd, data, position)
        if self.fail_writes_after <= 0:
            raise OSError(self.write_errno, os.strerror(self.write_errno))
        allowed = min(len(data), self.fail_writes_after)
        self.fail_writes_after -= allowed
        return super().pwrite(fd, memoryview(data)[:allowed], position)

    def fdatasync(self, fd: int) -> None:
        if self.sync_errno is not None:
            raise OSError(self.sync_errno, os.strerror(self.sync_errno))
        super().fdatasync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        if self.fail_truncate:
            raise OSError(errno.EIO, "injected")
        super().ftruncate(fd, size)
