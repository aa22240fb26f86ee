"""RecordBatch v2: round trips, kafka-python in both directions, control records."""

from __future__ import annotations

import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from strom.protocol.compression import CompressionType
from strom.protocol.errors import ProtocolError
from strom.protocol.records import (
    ControlRecordType,
    RecordBatchBuilder,
    TimestampType,
    build_control_batch,
    build_record_batch,
    decode_batch,
    decode_records,
    parse_control_record,
    read_batch_header,
    validate_crc,
)
from strom.protocol.records.varint import encode_varint, read_varint, read_varlong
from tests.unit.protocol.records_strategies import (
    ALL_CODECS,
    CODECS,
    V2_RECORDS,
    as_bytes,
    kafka_python_records,
)

RecordTuple = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]


def _ours(raw: bytes | bytearray) -> list[tuple[object, ...]]:
    return [
        (
            record.offset, record.timestamp, as_bytes(record.key), as_bytes(record.value),
            [(key, as_bytes(value)) for key, value in record.headers],
        )
        for record in decode_batch(raw).records
    ]


def _expected(records: list[RecordTuple], base_offset: int = 0) -> list[tuple[object, ...]]:
    return [
        (base_offset + index, timestamp, key, value, headers)
        for index, (key, value, headers, timestamp) in enumerate(records)
    ]


@settings(max_examples=60, deadline=None)
@given(records=V2_RECORDS, codec=ALL_CODECS, base_offset=st.integers(0, 2**40))
def test_round_trip(records: list[RecordTuple], codec: CompressionType, base_offset: int) -> None:
    raw = build_record_batch(records, compression=codec, base_offset=base_offset)
    header = validate_crc(raw)
    assert header.records_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert header.base_timestamp == records[0][3]
    assert header.max_timestamp == max(record[3] for record in records)
    assert header.compression == codec
    assert header.size == len(raw)
    assert _ours(raw) == _expected(records, base_offset)


@settings(max_examples=30, deadline=None)
@given(records=V2_RECORDS, codec=CODECS)
def test_kafka_python_reads_what_strom_writes(records: list[RecordTuple], codec: CompressionType) -> None:
    raw = build_record_batch(
        records, compression=codec, producer_id=7, producer_epoch=3, base_sequence=11,
    )
    batch = DefaultRecordBatch(bytes(raw))
    assert batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 11)
    assert kafka_python_records(raw) == _expected(records)


@settings(max_examples=30, deadline=None)
@given(records=V2_RECORDS, codec=CODECS)
def test_strom_reads_what_kafka_python_writes(records: list[RecordTuple], codec: CompressionType) -> None:
    builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 30)
    for index, (key, value, headers, timestamp) in enumerate(records):
        builder.append(index, timestamp, key, value, headers)
    raw = bytes(builder.build())
    assert _ours(raw) == _expected(records)


def test_transactional_producer_fields_and_attributes() -> None:
    raw = build_record_batch(
        [(b"k", b"v", [], 5)], producer_id=1234, producer_epoch=5, base_sequence=42,
        is_transactional=True, partition_leader_epoch=9, compression=CompressionType.LZ4,
    )
    header = read_batch_header(raw)
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1234, 5, 42)
    assert header.partition_leader_epoch == 9
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert DefaultRecordBatch(bytes(raw)).is_transactional


def test_log_append_time_batches_give_every_record_the_max_timestamp() -> None:
    raw = build_record_batch(
        [(b"a", b"1", [], 10), (b"b", b"2", [], 30)], timestamp_type=TimestampType.LOG_APPEND_TIME,
    )
    assert [record.timestamp for record in decode_batch(raw).records] == [30, 30]


def test_builder_appends_incrementally() -> None:
    builder = RecordBatchBuilder(compression=CompressionType.GZIP, base_offset=100)
    builder.append(b"k1", b"v1", [("trace", b"abc")], 1000)
    builder.append(None, None, (), 999)
    assert len(builder) == 2
    raw = builder.build()
    assert _ours(raw) == [
        (100, 1000, b"k1", b"v1", [("trace", b"abc")]),
        (101, 999, None, None, []),
    ]
    assert read_batch_header(raw).max_timestamp == 1000


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError):
        RecordBatchBuilder().build()


def test_keys_and_values_are_views_of_the_input() -> None:
    raw = bytes(build_record_batch([(b"key", b"value", [], 1)]))
    record = decode_batch(raw).records[0]
    assert isinstance(record.value, memoryview)
    assert record.value.obj is raw
    view_input = memoryview(bytearray(raw))
    assert decode_batch(view_input).records[0].value.obj is view_input.obj  # type: ignore[union-attr]


