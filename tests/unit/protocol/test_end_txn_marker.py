"""build_end_txn_marker: Kafka's COMMIT/ABORT control batch, byte by byte."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch

from strom.protocol.records import (
    END_TXN_MARKER_SIZE,
    ControlRecordType,
    build_end_txn_marker,
    decode_batch,
    parse_control_record,
    validate_crc,
)


@pytest.mark.parametrize(("commit", "control_type"),
                         [(True, ControlRecordType.COMMIT), (False, ControlRecordType.ABORT)])
def test_marker_parses_back_with_kafkas_fields(commit: bool, control_type: ControlRecordType) -> None:
    raw = build_end_txn_marker(4321, 7, commit, 19, 1_700_000_000_123)
    assert len(raw) == END_TXN_MARKER_SIZE == 78
    header = validate_crc(raw)  # raises on a wrong CRC
    assert header.is_control and header.is_transactional
    assert header.attributes == 0x30  # transactional | control, no compression, CreateTime
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4321, 7, -1)
    assert header.records_count == 1 and header.last_offset_delta == 0
    assert header.base_timestamp == header.max_timestamp == 1_700_000_000_123
    (record,) = decode_batch(raw).records
    assert bytes(record.key or b"") == struct.pack(">hh", 0, control_type)
    assert bytes(record.value or b"") == struct.pack(">hi", 0, 19)
    marker = parse_control_record(record.key, record.value)
    assert (marker.type, marker.version, marker.coordinator_epoch) == (control_type, 0, 19)
    (theirs,) = list(DefaultRecordBatch(bytes(raw)))  # kafka-python's reader agrees
    assert theirs.type == control_type


def test_markers_differ_only_where_the_fields_do() -> None:
    commit = build_end_txn_marker(1, 0, True, 0, 5)
    abort = build_end_txn_marker(1, 0, False, 0, 5)
    differing = [at for at, (a, b) in enumerate(zip(commit, abort, strict=True)) if a != b]
    # The CRC (bytes 17-20) and the control type's low byte: the 61-byte header, then the
    # record's length, attributes, timestamp delta, offset delta and key length varints,
    # then the key's int16 version and int16 type.
    assert [at for at in differing if not 17 <= at < 21] == [61 + 5 + 3]
