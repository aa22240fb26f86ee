"""The shared columnar record walker agrees with the reference decoder and refuses corrupt sections."""

from __future__ import annotations

import random

import pytest

from strom.protocol.compression import CompressionType, decompress
from strom.protocol.errors import ProtocolError
from strom.protocol.records import RecordBatchBuilder, decode_records, iter_batches
from strom.protocol.records.columnar import ArenaView, join_sections, scan_records
from strom.protocol.records.header import ATTR_COMPRESSION_MASK, V2_HEADER_SIZE


def _batches(seed: int, count: int, codec: CompressionType = CompressionType.NONE) -> bytes:
    """Batches mixing runs of equal-size records, varied sizes, null keys and values,
    headers and records of 8 KiB or more (whose length varint takes three bytes)."""
    rnd = random.Random(seed)
    out = bytearray()
    offset = 0
    while offset < count:
        builder = RecordBatchBuilder(base_offset=offset, compression=codec)
        while offset < count and builder.size_in_bytes < 16384:
            roll = rnd.random()
            key = None if roll < 0.2 else f"key-{rnd.randrange(50)}".encode()
            value = None if roll > 0.9 else bytes(rnd.choice([20, 20, 20, 20, 137, 9000]))
            headers = [("h", b"x" * rnd.randrange(3))] if roll < 0.1 else []
            builder.append(key, value, headers, 1_700_000_000_000 + rnd.randrange(-5, 100_000))
            offset += 1
        out += builder.build()
    return bytes(out)


def _scan(data: bytes) -> tuple[bytes | bytearray | memoryview, list[tuple[int, int]], list[int]]:
    pieces: list[tuple[bytes | bytearray | memoryview, int, int]] = []
    counts = []
    for pos, header in iter_batches(data):
        start, end = pos + V2_HEADER_SIZE, pos + header.size
        codec = header.attributes & ATTR_COMPRESSION_MASK
        if codec:
            inflated = decompress(CompressionType(codec), memoryview(data)[start:end], 1 << 30)
            pieces.append((inflated, 0, len(inflated)))
        else:
            pieces.append((data, start, end))
        counts.append(header.records_count)
    arena, spans = join_sections(pieces)
    return arena, spans, counts


@pytest.mark.parametrize(("seed", "codec"), [(1, CompressionType.NONE), (2, CompressionType.NONE),
                                             (3, CompressionType.LZ4), (4, CompressionType.GZIP)])
def test_columns_agree_with_the_reference_decoder(seed: int, codec: CompressionType) -> None:
    data = _batches(seed, 3000, codec)
    arena, spans, counts = _scan(data)
    columns = scan_records(ArenaView.of(arena), spans, counts)
    expected = decode_records(data)
    assert len(columns) == len(expected) == 3000
    bases = [header.base_offset for _, header in iter_batches(data)]
    base_timestamps = [header.base_timestamp for _, header in iter_batches(data)]
    for i, record in enumerate(expected):
        section = int(columns.section[i])
        assert bases[section] + int(columns.offset_delta[i]) == record.offset
        assert base_timestamps[section] + int(columns.timestamp_delta[i]) == record.timestamp
        key_start, key_length = int(columns.key_start[i]), int(columns.key_length[i])
        value_start, value_length = int(columns.value_start[i]), int(columns.value_length[i])
        assert (None if key_length < 0 else bytes(arena[key_start:key_start + key_length])) == (
            None if record.key is None else bytes(record.key))
        assert (None if value_length < 0 else bytes(arena[value_start:value_start + value_length])) == (
            None if record.value is None else bytes(record.value))
        assert columns.start[i] < columns.after_value[i] < columns.end[i]
    assert (columns.start[1:] > columns.start[:-1]).all()


def test_a_section_holding_another_record_count_than_its_batch_is_corrupt() -> None:
    arena, spans, counts = _scan(_batches(5, 200))
    with pytest.raises(ProtocolError, match="records section 0 holds"):
        scan_records(ArenaView.of(arena), spans, [counts[0] + 1, *counts[1:]])


@pytest.mark.parametrize("cut", [1, 7, 60])
def test_a_section_cut_short_is_corrupt(cut: int) -> None:
    arena, spans, _ = _scan(_batches(6, 100))
    start, end = spans[0]
    with pytest.raises(ProtocolError):
        scan_records(ArenaView.of(bytes(arena[:end - cut])), [(start, end - cut)])


def test_a_record_length_shorter_than_its_fields_is_corrupt() -> None:
    builder = RecordBatchBuilder(base_offset=0)
    builder.append(b"key", b"value", (), 0)
    section = bytearray(builder.build()[V2_HEADER_SIZE:])
    # shrink the one record's length (zigzag varint in the first byte) by 4 and drop 4 bytes
    assert section[0] < 0x80
    section[0] -= 8
    del section[-4:]
    with pytest.raises(ProtocolError, match=r"disagree|overrun"):
        scan_records(ArenaView.of(bytes(section)), [(0, len(section))])


def test_join_sections_copies_nothing_when_every_piece_is_in_one_buffer() -> None:
    data = b"0123456789"
    arena, spans = join_sections([(data, 1, 3), (data, 5, 9)])
    assert arena is data and spans == [(1, 3), (5, 9)]
    arena, spans = join_sections([(data, 1, 3), (b"abc", 0, 3)])
    assert bytes(arena) == b"12abc" and spans == [(0, 2), (2, 5)]
