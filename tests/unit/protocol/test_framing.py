from __future__ import annotations

import pytest

from strom.protocol.errors import ProtocolError
from strom.protocol.framing import FrameDecoder, frame, size_prefix


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


def test_next_frame_returns_one_frame_at_a_time_checking_each_size_against_the_limit_then() -> None:
    decoder = FrameDecoder(max_frame_size=4)
    # The second frame (10 bytes) arrives with the first but is not read while the limit is 4...
    assert decoder.next_frame(frame(b"abcd") + frame(b"0123456789")[:6]) == b"abcd"
    decoder.max_frame_size = 10  # ...its size is checked against the limit set before asking for it
    assert decoder.next_frame() is None
    assert decoder.next_frame(frame(b"0123456789")[6:]) == b"0123456789"
    decoder.max_frame_size = 4
    with pytest.raises(ProtocolError):
        decoder.next_frame(size_prefix(5))
    assert decoder.buffered == 0
