"""Codecs: round trips, Kafka's framings, interop with kafka-python, bounded output."""

from __future__ import annotations

import contextlib
import gzip
import os
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.protocol.compression import (
    XERIAL_MAGIC,
    CompressionType,
    compress,
    decompress,
    gzip_decompress,
    lz4_compress,
    lz4_decompress,
    snappy_compress,
    snappy_decompress,
    xxh32,
    zstd_decompress,
)
from strom.protocol.errors import ProtocolError

CODECS = list(CompressionType)
COMPRESSED = [codec for codec in CompressionType if codec != CompressionType.NONE]
SAMPLE = os.urandom(3000) * 40 + os.urandom(70_000)  # compressible and not, > one block


@settings(max_examples=40, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000), legacy=st.booleans())
def test_round_trip(codec: CompressionType, data: bytes, legacy: bool) -> None:
    packed = compress(codec, data, legacy_lz4=legacy)
    assert bytes(decompress(codec, packed, len(data), legacy_lz4=legacy)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_large_round_trip_and_exact_bound(codec: CompressionType) -> None:
    packed = compress(codec, SAMPLE)
    assert bytes(decompress(codec, packed, len(SAMPLE))) == SAMPLE
    with pytest.raises(ProtocolError) as caught:
        decompress(codec, packed, len(SAMPLE) - 1)
    assert caught.value.error_code == 2


@pytest.mark.parametrize("codec", COMPRESSED)
def test_bomb_is_refused_without_inflating_it(codec: CompressionType) -> None:
    bomb = compress(codec, bytes(64 << 20))
    with pytest.raises(ProtocolError) as caught:
        decompress(codec, bomb, 1 << 20)
    assert caught.value.error_code == 2


def test_zstd_bomb_without_content_size_is_refused() -> None:
    compressor = cramjam.zstd.Compressor(level=3)
    compressor.compress(bytes(32 << 20))
    bomb = bytes(compressor.finish())
    with pytest.raises(ProtocolError):
        zstd_decompress(bomb, 1 << 20)
    assert len(zstd_decompress(bomb, 32 << 20)) == 32 << 20


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncation_and_flips_raise_protocol_error_only(codec: CompressionType) -> None:
    packed = compress(codec, SAMPLE[:20_000])
    for end in list(range(0, 40)) + list(range(40, len(packed), 97)):
        try:
            decompress(codec, packed[:end], 20_000)
        except ProtocolError as error:
            assert error.error_code == 2
    for index in range(0, len(packed), max(1, len(packed) // 200)):
        flipped = bytearray(packed)
        flipped[index] ^= 0x5A
        with contextlib.suppress(ProtocolError):
            decompress(codec, flipped, 20_000)


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(COMPRESSED), junk=st.binary(max_size=200))
def test_garbage_raises_protocol_error_only(codec: CompressionType, junk: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decompress(codec, junk, 10_000)


def test_unknown_codec_id_is_corrupt() -> None:
    assert CompressionType.from_attributes(0x1B) is CompressionType.LZ4
    with pytest.raises(ProtocolError):
        CompressionType.from_attributes(0x05)


# --- gzip ---------------------------------------------------------------------------


def test_gzip_reads_concatenated_members_and_ignores_trailing_junk() -> None:
    packed = gzip.compress(b"hello ") + gzip.compress(b"world") + b"\x00\x00"
    assert bytes(gzip_decompress(packed, 100)) == b"hello world"
    with pytest.raises(ProtocolError):
        gzip_decompress(packed, 10)


# --- snappy -------------------------------------------------------------------------


def _xerial_as_java_writes_it(data: bytes, block_size: int = 32 * 1024) -> bytes:
    """Built from the xerial spec, independently of the code under test."""
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for start in range(0, len(data), block_size):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + block_size]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def test_snappy_reads_java_xerial_framing() -> None:
    assert bytes(snappy_decompress(_xerial_as_java_writes_it(SAMPLE), len(SAMPLE))) == SAMPLE
    assert snappy_compress(SAMPLE) == _xerial_as_java_writes_it(SAMPLE)


def test_snappy_tolerates_little_endian_xerial_version_fields() -> None:
    framed = bytearray(_xerial_as_java_writes_it(b"abc" * 100))
    framed[8:16] = struct.pack("<ii", 1, 1)
    assert bytes(snappy_decompress(framed, 300)) == b"abc" * 100


def test_snappy_reads_raw_blocks() -> None:
    raw = snappy_compress(SAMPLE, xerial=False)
    assert not raw.startswith(XERIAL_MAGIC)
    assert bytes(snappy_decompress(raw, len(SAMPLE))) == SAMPLE


def test_xerial_chunk_length_out_of_bounds() -> None:
    framed = bytearray(_xerial_as_java_writes_it(b"x" * 1000))
    framed[16:20] = struct.pack(">i", 1 << 30)
    with pytest.raises(ProtocolError):
        snappy_decompress(framed, 10_000)


# --- lz4 ----------------------------------------------------------------------------


def test_xxh32_known_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    import xxhash

    for size in (0, 3, 4, 15, 16, 17, 40):
        data = os.urandom(size)
        assert xxh32(data) == xxhash.xxh32(data).intdigest()


def test_lz4_frame_is_what_kafka_java_writes() -> None:
    frame = lz4_compress(b"kafka" * 100)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] == 0x60  # version 01, independent blocks, no checksums, no size
    assert frame[5] == 0x40  # 64 KiB blocks
    assert frame[6] == (xxh32(frame[4:6]) >> 8) & 0xFF
    assert frame.endswith(b"\x00\x00\x00\x00")


def test_lz4_legacy_header_checksum_covers_the_magic() -> None:
    frame = lz4_compress(SAMPLE, legacy_header_checksum=True)
    assert frame[6] == (xxh32(frame[0:6]) >> 8) & 0xFF
    assert bytes(lz4_decompress(frame, len(SAMPLE), legacy_header_checksum=True)) == SAMPLE
    with pytest.raises(ProtocolError):
        lz4_decompress(frame, len(SAMPLE))
    # A magic-0 reader also accepts the correct checksum, as kafka-python's does.
    fixed = lz4_compress(SAMPLE)
    assert bytes(lz4_decompress(fixed, len(SAMPLE), legacy_header_checksum=True)) == SAMPLE


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"content_checksum": True, "block_checksum": True},
        {"store_size": True},
        {"block_linked": True},
        {"block_size": 0x07},
    ],
)
def test_lz4_reads_frames_written_by_python_lz4(options: dict[str, object]) -> None:
    import lz4.frame as frame_module

    frame = frame_module.compress(SAMPLE, **options)
    assert bytes(lz4_decompress(frame, len(SAMPLE))) == SAMPLE
    with pytest.raises(ProtocolError):
        lz4_decompress(frame, len(SAMPLE) - 1)
    assert frame_module.decompress(lz4_compress(SAMPLE)) == SAMPLE


