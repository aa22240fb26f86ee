"""The broker's fast paths: headers, CRC spans, in-place rewrites, hostile input."""

from __future__ import annotations

import contextlib
import struct
import zlib

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from strom.protocol.compression import CompressionType
from strom.protocol.errors import ProtocolError
from strom.protocol.records import (
    TimestampType,
    build_message_set,
    build_record_batch,
    decode_records,
    iter_batches,
    read_batch_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_crc,
)
from tests.unit.protocol.records_strategies import kafka_python_records

V2 = bytes(build_record_batch(
    [(b"key", b"value", [("h", b"1")], 1000), (None, b"v2", [], 1005)],
    base_offset=10, producer_id=5, producer_epoch=1, base_sequence=3,
))
V2_GZIP = bytes(build_record_batch(
    [(b"key", b"value" * 30, [], 1000)] * 3, compression=CompressionType.GZIP
))
V1 = bytes(build_message_set([(b"k", b"v", 123)], magic=1, base_offset=4))
V0 = bytes(build_message_set([(b"k", b"v", None)], magic=0, base_offset=4))
V1_SNAPPY = bytes(build_message_set(
    [(b"k", b"v" * 50, 123)] * 4, magic=1, compression=CompressionType.SNAPPY
))
ALL = {"v2": V2, "v2-gzip": V2_GZIP, "v1": V1, "v0": V0, "v1-snappy": V1_SNAPPY}


def test_v2_header_fields_match_kafka_python() -> None:
    header = read_batch_header(V2)
    theirs = DefaultRecordBatch(V2)
    assert header.base_offset == theirs.base_offset == 10
    assert header.magic == 2
    assert header.crc == theirs.crc
    assert header.records_count == 2
    assert header.last_offset_delta == 1 and header.next_offset == 12
    assert header.base_timestamp == 1000 and header.max_timestamp == 1005
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 1, 3)
    assert header.size == len(V2) == theirs.size_in_bytes
    assert header.compression == CompressionType.NONE
    assert not header.is_transactional and not header.is_control
    assert not header.has_delete_horizon


def test_legacy_header_fields() -> None:
    v1 = read_batch_header(V1)
    assert (v1.magic, v1.base_offset, v1.max_timestamp, v1.records_count) == (1, 4, 123, 1)
    assert v1.timestamp_type == TimestampType.CREATE_TIME and v1.next_offset == 5
    v0 = read_batch_header(V0)
    assert (v0.magic, v0.max_timestamp, v0.timestamp_type) == (0, -1, TimestampType.NO_TIMESTAMP_TYPE)
    wrapper = read_batch_header(V1_SNAPPY)
    assert wrapper.records_count == -1 and wrapper.base_offset == 3
    assert wrapper.compression == CompressionType.SNAPPY


def test_crc_spans_are_exactly_what_kafka_specifies() -> None:
    header = read_batch_header(V2)
    assert header.crc == crc32c(V2[21:])
    v1 = read_batch_header(V1)
    assert v1.crc == zlib.crc32(V1[16:])
    assert read_batch_header(V0).crc == zlib.crc32(V0[16:])


@pytest.mark.parametrize("name", list(ALL))
def test_flipping_a_byte_breaks_the_crc_exactly_inside_its_span(name: str) -> None:
    """Offset (0-7) and v2's leader epoch (12-15) are outside the CRC; all else is checked."""
    raw = ALL[name]
    outside = set(range(8)) | (set(range(12, 16)) if name.startswith("v2") else set())
    for index in range(len(raw)):
        flipped = bytearray(raw)
        flipped[index] ^= 0x01
        if index in outside:
            validate_crc(flipped)
            continue
        with pytest.raises(ProtocolError) as caught:
            validate_crc(flipped)
        assert caught.value.error_code == 2


@pytest.mark.parametrize("name", list(ALL))
def test_truncation_at_every_position_raises_protocol_error(name: str) -> None:
    raw = ALL[name]
    for end in range(len(raw)):
        with pytest.raises(ProtocolError) as caught:
            validate_crc(raw[:end])
        assert caught.value.error_code == 2
        assert list(iter_batches(raw[:end])) == []
        assert decode_records(raw[:end]) == []


@pytest.mark.parametrize("name", list(ALL))
def test_flipped_bytes_never_raise_anything_but_protocol_error(name: str) -> None:
    raw = ALL[name]
    for index in range(len(raw)):
        for mask in (0x01, 0x80, 0xFF):
            flipped = bytearray(raw)
            flipped[index] ^= mask
            for verify in (True, False):
                with contextlib.suppress(ProtocolError):
                    decode_records(flipped, verify_crc=verify, max_uncompressed_size=1 << 16)


