"""Record compression codecs, with decompression bounded by the caller.

Kafka compresses a whole records section (v2) or a wrapper message's value (v0/v1)
with the codec named by attribute bits 0-2. The formats are Kafka's, not the codecs'
defaults:

* gzip (1): RFC 1952 members, as ``java.util.zip.GZIPOutputStream`` writes them.
  Stdlib ``zlib`` is used both ways: on this machine (zlib 1.2.13 vs cramjam 2.9,
  1 MiB of JSON-like records) it compresses at Kafka's default level 6 in 16 ms
  against cramjam's 26 ms and decompresses as fast (1.8 ms each), and its
  ``max_length`` bounds output natively.
* snappy (2): the Java client writes xerial's ``SnappyOutputStream`` framing: a 16-byte
  header ``82 'SNAPPY' 00``, int32 version 1, int32 compatible 1, then chunks of
  int32 big-endian length + one raw snappy block, each from <= 32 KiB of input.
  librdkafka and others may send a bare raw snappy block; readers detect xerial
  by its 8-byte magic.
* lz4 (3): the LZ4 frame format with independent 64 KiB blocks, no checksums beyond
  the header's, no content size (as ``KafkaLZ4BlockOutputStream`` writes). Kafka
  before 0.10 computed the header-checksum byte HC over the frame *including* its
  4-byte magic instead of over the descriptor alone; magic-0 messages keep that bug,
  so ``legacy_header_checksum=True`` writes it and accepts it (or the correct byte) on
  read. Block and content checksums, when a foreign writer sets them, are skipped,
  not verified: the batch CRC already covers the compressed bytes.
* zstd (4): standard zstd frames, level 3 as the Java client.

Every decompressor takes ``max_output_size`` and never produces or allocates more
than that (plus small constant slack); a bomb, a truncated or corrupt input raises
``ProtocolError`` with ``CORRUPT_MESSAGE`` and no codec exception escapes.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from enum import IntEnum
from typing import Any, Final

import cramjam

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError

Buffer = bytes | bytearray | memoryview

COMPRESSION_CODEC_MASK: Final = 0x07

# The exceptions a codec may raise on hostile input; MemoryError too, because an
# allocation the caller's bound allows can still fail on a small machine.
_CODEC_ERRORS: Final = (
    cramjam.DecompressionError, zlib.error, ValueError, OverflowError, MemoryError,
)


class CompressionType(IntEnum):
    """The codec id in bits 0-2 of a batch's or wrapper message's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_attributes(cls, attributes: int) -> CompressionType:
        codec = attributes & COMPRESSION_CODEC_MASK
        if codec > cls.ZSTD:
            raise _corrupt(f"unknown compression codec id {codec}")
        return cls(codec)


def _corrupt(reason: str) -> ProtocolError:
    return ProtocolError(reason, error_code=ErrorCode.CORRUPT_MESSAGE)