@pytest.mark.parametrize("control_type", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_control_batches(control_type: ControlRecordType) -> None:
    raw = build_control_batch(
        control_type, producer_id=77, producer_epoch=2, coordinator_epoch=13, timestamp=5,
        base_offset=40,
    )
    header = validate_crc(raw)
    assert header.is_control and header.is_transactional
    (record,) = decode_batch(raw).records
    marker = parse_control_record(record.key, record.value)
    assert marker.type == control_type and marker.version == 0
    assert marker.coordinator_epoch == 13
    (theirs,) = list(DefaultRecordBatch(bytes(raw)))
    assert theirs.type == control_type and theirs.version == 0
    assert decode_records(raw) == []
    assert len(decode_records(raw, include_control=True)) == 1


def test_control_record_parsing_edge_cases() -> None:
    future = parse_control_record(struct.pack(">hh", 0, 99), None)
    assert future.type == 99 and future.coordinator_epoch is None
    for key, value in [(b"\x00", None), (struct.pack(">hh", 0, 1), b"\x00"),
                       (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1))]:
        with pytest.raises(Exception) as caught:
            parse_control_record(key, value)
        assert caught.type.__name__ == "ProtocolError"


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varlong_round_trip_and_kafka_python_encoding(value: int) -> None:
    from kafka.record.util import encode_varint as theirs

    encoded = encode_varint(value)
    assert read_varlong(encoded, 0) == (value, len(encoded))
    out = bytearray()
    theirs(value, out.append)
    assert bytes(out) == encoded
    if -(2**31) <= value < 2**31:
        assert read_varint(encoded, 0) == (value, len(encoded))


def test_every_table_encoded_varint_is_kafka_pythons() -> None:
    """Values up to the 2-byte table's edge (and past it) encode as Kafka clients write them."""
    from kafka.record.util import encode_varint as theirs

    for value in range(-8300, 8300):
        out = bytearray()
        theirs(value, out.append)
        assert encode_varint(value) == bytes(out), value


def test_negative_two_byte_record_length_is_corrupt() -> None:
    raw = bytearray(build_record_batch([(b"k", b"v" * 100, [], 1)]))
    raw[61:63] = b"\x81\x01"  # zigzag 129 = -65
    with pytest.raises(ProtocolError) as caught:
        decode_batch(raw, verify_crc=False)
    assert caught.value.error_code == 2


def _kafka_python_section(records: list[tuple[object, ...]]) -> bytes:
    """The records section kafka-python's builder writes (everything after the header)."""
    theirs = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for index, (key, value, headers, timestamp) in enumerate(records):
        theirs.append(index, timestamp, key, value, headers)
    return bytes(theirs.build())[61:]


@settings(max_examples=150, deadline=None)
@given(records=V2_RECORDS, big_size=st.integers(7990, 8200), run=st.integers(1, 140),
       repeat=st.booleans())
def test_kept_and_encoded_records_write_what_kafka_python_writes(
    records: list[RecordTuple], big_size: int, run: int, repeat: bool,
) -> None:
    """Key-less, header-less ``bytes`` records are kept until ``build`` and laid out in
    bulk; every other record is encoded when appended. Either way the section must be
    kafka-python's, byte for byte: values around 8000 and 8192 bytes cross the kept
    and cached-varint limits, runs of one timestamp cross the one-byte offset delta."""
    big = bytes(range(256)) * (big_size // 256) + b"z" * (big_size % 256)
    if repeat:  # equal timestamps: long runs of kept records
        records = [(None, value, [], records[0][3]) for _, value, _, _ in records]
    mixed: list[tuple[object, ...]] = [
        *records, (None, big, [], 5), (big, None, [], 5),
        *[(None, b"r%d" % i, [], records[0][3]) for i in range(run)],
        (None, bytearray(b"mutable"), [], records[0][3]), (None, None, [], records[0][3]),
        (None, b"after", [], -(2**40)), (None, b"last", [], records[0][3]),
    ]
    ours = RecordBatchBuilder(base_offset=7)
    for key, value, headers, timestamp in mixed:
        ours.append(key, value, headers, timestamp)  # type: ignore[arg-type]
    raw = ours.build()
    assert bytes(raw)[61:] == _kafka_python_section(mixed)
    assert len(raw) == ours.size_in_bytes
    assert _ours(raw) == _expected([(k, bytes(v) if isinstance(v, bytearray) else v, h, t)  # type: ignore[misc]
                                    for k, v, h, t in mixed], base_offset=7)


def test_append_value_keeps_records_of_the_current_millisecond() -> None:
    """The producer's per-record call: now as the timestamp, exact sizes, limits kept."""
    builder = RecordBatchBuilder()
    before = time.time_ns() // 1_000_000
    values = [b"v%d" % i * (i % 50) for i in range(300)]
    for value in values:
        assert builder.append_value(value, 1 << 20)
    after = time.time_ns() // 1_000_000
    size = builder.size_in_bytes
    assert not builder.append_value(b"x" * 100, size + 10)  # 100 bytes need 108
    assert builder.size_in_bytes == size and len(builder) == 300
    raw = builder.build()
    assert len(raw) == size
    decoded = decode_batch(raw).records
    assert all(before <= record.timestamp <= after for record in decoded)
    assert bytes(raw)[61:] == _kafka_python_section(
        [(None, value, [], record.timestamp) for value, record in zip(values, decoded, strict=True)])


def test_a_records_exact_size_decides_whether_it_fits() -> None:
    builder = RecordBatchBuilder()
    assert builder.try_append(None, b"x" * 5000, (), 1, 100)  # the first always goes in
    size = builder.size_in_bytes
    # attributes, timestamp delta, offset delta, null key, value length (2), header count
    body = 1 + 1 + 1 + 1 + 2 + 100 + 1
    record = 2 + body  # the length varint of 107 takes 2 bytes
    assert not builder.try_append(None, b"y" * 100, (), 1, size + record - 1)
    assert not builder.try_append(b"k", b"y" * 100, (), 1, size + record)  # the key's byte: no room
    assert builder.size_in_bytes == size and len(builder) == 1
    assert builder.try_append(None, b"y" * 100, (), 1, size + record)
    assert builder.size_in_bytes == size + record == len(builder.build())
