"""Kafka's framing, sans-IO: a 4-byte big-endian size, then that many bytes.

``FrameDecoder`` takes bytes as the network delivers them, in any split, and hands
back whole frames. It never holds more than one frame plus what has arrived of the
next, and refuses a size above ``max_frame_size`` (``socket.request.max.bytes``,
100 MiB by default) before buffering a byte of it, so a hostile peer cannot make it
allocate. A connection whose limit changes between frames (a SASL listener: Kafka's
``sasl.server.max.receive.size`` until authentication completes) takes them one at a
time with ``next_frame`` and sets ``max_frame_size`` before each.
"""

from __future__ import annotations

from struct import Struct

from strom.protocol.errors import ProtocolError
from strom.protocol.primitives import Buffer

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024  # socket.request.max.bytes

_SIZE = Struct(">i")


class FrameDecoder:
    """Accumulates received bytes and yields complete frames (without the size prefix)."""

    __slots__ = ("_buffer", "_need", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._need = -1  # size of the frame being received, -1 while reading the prefix

    def feed(self, data: Buffer) -> list[bytes]:
        """Add received bytes; return the frames they complete, oldest first."""
        self._buffer += data
        frames: list[bytes] = []
        buffer = self._buffer
        start = 0
        while True:
            if self._need < 0:
                if len(buffer) - start < 4:
                    break
                (size,) = _SIZE.unpack_from(buffer, start)
                if size < 0 or size > self.max_frame_size:
                    self._buffer = bytearray()
                    raise ProtocolError(
                        f"frame size {size} outside 0..{self.max_frame_size}"
                        " (socket.request.max.bytes)",
                        error_code=_INVALID_REQUEST,
                    )
                self._need = size
                start += 4
            if len(buffer) - start < self._need:
                break
            with memoryview(buffer) as view:  # one copy, and the view is gone before `del`
                frames.append(bytes(view[start : start + self._need]))
            start += self._need
            self._need = -1
        if start:
            del buffer[:start]
        return frames

    def next_frame(self, data: Buffer = b"") -> bytes | None:
        """Add received bytes; return the oldest whole frame, or None, leaving the rest
        buffered so the next frame's size is checked against the limit in force then."""
        if data:
            self._buffer += data
        buffer = self._buffer
        if self._need < 0:
            if len(buffer) < 4:
                return None
            (size,) = _SIZE.unpack_from(buffer, 0)
            if size < 0 or size > self.max_frame_size:
                self._buffer = bytearray()
                raise ProtocolError(f"frame size {size} outside 0..{self.max_frame_size}",
                                    error_code=_INVALID_REQUEST)
            self._need = size
            del buffer[:4]
        if len(buffer) < self._need:
            return None
        with memoryview(buffer) as view:
            payload = bytes(view[: self._need])
        del buffer[: self._need]
        self._need = -1
        return payload

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._buffer)

    @property
    def pending_frame_size(self) -> int | None:
        """The size of the frame being received, once its prefix has arrived."""
        return self._need if self._need >= 0 else None


def frame(payload: Buffer) -> bytes:
    """One frame: the size prefix and the payload."""
    size = payload.nbytes if isinstance(payload, memoryview) else len(payload)
    return _SIZE.pack(size) + bytes(payload)


def size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)


_INVALID_REQUEST = 42