def compress(codec: CompressionType, data: Buffer, *, legacy_lz4: bool = False) -> bytes:
    """Compress ``data`` in the framing Kafka's Java client uses for ``codec``."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        return gzip_compress(data)
    if codec == CompressionType.SNAPPY:
        return snappy_compress(data)
    if codec == CompressionType.LZ4:
        return lz4_compress(data, legacy_header_checksum=legacy_lz4)
    if codec == CompressionType.ZSTD:
        return zstd_compress(data)
    raise ValueError(f"unknown compression codec {codec!r}")


def decompress(
    codec: CompressionType, data: Buffer, max_output_size: int, *, legacy_lz4: bool = False
) -> bytes | bytearray:
    """Decompress ``data``; more than ``max_output_size`` bytes of output is corruption."""
    if codec == CompressionType.NONE:
        if len(data) > max_output_size:
            raise _corrupt(f"{len(data)} bytes exceed the limit of {max_output_size}")
        return bytes(data)
    if codec == CompressionType.GZIP:
        return gzip_decompress(data, max_output_size)
    if codec == CompressionType.SNAPPY:
        return snappy_decompress(data, max_output_size)
    if codec == CompressionType.LZ4:
        return lz4_decompress(data, max_output_size, legacy_header_checksum=legacy_lz4)
    if codec == CompressionType.ZSTD:
        return zstd_decompress(data, max_output_size)
    raise _corrupt(f"unknown compression codec {codec!r}")


# --- gzip ---------------------------------------------------------------------------

GZIP_LEVEL: Final = 6  # java.util.zip.Deflater.DEFAULT_COMPRESSION
_GZIP_MAGIC: Final = b"\x1f\x8b"


def gzip_compress(data: Buffer, level: int = GZIP_LEVEL) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


def gzip_decompress(data: Buffer, max_output_size: int) -> bytes:
    """Inflate one or more concatenated gzip members, as ``GZIPInputStream`` does.

    Bytes after the last member that do not start another member are ignored, as Java
    ignores them.
    """
    pieces: list[bytes] = []
    budget = max_output_size
    member: Buffer = data
    try:
        while True:
            inflater = zlib.decompressobj(47)  # gzip or zlib header, auto-detected
            piece = inflater.decompress(member, budget + 1)
            if len(piece) > budget or inflater.unconsumed_tail:
                raise _corrupt(f"gzip output exceeds the limit of {max_output_size} bytes")
            if not inflater.eof:
                raise _corrupt("truncated gzip stream")
            pieces.append(piece)
            budget -= len(piece)
            if not inflater.unused_data.startswith(_GZIP_MAGIC):
                break
            member = inflater.unused_data
    except _CODEC_ERRORS as exc:
        raise _corrupt(f"invalid gzip stream: {exc}") from exc
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


# --- snappy -------------------------------------------------------------------------

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
XERIAL_HEADER: Final = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE: Final = 32 * 1024  # SnappyOutputStream's default
_INT32: Final = struct.Struct(">i")


def snappy_compress(data: Buffer, *, xerial: bool = True) -> bytes:
    """Compress as the Java client does (xerial framing) or as one raw block."""
    if not xerial:
        return bytes(cramjam.snappy.compress_raw(data))
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE])
        parts.append(_INT32.pack(len(block)))
        parts.append(bytes(block))
    return b"".join(parts)


def snappy_decompress(data: Buffer, max_output_size: int) -> bytearray:
    view = memoryview(data)
    try:
        if bytes(view[:8]) == XERIAL_MAGIC and len(view) >= len(XERIAL_HEADER):
            return _xerial_decompress(view, max_output_size)
        return _snappy_raw_decompress(view, max_output_size)
    except _CODEC_ERRORS as exc:
        raise _corrupt(f"invalid snappy data: {exc}") from exc


def _snappy_raw_decompress(view: memoryview, max_output_size: int) -> bytearray:
    size = cramjam.snappy.decompress_raw_len(view)
    if size > max_output_size:
        raise _corrupt(f"snappy block claims {size} bytes, over the limit of {max_output_size}")
    out = bytearray(size)
    written = cramjam.snappy.decompress_raw_into(view, out)
    if written != size:
        raise _corrupt("snappy block shorter than its header claims")
    return out


def _xerial_decompress(view: memoryview, max_output_size: int) -> bytearray:
    # First pass over chunk headers only: learn the exact output size, so a bomb is
    # refused before anything is inflated and the output is allocated once.
    chunks: list[tuple[memoryview, int]] = []
    total = 0
    pos = len(XERIAL_HEADER)
    while pos < len(view):
        if pos + 4 > len(view):
            raise _corrupt("truncated xerial chunk header")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise _corrupt(f"xerial chunk length {length} out of bounds")
        chunk = view[pos : pos + length]
        pos += length
        size = cramjam.snappy.decompress_raw_len(chunk)
        total += size
        if total > max_output_size:
            raise _corrupt(f"snappy output exceeds the limit of {max_output_size} bytes")
        chunks.append((chunk, size))
    out = bytearray(total)
    out_view = memoryview(out)
    at = 0
    for chunk, size in chunks:
        if cramjam.snappy.decompress_raw_into(chunk, out_view[at : at + size]) != size:
            raise _corrupt("snappy chunk shorter than its header claims")
        at += size
    return out


# --- lz4 ----------------------------------------------------------------------------

LZ4_FRAME_MAGIC: Final = b"\x04\x22\x4d\x18"
_LZ4_FLG_VERSION_01: Final = 0x40
_LZ4_FLG_BLOCK_INDEPENDENT: Final = 0x20
_LZ4_FLG_BLOCK_CHECKSUM: Final = 0x10
_LZ4_FLG_CONTENT_SIZE: Final = 0x08
_LZ4_FLG_CONTENT_CHECKSUM: Final = 0x04
_LZ4_FLG_RESERVED: Final = 0x02
_LZ4_FLG_DICT_ID: Final = 0x01
_LZ4_BD_64KB: Final = 0x40
_LZ4_BLOCK_SIZES: Final = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_LZ4_UNCOMPRESSED_BIT: Final = 0x80000000
_UINT32_LE: Final = struct.Struct("<I")
_UINT64_LE: Final = struct.Struct("<Q")
_LZ4_END_MARK: Final = b"\x00\x00\x00\x00"


def lz4_compress(data: Buffer, *, legacy_header_checksum: bool = False) -> bytes:
    """Write one LZ4 frame as Kafka's ``KafkaLZ4BlockOutputStream`` does."""
    view = memoryview(data)
    descriptor = bytes((_LZ4_FLG_VERSION_01 | _LZ4_FLG_BLOCK_INDEPENDENT, _LZ4_BD_64KB))
    checked = LZ4_FRAME_MAGIC + descriptor if legacy_header_checksum else descriptor
    parts = [LZ4_FRAME_MAGIC, descriptor, bytes(((xxh32(checked) >> 8) & 0xFF,))]
    block_size = _LZ4_BLOCK_SIZES[4]
    for start in range(0, len(view), block_size):
        chunk = view[start : start + block_size]
        block = cramjam.lz4.compress_block(chunk, store_size=False)
        if len(block) < len(chunk):
            parts.append(_UINT32_LE.pack(len(block)))
            parts.append(bytes(block))
        else:
            parts.append(_UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_BIT))
            parts.append(bytes(chunk))
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def lz4_decompress(
    data: Buffer, max_output_size: int, *, legacy_header_checksum: bool = False
) -> bytearray:
    """Read one or more concatenated LZ4 frames.

    ``legacy_header_checksum`` (magic-0 messages) accepts the pre-0.10 HC byte as well
    as the correct one.
    """
    view = memoryview(data)
    try:
        out = bytearray()
        pos = 0
        while True:
            pos = _lz4_read_frame(view, pos, out, max_output_size, legacy_header_checksum)
            if pos == len(view):
                return out
    except _CODEC_ERRORS as exc:
        raise _corrupt(f"invalid lz4 frame: {exc}") from exc


