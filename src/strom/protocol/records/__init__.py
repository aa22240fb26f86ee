"""Kafka's on-disk and on-wire record formats: RecordBatch v2 and legacy message sets.

The same bytes travel from a producer's request to a segment file to a fetch
response, so the broker's path (``iter_batches``, ``read_batch_header``,
``validate_crc``, ``set_base_offset``, ``set_log_append_time``, ``legacy.assign_offsets``)
never decodes records; clients and tests use the builders and full decoders.

Modules: ``header`` (the fixed fields of every magic, CRC spans, in-place rewrites),
``v2`` (RecordBatch v2 records, builder, control records), ``legacy`` (magic 0/1
message sets), ``varint`` (zigzag varints).
"""

from __future__ import annotations

from strom.protocol.records.header import (
    BatchHeader,
    TimestampType,
    compute_crc,
    iter_batches,
    read_batch_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_crc,
)
from strom.protocol.records.legacy import assign_offsets, build_message_set, decode_message
from strom.protocol.records.v2 import (
    DEFAULT_MAX_UNCOMPRESSED_SIZE,
    END_TXN_MARKER_SIZE,
    ControlRecord,
    ControlRecordType,
    DecodedBatch,
    Record,
    RecordBatchBuilder,
    build_control_batch,
    build_end_txn_marker,
    build_record_batch,
    decode_batch,
    parse_control_record,
)

Buffer = bytes | bytearray | memoryview


def decode_records(
    buf: Buffer,
    *,
    max_uncompressed_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE,
    verify_crc: bool = True,
    include_control: bool = False,
) -> list[Record]:
    """Every record in a buffer of entries of any magic, as a fetch response holds.

    A trailing partial entry is ignored; control batches (transaction markers) are
    left out unless ``include_control``.
    """
    records: list[Record] = []
    for pos, header in iter_batches(buf):
        if header.magic == 2:
            if header.is_control and not include_control:
                continue
            records += decode_batch(
                buf, pos, max_uncompressed_size=max_uncompressed_size, verify_crc=verify_crc
            ).records
        else:
            records += decode_message(
                buf, pos, max_uncompressed_size=max_uncompressed_size, verify_crc=verify_crc
            )
    return records


__all__ = [
    "DEFAULT_MAX_UNCOMPRESSED_SIZE",
    "END_TXN_MARKER_SIZE",
    "BatchHeader",
    "ControlRecord",
    "ControlRecordType",
    "DecodedBatch",
    "Record",
    "RecordBatchBuilder",
    "TimestampType",
    "assign_offsets",
    "build_control_batch",
    "build_end_txn_marker",
    "build_message_set",
    "build_record_batch",
    "compute_crc",
    "decode_batch",
    "decode_message",
    "decode_records",
    "iter_batches",
    "parse_control_record",
    "read_batch_header",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "validate_crc",
]
