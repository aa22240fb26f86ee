"""records_to_arrow against the per-record reference decoder, column by column."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.client.arrow import KAFKA_SCHEMA, KAFKA_SCHEMA_WITH_HEADERS, records_to_arrow
from strom.protocol.compression import CompressionType
from strom.protocol.errors import ProtocolError
from strom.protocol.messages.fetch_response import AbortedTransaction
from strom.protocol.records import (
    ControlRecordType,
    TimestampType,
    build_control_batch,
    build_message_set,
    build_record_batch,
    decode_batch,
    decode_message,
    iter_batches,
)
from strom.protocol.records.header import V2_HEADER_SIZE

Row = tuple[Any, ...]

# Sizes around the varint boundaries that matter: 1/2-byte lengths (64, 8192 zigzag),
# and values of 8 KiB+ whose record length takes three bytes.
SIZES = st.sampled_from([0, 1, 5, 50, 57, 58, 63, 64, 100, 101, 300, 8200])
HEADER_LISTS = st.lists(
    st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=12)), max_size=3
)


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[Any], dict[str, Any]]:
    """A batch's records and builder options: random, or fixed-size with a small alphabet
    (records whose payload bytes look like their neighbours' length varints)."""
    count = draw(st.integers(1, 200))
    rng = random.Random(draw(st.integers(0, 2**32)))
    fixed = draw(st.booleans())
    size = draw(SIZES)
    alphabet = draw(st.sampled_from([b"", b"\xd4\x01\x00", b"\x80\x01\xd6"]))
    base_timestamp = draw(st.integers(-(2**40), 2**42))
    spread = draw(st.sampled_from([0, 100, 10_000, 2**35]))
    records = []
    for _ in range(count):
        value_size = size if fixed else rng.choice([size, 0, 3, 64, 120])
        if alphabet:
            value: bytes | None = bytes(rng.choice(alphabet) for _ in range(value_size))
        else:
            value = rng.randbytes(value_size)
        key = None if fixed or rng.random() < 0.3 else rng.randbytes(rng.randint(0, 20))
        if not fixed and rng.random() < 0.1:
            value = None
        headers = [] if fixed else draw(HEADER_LISTS)
        records.append((key, value, headers, base_timestamp + rng.randint(-spread, spread)))
    options = {
        "compression": draw(st.sampled_from(list(CompressionType))),
        "timestamp_type": draw(st.sampled_from([TimestampType.CREATE_TIME,
                                                TimestampType.LOG_APPEND_TIME])),
    }
    return records, options


def fetch(batch_specs: list[tuple[list[Any], dict[str, Any]]], first_offset: int = 0) -> bytes:
    out = bytearray()
    offset = first_offset
    for records, options in batch_specs:
        out += build_record_batch(records, base_offset=offset, **options)
        offset += len(records)
    return bytes(out)


def reference(data: bytes, start: int = 0, end: int | None = None,
              include_control: bool = False, verify_crc: bool = True) -> list[Row]:
    """(key, value, offset, timestamp ms, timestampType, headers) from the slow decoders."""
    rows: list[Row] = []
    for pos, header in iter_batches(data):
        if header.magic < 2:
            records = decode_message(data, pos, verify_crc=verify_crc)
            kind = -1 if header.magic == 0 else int(header.timestamp_type)
        elif header.is_control and not include_control:
            continue
        else:
            records = decode_batch(data, pos, verify_crc=verify_crc).records
            kind = int(header.timestamp_type)
        for record in records:
            if record.offset < start or (end is not None and record.offset >= end):
                continue
            headers = [(k, None if v is None else bytes(v)) for k, v in record.headers]
            rows.append((
                None if record.key is None else bytes(record.key),
                None if record.value is None else bytes(record.value),
                record.offset, record.timestamp, kind, headers,
            ))
    return rows


def rows(batch: pa.RecordBatch, topic: str = "t", partition: int = 7) -> list[Row]:
    columns = batch.to_pydict()
    assert set(columns["topic"]) <= {topic} and set(columns["partition"]) <= {partition}
    micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
    assert all(value % 1000 == 0 for value in micros)
    if "headers" in columns:
        headers = [[(h["key"], h["value"]) for h in hs] for hs in columns["headers"]]
    else:
        headers = [[] for _ in micros]
    return list(zip(columns["key"], columns["value"], columns["offset"],
                    [value // 1000 for value in micros], columns["timestampType"], headers,
                    strict=True))


def without_headers(expected: list[Row]) -> list[Row]:
    return [(*row[:5], []) for row in expected]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batches(), min_size=1, max_size=4), st.data())