def _lz4_read_frame(
    view: memoryview, pos: int, out: bytearray, max_output_size: int, legacy: bool
) -> int:
    """Append one frame's content to ``out``; return the position after the frame."""
    frame_start = pos
    if bytes(view[pos : pos + 4]) != LZ4_FRAME_MAGIC or pos + 7 > len(view):
        raise _corrupt("not an lz4 frame")
    flg, bd = view[pos + 4], view[pos + 5]
    if flg & 0xC0 != _LZ4_FLG_VERSION_01 or flg & (_LZ4_FLG_RESERVED | _LZ4_FLG_DICT_ID):
        raise _corrupt(f"unsupported lz4 frame flags {flg:#04x}")
    block_max = _LZ4_BLOCK_SIZES.get((bd >> 4) & 0x07)
    if block_max is None or bd & 0x8F:
        raise _corrupt(f"invalid lz4 block descriptor {bd:#04x}")
    pos += 6
    if flg & _LZ4_FLG_CONTENT_SIZE:
        if pos + 8 > len(view):
            raise _corrupt("truncated lz4 frame header")
        (content_size,) = _UINT64_LE.unpack_from(view, pos)
        if content_size > max_output_size - len(out):
            raise _corrupt(f"lz4 frame claims {content_size} bytes, over the limit")
        pos += 8
    if pos >= len(view):
        raise _corrupt("truncated lz4 frame header")
    header_check = view[pos]
    if header_check != (xxh32(view[frame_start + 4 : pos]) >> 8) & 0xFF and not (
        legacy and header_check == (xxh32(view[frame_start:pos]) >> 8) & 0xFF
    ):
        raise _corrupt("lz4 frame header checksum mismatch")
    pos += 1
    if not flg & _LZ4_FLG_BLOCK_INDEPENDENT:
        return _lz4_read_linked_frame(view, frame_start, pos, flg, out, max_output_size)
    block_trailer = 4 if flg & _LZ4_FLG_BLOCK_CHECKSUM else 0
    while True:
        if pos + 4 > len(view):
            raise _corrupt("truncated lz4 block header")
        (block_header,) = _UINT32_LE.unpack_from(view, pos)
        pos += 4
        if block_header == 0:
            break
        length = block_header & ~_LZ4_UNCOMPRESSED_BIT
        if length > block_max or pos + length + block_trailer > len(view):
            raise _corrupt(f"lz4 block length {length} out of bounds")
        block = view[pos : pos + length]
        pos += length + block_trailer
        if block_header & _LZ4_UNCOMPRESSED_BIT:
            if len(out) + length > max_output_size:
                raise _corrupt(f"lz4 output exceeds the limit of {max_output_size} bytes")
            out += block
            continue
        _lz4_inflate_block(block, out, min(block_max, max_output_size - len(out)))
    if flg & _LZ4_FLG_CONTENT_CHECKSUM:
        pos += 4
        if pos > len(view):
            raise _corrupt("truncated lz4 content checksum")
    return pos


