from __future__ import annotations

import pytest

from strom.protocol.errors import ProtocolError
from strom.protocol.framing import FrameDecoder, frame


def test_frames_reassemble_from_any_split() -> None:
    payloads = [b"", b"a", b"hello world", bytes(range(256)) * 3]
    stream = b"".join(frame(p) for p in payloads)
    for split in range(1, len(stream)):
        decoder = FrameDecoder()
        got = decoder.feed(stream[:split]) + decoder.feed(stream[split:])
        assert got == payloads
        assert decoder.buffered == 0


def test_byte_at_a_time() -> None:
    decoder = FrameDecoder()
    got: list[bytes] = []
    for byte in frame(b"xyz") + frame(b"12"):
        got += decoder.feed(bytes([byte]))
    assert got == [b"xyz", b"12"]


def test_oversized_frame_refused_before_its_bytes_arrive() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(ProtocolError) as info:
        decoder.feed((1025).to_bytes(4, "big"))
    assert info.value.error_code == 42  # INVALID_REQUEST
    assert "socket.request.max.bytes" in str(info.value)


def test_negative_size_refused() -> None:
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(b"\xff\xff\xff\xfe")


def test_pending_frame_size_is_known_once_the_prefix_arrives() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(frame(b"abcdef")[:6]) == []
    assert decoder.pending_frame_size == 6
    assert decoder.feed(b"cdef") == [b"abcdef"]
    assert decoder.pending_frame_size is None