def test_matches_the_reference_decoder(specs: list[Any], data: st.DataObject) -> None:
    raw = fetch(specs, first_offset=data.draw(st.integers(0, 2**40)))
    first = next(iter_batches(raw))[1].base_offset
    total = sum(len(records) for records, _ in specs)
    start = data.draw(st.integers(0, first + total + 1))
    end = data.draw(st.none() | st.integers(first, first + total + 1))
    cut = data.draw(st.sampled_from([0, 1, 30, 70]))  # a partial batch at the end
    raw = raw + fetch(specs[:1])[: cut] if cut else raw
    expected = reference(raw, start, end)
    with_headers = records_to_arrow("t", 7, raw, start_offset=start, end_offset=end,
                                    include_headers=True)
    assert with_headers.schema == KAFKA_SCHEMA_WITH_HEADERS
    assert rows(with_headers) == expected
    plain = records_to_arrow("t", 7, memoryview(raw), start_offset=start, end_offset=end)
    assert plain.schema == KAFKA_SCHEMA
    assert rows(plain) == without_headers(expected)


@settings(max_examples=150, deadline=None)
@given(batches(), st.data())
def test_corrupt_records_are_refused_as_the_reference_refuses_them(
    spec: tuple[list[Any], dict[str, Any]], data: st.DataObject
) -> None:
    records, options = spec
    raw = bytearray(build_record_batch(records, **{**options, "compression": CompressionType.NONE}))
    at = data.draw(st.integers(V2_HEADER_SIZE, len(raw) - 1))
    changed = raw[at] != (new := data.draw(st.integers(0, 255)))
    raw[at] = new
    try:
        expected: list[Row] | None = reference(bytes(raw), verify_crc=False)
    except ProtocolError:
        expected = None
    if expected is None:
        with pytest.raises(ProtocolError):
            records_to_arrow("t", 7, bytes(raw), include_headers=True, verify_crc=False)
    else:  # still well formed: the same records, and only the CRC tells
        decoded = records_to_arrow("t", 7, bytes(raw), include_headers=True, verify_crc=False)
        assert rows(decoded) == expected
    if changed:
        with pytest.raises(ProtocolError):
            records_to_arrow("t", 7, bytes(raw))


def test_crc_mismatch_is_corruption() -> None:
    raw = bytearray(build_record_batch([(b"k", b"v" * 10, (), 5)]))
    raw[-3] ^= 0xFF
    with pytest.raises(ProtocolError, match="CRC"):
        records_to_arrow("t", 0, bytes(raw))


def test_fixed_size_records_across_varint_boundaries() -> None:
    """Offset and timestamp deltas gain a byte at 64: record sizes change mid-batch."""
    specs: list[Any] = [([(None, bytes([i % 7]) * 100, (), 1_000 + 3 * i) for i in range(5000)], {})]
    raw = fetch(specs, first_offset=10)
    assert rows(records_to_arrow("t", 7, raw)) == without_headers(reference(raw))


