"""log_validator without a Log: validation, duplicate detection, offset assignment."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from strom.protocol.compression import CompressionType
from strom.protocol.error_codes import ErrorCode
from strom.protocol.records import (
    BatchHeader,
    ControlRecordType,
    TimestampType,
    build_control_batch,
    build_message_set,
    decode_records,
    iter_batches,
    read_batch_header,
    validate_crc,
)
from strom.storage import InvalidRecordsError
from strom.storage.log_validator import (
    assign_legacy_offsets,
    assign_offsets,
    find_duplicate,
    validate_records,
)
from strom.storage.producer_state import BatchMetadata
from tests.support.storage import batch

LIMITS = {"segment_bytes": 1 << 20, "max_message_bytes": 1 << 16}


def validate(buffer: bytes | bytearray, *, from_client: bool = True, **limits: int
             ) -> tuple[list[tuple[int, BatchHeader]], bool, bool]:
    return validate_records(buffer, **{**LIMITS, **limits}, from_client=from_client)


def error_of(buffer: bytes | bytearray, **options: int | bool) -> ErrorCode:
    with pytest.raises(InvalidRecordsError) as caught:
        validate(buffer, **options)  # type: ignore[arg-type]
    return ErrorCode(caught.value.error_code)


def test_validate_returns_every_header_and_what_follows_for_the_append() -> None:
    first, second = batch(3, tag=1), batch(2, tag=2, producer_id=5, producer_epoch=0,
                                            base_sequence=0)
    headers, legacy, idempotent = validate(first + second)
    assert [position for position, _ in headers] == [0, len(first)]
    assert [header.records_count for _, header in headers] == [3, 2]
    assert (legacy, idempotent) == (False, True)
    assert validate(first)[1:] == (False, False)
    old = build_message_set([(b"k", b"v", 1000)], magic=1)
    assert validate(old + first)[1:] == (True, False)


def test_validate_refuses_with_kafkas_error_codes() -> None:
    broken = batch(2)
    broken[-1] ^= 0xFF
    assert error_of(b"") == ErrorCode.CORRUPT_MESSAGE
    assert error_of(batch(1) + broken) == ErrorCode.CORRUPT_MESSAGE
    assert error_of(batch(1)[:-3]) == ErrorCode.CORRUPT_MESSAGE
    assert error_of(batch(1, value_size=600), max_message_bytes=500) \
        == ErrorCode.MESSAGE_TOO_LARGE
    assert error_of(batch(1, value_size=400) * 3, segment_bytes=1000) \
        == ErrorCode.RECORD_LIST_TOO_LARGE


def test_record_count_must_match_the_last_offset_delta() -> None:
    lying = batch(3)
    struct.pack_into(">i", lying, 57, 2)  # records_count
    struct.pack_into(">I", lying, 17, crc32c(bytes(lying[21:])))  # a valid CRC over the lie
    assert error_of(lying) == ErrorCode.INVALID_RECORD


def test_control_batches_only_from_the_broker_itself() -> None:
    marker = build_control_batch(ControlRecordType.COMMIT, producer_id=5, producer_epoch=0,
                                 coordinator_epoch=0, timestamp=1)
    assert error_of(marker) == ErrorCode.INVALID_RECORD
    assert validate(marker, from_client=False)[2]


def test_find_duplicate_asks_only_for_batches_with_a_producer_id() -> None:
    plain = batch(1)
    retried = batch(2, producer_id=5, producer_epoch=0, base_sequence=4)
    fresh = batch(1, producer_id=6, producer_epoch=0, base_sequence=0)
    headers, _, _ = validate(plain + fresh + retried)
    original = BatchMetadata(4, 5, 100, 101, 1001)
    asked: list[int] = []

    def lookup(header: BatchHeader) -> BatchMetadata | None:
        asked.append(header.producer_id)
        return original if header.producer_id == 5 else None

    assert find_duplicate(headers, lookup) is original
    assert asked == [6, 5]
    assert find_duplicate(validate(plain + fresh)[0], lookup) is None


def test_assign_offsets_writes_offsets_and_epoch_in_place() -> None:
    buffer = batch(3, base_offset=777) + batch(2, producer_id=5, producer_epoch=1,
                                                base_sequence=0, partition_leader_epoch=9)
    headers, _, _ = validate(buffer)
    batches, producer_batches = assign_offsets(buffer, headers, 40, 7, -1)
    written = [header for _, header in iter_batches(buffer)]
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in written] \
        == [(40, 42, 7), (43, 44, 7)]
    assert [(b.position, b.last_offset, b.size) for b in batches] \
        == [(0, 42, written[0].size), (written[0].size, 44, written[1].size)]
    assert [b.max_timestamp for b in batches] == [1002, 1001]
    assert len(producer_batches) == 1
    assert producer_batches[0].header == read_batch_header(buffer, written[0].size)
    for position, _ in headers:
        validate_crc(buffer, position)  # the CRC does not cover offset and epoch


def test_assign_offsets_keeps_the_epoch_and_stamps_log_append_time() -> None:
    buffer = batch(2, partition_leader_epoch=3, producer_id=5, producer_epoch=0,
                   base_sequence=0)
    headers, _, _ = validate(buffer)
    batches, producer_batches = assign_offsets(buffer, headers, 0, -1, 55_555)
    header = validate_crc(buffer)
    assert header.partition_leader_epoch == 3
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == batches[0].max_timestamp == 55_555
    assert producer_batches[0].header == header


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP])
def test_legacy_entries_get_contiguous_offsets(compression: CompressionType) -> None:
    legacy = build_message_set([(b"k", b"v%d" % i, 1000 + i) for i in range(3)], magic=1,
                               compression=compression, base_offset=90)
    buffer = batch(2) + legacy + batch(1)
    headers, is_legacy, _ = validate(buffer)
    assert is_legacy
    rewritten = assign_legacy_offsets(buffer, headers, 10, max_uncompressed_size=1 << 20)
    headers = list(iter_batches(rewritten))
    batches, _ = assign_offsets(rewritten, headers, 10, -1, -1)
    assert [b.last_offset for b in batches] == ([11, 12, 13, 14, 15]
                                                if compression == CompressionType.NONE
                                                else [11, 14, 15])
    assert [r.offset for r in decode_records(rewritten)] == list(range(10, 16))
