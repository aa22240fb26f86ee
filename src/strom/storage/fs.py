"""The filesystem seam: every system call the storage engine makes, behind one class.

Storage code never calls ``os`` for file I/O directly; it calls a ``FileSystem``.
Production uses the class as is (thin wrappers over ``os``); tests subclass it to
inject torn writes, short writes, ``ENOSPC`` and ``EIO`` at chosen moments. The seam
is deliberately low level (file descriptors, positional I/O) so what a test injects
is exactly what a real disk can do.

Durability helpers built on the primitives live here too: ``write_file_atomically``
(write a temp file, fsync it, rename it over the target, fsync the directory) is
how every checkpoint and config file is replaced, so a crash leaves either the old
or the new file, never a mix.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Sequence

Buffer = bytes | bytearray | memoryview


class FileSystem:
    """Positional file I/O and directory operations; one instance per process is enough."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags | os.O_CLOEXEC, mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def pwrite(self, fd: int, data: Buffer, position: int) -> int:
        """May write fewer bytes than asked, as ``pwrite(2)`` may; see ``write_fully``."""
        return os.pwrite(fd, data, position)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        return os.pread(fd, size, position)

    def preadinto(self, fd: int, buffer: bytearray | memoryview, position: int) -> int:
        return os.preadv(fd, [buffer], position)

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fallocate(self, fd: int, size: int) -> None:
        """Allocate blocks for ``[0, size)``; the file grows to ``size``, reading zeros."""
        os.posix_fallocate(fd, 0, size)

    def file_size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def rename(self, source: str, target: str) -> None:
        os.rename(source, target)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def mtime_ms(self, path: str) -> int:
        return os.stat(path).st_mtime_ns // 1_000_000

    def set_mtime_ms(self, path: str, mtime_ms: int) -> None:
        """The compaction cleaner keeps a cleaned segment's last-modified time (Kafka's)."""
        os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))

    def fsync_dir(self, path: str) -> None:
        """Make renames, creations and deletions in ``path`` durable."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def lock(self, path: str) -> int:
        """Take an exclusive ``flock`` on ``path`` (created if missing); hold the fd."""
        fd = self.open(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise OSError(errno.EWOULDBLOCK, f"{path} is locked by another process") from exc
        return fd

    def unlock(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def write_fully(fs: FileSystem, fd: int, data: Buffer, position: int) -> None:
    """Write all of ``data`` at ``position``, retrying short writes; a zero write is ENOSPC."""
    view = memoryview(data)
    written = 0
    while written < len(view):
        count = fs.pwrite(fd, view[written:], position + written)
        if count <= 0:
            raise OSError(errno.ENOSPC, "write made no progress")
        written += count


def read_file(fs: FileSystem, path: str) -> bytes:
    fd = fs.open(path, os.O_RDONLY)
    try:
        chunks: list[bytes] = []
        position = 0
        while chunk := fs.pread(fd, 1 << 20, position):
            chunks.append(chunk)
            position += len(chunk)
        return b"".join(chunks)
    finally:
        fs.close(fd)


def write_file_atomically(fs: FileSystem, path: str, data: Buffer) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file whole."""
    temp = path + ".tmp"
    fd = fs.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        write_fully(fs, fd, data, 0)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.rename(temp, path)
    fs.fsync_dir(os.path.dirname(path) or ".")


def remove_files(fs: FileSystem, paths: Sequence[str]) -> None:
    """Unlink each path that exists; a file already gone is what we wanted anyway."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            fs.unlink(path)