def test_runs_end_where_only_the_second_length_byte_differs() -> None:
    """Bodies of 107 and 235 bytes: length varints d6 01 and d6 03."""
    records = [(None, b"\xd6" * (100 if i // 5 % 2 else 228), (), 0) for i in range(60)]
    raw = fetch([(records, {})])
    assert rows(records_to_arrow("t", 7, raw)) == without_headers(reference(raw))


def test_control_batches_are_skipped_unless_asked_for() -> None:
    data = bytes(
        build_record_batch([(b"a", b"1", (), 10), (b"b", b"2", (), 11)], base_offset=0,
                           producer_id=4, producer_epoch=0, base_sequence=0, is_transactional=True)
        + build_control_batch(ControlRecordType.COMMIT, producer_id=4, producer_epoch=0,
                              coordinator_epoch=1, timestamp=12, base_offset=2)
        + build_record_batch([(b"c", b"3", (), 13)], base_offset=3)
    )
    assert [row[2] for row in rows(records_to_arrow("t", 7, data))] == [0, 1, 3]
    with_control = records_to_arrow("t", 7, data, skip_control=False, include_headers=True)
    assert rows(with_control) == reference(data, include_control=True)
    assert with_control.num_rows == 4


def test_aborted_transactions_are_left_out() -> None:
    def transactional(producer: int, offset: int, value: bytes) -> bytearray:
        return build_record_batch([(None, value, (), 1)], base_offset=offset, producer_id=producer,
                                  producer_epoch=0, base_sequence=0, is_transactional=True)

    def marker(kind: ControlRecordType, producer: int, offset: int) -> bytearray:
        return build_control_batch(kind, producer_id=producer, producer_epoch=0,
                                   coordinator_epoch=0, timestamp=2, base_offset=offset)

    data = bytes(
        transactional(1, 0, b"aborted-1") + transactional(2, 1, b"kept-1")
        + transactional(1, 2, b"aborted-2") + marker(ControlRecordType.ABORT, 1, 3)
        + marker(ControlRecordType.COMMIT, 2, 4) + transactional(1, 5, b"kept-2")
        + marker(ControlRecordType.COMMIT, 1, 6)
    )
    batch = records_to_arrow("t", 0, data, aborted=[AbortedTransaction(producer_id=1, first_offset=0)])
    assert batch.column("value").to_pylist() == [b"kept-1", b"kept-2"]
    everything = records_to_arrow("t", 0, data)  # READ_UNCOMMITTED
    assert everything.column("offset").to_pylist() == [0, 1, 2, 5]


def test_log_append_time_gives_every_record_the_batch_max_timestamp() -> None:
    raw = bytearray(build_record_batch([(None, b"x", (), 5), (None, b"y", (), -3)],
                                       timestamp_type=TimestampType.LOG_APPEND_TIME))
    batch = records_to_arrow("t", 0, bytes(raw))
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [5000, 5000]
    assert batch.column("timestampType").to_pylist() == [1, 1]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4])
def test_legacy_message_sets_between_v2_batches(magic: int, codec: CompressionType) -> None:
    data = bytes(
        build_record_batch([(b"k", b"v2-first", (("h", b"x"),), 100)], base_offset=0)
        + build_message_set([(b"a", b"legacy-1", 200), (None, None, 201)], magic=magic,
                            compression=codec, base_offset=1)
        + build_record_batch([(None, b"v2-last", (), 300)], base_offset=3)
    )
    assert rows(records_to_arrow("t", 7, data, include_headers=True)) == reference(data)
    assert rows(records_to_arrow("t", 7, data, start_offset=2)) == without_headers(reference(data, 2))


def test_empty_and_truncated_only_inputs_give_an_empty_batch() -> None:
    whole = build_record_batch([(None, b"v", (), 1)])
    for data in (b"", bytes(whole[:40]), bytes(whole[:-1])):
        for include_headers in (False, True):
            batch = records_to_arrow("t", 0, data, include_headers=include_headers)
            assert batch.num_rows == 0
            assert batch.schema == (KAFKA_SCHEMA_WITH_HEADERS if include_headers else KAFKA_SCHEMA)


def test_timestamps_beyond_the_microsecond_range_are_null() -> None:
    raw = build_record_batch([(None, b"a", (), 2**62), (None, b"b", (), 1)])
    assert records_to_arrow("t", 0, bytes(raw)).column("timestamp").cast(pa.int64()).to_pylist() == [
        None, 1000,
    ]


def test_invalid_utf8_header_key_is_corruption() -> None:
    raw = bytes(build_record_batch([(None, b"v", ((b"\xff\xfe", b"x"),), 1)]))
    with pytest.raises(ProtocolError, match="UTF-8"):
        records_to_arrow("t", 0, raw, include_headers=True)
    assert records_to_arrow("t", 0, raw).num_rows == 1


def test_schema_is_spark_kafka_source_schema() -> None:
    assert KAFKA_SCHEMA.names == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
    ]
    assert [str(field.type) for field in KAFKA_SCHEMA_WITH_HEADERS] == [
        "binary", "binary", "string", "int32", "int64", "timestamp[us, tz=UTC]", "int32",
        "list<item: struct<key: string, value: binary>>",
    ]


def test_a_record_overrunning_its_section_in_a_run_is_corruption() -> None:
    raw = bytearray(build_record_batch([(None, b"v" * size, (), 0) for size in (100, 100, 50)]))
    step = 2 + (((raw[V2_HEADER_SIZE] & 0x7F) | raw[V2_HEADER_SIZE + 1] << 7) >> 1)
    third = V2_HEADER_SIZE + 2 * step
    raw[third : third + 2] = raw[V2_HEADER_SIZE : V2_HEADER_SIZE + 2]  # claims 100 bytes
    with pytest.raises(ProtocolError):
        records_to_arrow("t", 0, bytes(raw), verify_crc=False)
