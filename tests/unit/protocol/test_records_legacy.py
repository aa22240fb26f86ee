"""Message sets v0/v1: round trips, kafka-python in both directions, offset assignment."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from strom.protocol.compression import CompressionType, compress
from strom.protocol.errors import ProtocolError
from strom.protocol.records import (
    TimestampType,
    assign_offsets,
    build_message_set,
    decode_message,
    decode_records,
    iter_batches,
    read_batch_header,
    set_log_append_time,
    validate_crc,
)
from strom.protocol.records.legacy import append_message
from tests.unit.protocol.records_strategies import (
    LEGACY_CODECS,
    LEGACY_RECORDS,
    as_bytes,
    kafka_python_records,
)

LegacyTuple = tuple[bytes | None, bytes | None, int]


def _ours(raw: bytes | bytearray) -> list[tuple[object, ...]]:
    return [
        (record.offset, record.timestamp, as_bytes(record.key), as_bytes(record.value), [])
        for record in decode_records(raw)
    ]


def _expected(records: list[LegacyTuple], magic: int, base: int = 0) -> list[tuple[object, ...]]:
    return [
        (base + index, timestamp if magic == 1 else -1, key, value, [])
        for index, (key, value, timestamp) in enumerate(records)
    ]


@settings(max_examples=40, deadline=None)
@given(records=LEGACY_RECORDS, magic=st.sampled_from([0, 1]), codec=LEGACY_CODECS,
       base=st.integers(0, 2**40))
def test_round_trip_and_kafka_python_reads_it(
    records: list[LegacyTuple], magic: int, codec: CompressionType, base: int
) -> None:
    raw = build_message_set(records, magic=magic, compression=codec, base_offset=base)
    for pos, header in iter_batches(raw):
        validate_crc(raw, pos)
        assert header.magic == magic
    assert _ours(raw) == _expected(records, magic, base)
    assert kafka_python_records(raw) == _expected(records, magic, base)


@settings(max_examples=40, deadline=None)
@given(records=LEGACY_RECORDS, magic=st.sampled_from([0, 1]), codec=LEGACY_CODECS)
def test_strom_reads_kafka_python_and_assigns_offsets(
    records: list[LegacyTuple], magic: int, codec: CompressionType
) -> None:
    builder = LegacyRecordBatchBuilder(magic, int(codec), 1 << 30)
    for index, (key, value, timestamp) in enumerate(records):
        builder.append(index, timestamp, key, value)
    raw = bytes(builder.build())
    assert _ours(raw) == _expected(records, magic)
    rewritten, next_offset = assign_offsets(raw, 1000)
    assert next_offset == 1000 + len(records)
    assert _ours(rewritten) == _expected(records, magic, 1000)
    assert kafka_python_records(rewritten) == _expected(records, magic, 1000)


def test_v1_wrapper_with_relative_offsets_is_reassigned_without_recompressing() -> None:
    raw = build_message_set(
        [(b"k", b"v" * 100, 5)] * 5, magic=1, compression=CompressionType.GZIP, base_offset=0
    )
    rewritten, next_offset = assign_offsets(raw, 500)
    assert next_offset == 505
    assert rewritten[12:] == raw[12:]  # only the offset field changed
    assert read_batch_header(rewritten).base_offset == 504


def test_v0_wrapper_is_recompressed_with_absolute_inner_offsets() -> None:
    raw = build_message_set([(None, b"x", None)] * 3, magic=0, compression=CompressionType.LZ4)
    rewritten, _ = assign_offsets(raw, 70)
    validate_crc(rewritten)
    assert [record.offset for record in decode_message(rewritten)] == [70, 71, 72]
    assert read_batch_header(rewritten).base_offset == 72


def test_log_append_time_on_a_v1_wrapper_applies_to_inner_messages() -> None:
    raw = build_message_set(
        [(b"a", b"1", 10), (b"b", b"2", 20)], magic=1, compression=CompressionType.GZIP
    )
    set_log_append_time(raw, 0, 999)
    header = validate_crc(raw)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [record.timestamp for record in decode_message(raw)] == [999, 999]
    assert [row[1] for row in kafka_python_records(raw)] == [999, 999]


def test_plain_v1_log_append_time() -> None:
    raw = build_message_set([(b"a", b"1", 10)], magic=1)
    set_log_append_time(raw, 0, 77)
    assert decode_message(raw)[0].timestamp == 77
    with pytest.raises(ValueError):
        set_log_append_time(build_message_set([(b"a", b"1", 10)], magic=0), 0, 77)


def test_nested_compression_is_corrupt() -> None:
    inner = build_message_set([(b"a", b"1", 1)], magic=1, compression=CompressionType.GZIP)

    nested = bytearray()
    append_message(nested, 0, 1, int(CompressionType.GZIP), 1, None,
                   compress(CompressionType.GZIP, inner))
    with pytest.raises(ProtocolError) as caught:
        decode_message(nested)
    assert caught.value.error_code == 2


def test_inner_message_of_another_magic_is_corrupt() -> None:
    inner = build_message_set([(b"a", b"1", 1)], magic=0)
    wrapper = bytearray()
    append_message(wrapper, 0, 1, int(CompressionType.GZIP), 1, None,
                   compress(CompressionType.GZIP, inner))
    with pytest.raises(ProtocolError):
        decode_message(wrapper)


def test_zstd_is_refused_for_legacy_magics() -> None:
    with pytest.raises(ValueError):
        build_message_set([(b"a", b"1", 1)], magic=1, compression=CompressionType.ZSTD)