def _lz4_inflate_block(block: memoryview, out: bytearray, room: int) -> None:
    """Inflate one block at the end of ``out``, into at most ``room`` bytes."""
    if room <= 0:
        raise _corrupt("lz4 output exceeds its limit")
    start = len(out)
    out.extend(bytes(room))
    try:
        with memoryview(out) as out_view:
            written = int(cramjam.lz4.decompress_block_into(
                block, out_view[start:], output_len=room
            ))
    except cramjam.DecompressionError as exc:
        raise _corrupt(f"invalid lz4 block or output over the limit: {exc}") from exc
    del out[start + written :]


def _lz4_read_linked_frame(
    view: memoryview, frame_start: int, pos: int, flg: int, out: bytearray, max_output_size: int
) -> int:
    """Frames whose blocks reference earlier blocks need the whole-frame decoder.

    Kafka's Java writer never produces them, but generic lz4 tools do; cramjam's frame
    decoder handles them when given the exact frame bytes and the correct HC.
    """
    end = _lz4_frame_end(view, pos, flg)
    frame = view[frame_start:end]
    room = max_output_size - len(out)
    decoded = _decompress_growing(cramjam.lz4.decompress_into, frame, room, 4 * len(frame))
    out += decoded
    return end


def _lz4_frame_end(view: memoryview, pos: int, flg: int) -> int:
    block_trailer = 4 if flg & _LZ4_FLG_BLOCK_CHECKSUM else 0
    while True:
        if pos + 4 > len(view):
            raise _corrupt("truncated lz4 block header")
        (block_header,) = _UINT32_LE.unpack_from(view, pos)
        pos += 4
        if block_header == 0:
            break
        pos += (block_header & ~_LZ4_UNCOMPRESSED_BIT) + block_trailer
    if flg & _LZ4_FLG_CONTENT_CHECKSUM:
        pos += 4
    if pos > len(view):
        raise _corrupt("truncated lz4 frame")
    return pos


# --- zstd ---------------------------------------------------------------------------

ZSTD_LEVEL: Final = 3  # ZstdOutputStream's default, as the Java client uses it
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"