def test_lz4_interop_with_kafka_python_codec() -> None:
    import kafka.codec as codec

    # The test extras install lz4 and xxhash, which kafka-python needs for lz4.
    assert codec.has_lz4() and codec.xxhash is not None
    assert bytes(lz4_decompress(codec.lz4_encode(SAMPLE), len(SAMPLE))) == SAMPLE
    assert codec.lz4_decode(lz4_compress(SAMPLE)) == SAMPLE
    legacy = codec.lz4_encode_old_kafka(SAMPLE)
    assert bytes(lz4_decompress(legacy, len(SAMPLE), legacy_header_checksum=True)) == SAMPLE
    assert codec.lz4_decode_old_kafka(lz4_compress(SAMPLE, legacy_header_checksum=True)) == SAMPLE


def test_snappy_and_zstd_interop_with_kafka_python_codec() -> None:
    import kafka.codec as codec

    assert codec.has_snappy() and codec.has_zstd()  # installed by the test extras
    assert bytes(snappy_decompress(codec.snappy_encode(SAMPLE), len(SAMPLE))) == SAMPLE
    assert codec.snappy_decode(snappy_compress(SAMPLE)) == SAMPLE
    assert bytes(zstd_decompress(codec.zstd_encode(SAMPLE), len(SAMPLE))) == SAMPLE
    assert codec.zstd_decode(compress(CompressionType.ZSTD, SAMPLE)) == SAMPLE