@settings(max_examples=200, deadline=None)
@given(junk=st.binary(min_size=0, max_size=120), prefix=st.sampled_from(list(ALL.values())))
def test_garbage_never_raises_anything_but_protocol_error(junk: bytes, prefix: bytes) -> None:
    for buf in (junk, prefix[:61] + junk, prefix[:17] + junk):
        with contextlib.suppress(ProtocolError):
            decode_records(buf, verify_crc=False, max_uncompressed_size=1 << 16)


def test_impossible_lengths_are_corrupt() -> None:
    for batch_length in (-1, -(2**31), 0, 48):
        raw = bytearray(V2)
        struct.pack_into(">i", raw, 8, batch_length)
        with pytest.raises(ProtocolError) as caught:
            read_batch_header(raw)
        assert caught.value.error_code == 2
        with pytest.raises(ProtocolError):
            list(iter_batches(raw))
    too_long = bytearray(V2)
    struct.pack_into(">i", too_long, 8, len(V2))
    with pytest.raises(ProtocolError):
        read_batch_header(too_long)
    assert list(iter_batches(too_long)) == []  # looks like a partial batch: stop
    bad_magic = bytearray(V2)
    bad_magic[16] = 3
    with pytest.raises(ProtocolError):
        read_batch_header(bad_magic)


def test_max_batch_size_is_message_too_large() -> None:
    with pytest.raises(ProtocolError) as caught:
        read_batch_header(V2, max_batch_size=len(V2) - 1)
    assert caught.value.error_code == 10
    with pytest.raises(ProtocolError) as caught:
        list(iter_batches(V2 + V2[:20], max_batch_size=len(V2) - 1))
    assert caught.value.error_code == 10
    assert read_batch_header(V2, max_batch_size=len(V2)).size == len(V2)


def test_iter_batches_walks_mixed_magics_and_stops_at_a_partial_tail() -> None:
    buf = V0 + V1 + V2 + V2_GZIP + V1_SNAPPY + V2[:-1]
    found = list(iter_batches(buf))
    assert [header.magic for _, header in found] == [0, 1, 2, 2, 1]
    positions = [pos for pos, _ in found]
    assert positions == [0, len(V0), len(V0) + len(V1), len(V0) + len(V1) + len(V2),
                         len(V0) + len(V1) + len(V2) + len(V2_GZIP)]
    for pos, _ in found:
        validate_crc(buf, pos)
    assert len(decode_records(buf)) == 1 + 1 + 2 + 3 + 4


@settings(max_examples=50, deadline=None)
@given(base_offset=st.integers(0, 2**62), epoch=st.integers(-1, 2**31 - 1))
def test_set_base_offset_and_leader_epoch_keep_the_crc(base_offset: int, epoch: int) -> None:
    raw = bytearray(V2_GZIP)
    set_base_offset(raw, 0, base_offset)
    set_partition_leader_epoch(raw, 0, epoch)
    header = validate_crc(raw)
    assert header.base_offset == base_offset and header.partition_leader_epoch == epoch
    assert raw[12 + 4 :] == V2_GZIP[12 + 4 :] or raw[17:] == V2_GZIP[17:]
    assert [record.offset for record in decode_records(raw)] == [base_offset + i for i in range(3)]
    plain = bytearray(V1)
    set_base_offset(memoryview(plain), 0, base_offset)
    assert validate_crc(plain).base_offset == base_offset


def test_set_base_offset_in_a_buffer_of_batches() -> None:
    buf = bytearray(V2 + V2_GZIP)
    set_base_offset(buf, len(V2), 99)
    assert [header.base_offset for _, header in iter_batches(buf)] == [10, 99]
    with pytest.raises(ValueError):
        set_base_offset(bytearray(V1_SNAPPY), 0, 5)


def test_set_log_append_time_recomputes_the_crc() -> None:
    raw = bytearray(V2_GZIP)
    set_log_append_time(raw, 0, 123456)
    header = validate_crc(raw)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 123456
    assert header.compression == CompressionType.GZIP
    assert all(record.timestamp == 123456 for record in decode_records(raw))
    assert DefaultRecordBatch(bytes(raw)).validate_crc()
    assert [row[1] for row in kafka_python_records(raw)] == [123456] * 3