def zstd_compress(data: Buffer, level: int = ZSTD_LEVEL) -> bytes:
    return bytes(cramjam.zstd.compress(data, level=level))


def zstd_decompress(data: Buffer, max_output_size: int) -> bytearray:
    view = memoryview(data)
    content_size = _zstd_content_size(view)
    if content_size is not None and content_size > max_output_size:
        raise _corrupt(f"zstd frame claims {content_size} bytes, over the limit")
    hint = content_size if content_size is not None else 4 * len(view)
    return _decompress_growing(cramjam.zstd.decompress_into, view, max_output_size, hint)


def _zstd_content_size(view: memoryview) -> int | None:
    """The first frame's Frame_Content_Size, when its header declares one."""
    if len(view) < 6 or bytes(view[:4]) != ZSTD_MAGIC:
        return None
    descriptor = view[4]
    size_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    field_size = (0 if not single_segment else 1, 2, 4, 8)[size_flag]
    if field_size == 0:
        return None
    dict_id_size = (0, 1, 2, 4)[descriptor & 0x03]
    at = 5 + (0 if single_segment else 1) + dict_id_size
    if at + field_size > len(view):
        return None
    value = int.from_bytes(view[at : at + field_size], "little")
    return value + 256 if field_size == 2 else value


# --- shared -------------------------------------------------------------------------


def _decompress_growing(
    decompress_into: Callable[..., Any], data: Buffer, max_output_size: int, hint: int
) -> bytearray:
    """Inflate into a buffer that grows from ``hint`` up to ``max_output_size``.

    cramjam's ``decompress_into`` stops with an error once its output buffer is full,
    so memory stays bounded; total work is at most about twice the bounded size.
    """
    size = max(64, min(hint, max_output_size))
    while True:
        out = bytearray(size)
        try:
            written = int(decompress_into(data, out))
        except _CODEC_ERRORS as exc:
            if size >= max_output_size:
                raise _corrupt(
                    f"corrupt compressed data or output over {max_output_size} bytes: {exc}"
                ) from exc
            size = min(max_output_size, size * 4)
            continue
        if written > max_output_size:
            raise _corrupt(f"output exceeds the limit of {max_output_size} bytes")
        del out[written:]
        return out


# --- xxHash32, for LZ4 frame header checksums (a handful of bytes each) --------------

_P1: Final = 2654435761
_P2: Final = 2246822519
_P3: Final = 3266489917
_P4: Final = 668265263
_P5: Final = 374761393
_MASK32: Final = 0xFFFFFFFF


def _rotl32(value: int, count: int) -> int:
    return ((value << count) | (value >> (32 - count))) & _MASK32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """xxHash32; pure Python, so meant for the few bytes of a frame descriptor."""
    raw = bytes(data)
    length = len(raw)
    pos = 0
    if length >= 16:
        lanes = [
            (seed + _P1 + _P2) & _MASK32, (seed + _P2) & _MASK32, seed, (seed - _P1) & _MASK32,
        ]
        while pos + 16 <= length:
            for lane in range(4):
                (word,) = _UINT32_LE.unpack_from(raw, pos)
                lanes[lane] = (_rotl32((lanes[lane] + word * _P2) & _MASK32, 13) * _P1) & _MASK32
                pos += 4
        acc = (_rotl32(lanes[0], 1) + _rotl32(lanes[1], 7) + _rotl32(lanes[2], 12)
               + _rotl32(lanes[3], 18)) & _MASK32
    else:
        acc = (seed + _P5) & _MASK32
    acc = (acc + length) & _MASK32
    while pos + 4 <= length:
        (word,) = _UINT32_LE.unpack_from(raw, pos)
        acc = (_rotl32((acc + word * _P3) & _MASK32, 17) * _P4) & _MASK32
        pos += 4
    while pos < length:
        acc = (_rotl32((acc + raw[pos] * _P5) & _MASK32, 11) * _P1) & _MASK32
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _MASK32
    acc ^= acc >> 13
    acc = (acc * _P3) & _MASK32
    acc ^= acc >> 16
    return acc
