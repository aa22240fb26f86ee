"""Hypothesis strategies and kafka-python helpers shared by the record tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from strom.protocol.compression import CompressionType

KEYS = st.none() | st.binary(max_size=40)
VALUES = st.none() | st.binary(max_size=300)
HEADERS = st.lists(
    st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3
)
TIMESTAMPS = st.integers(min_value=0, max_value=2**42)
V2_RECORDS = st.lists(st.tuples(KEYS, VALUES, HEADERS, TIMESTAMPS), min_size=1, max_size=30)
LEGACY_RECORDS = st.lists(st.tuples(KEYS, VALUES, TIMESTAMPS), min_size=1, max_size=20)


def _kafka_python_has(codec: CompressionType) -> bool:
    """kafka-python needs optional packages (lz4, python-snappy, zstandard) per codec."""
    from kafka import codec as kafka_codec

    checks = {
        CompressionType.NONE: lambda: True,
        CompressionType.GZIP: kafka_codec.has_gzip,
        CompressionType.SNAPPY: kafka_codec.has_snappy,
        CompressionType.LZ4: kafka_codec.has_lz4,
        CompressionType.ZSTD: kafka_codec.has_zstd,
    }
    return bool(checks[codec]())


# Every codec is cross-checked: the test extras install what kafka-python needs for each,
# and a missing one is an error here rather than a silently narrower test.
CROSS_CHECK_CODECS = [codec for codec in CompressionType if _kafka_python_has(codec)]
if len(CROSS_CHECK_CODECS) != len(CompressionType):
    raise RuntimeError("kafka-python lacks a codec: install the test extras (pip install -e '.[test]')")
CODECS = st.sampled_from(CROSS_CHECK_CODECS)
ALL_CODECS = st.sampled_from(list(CompressionType))
LEGACY_CODECS = st.sampled_from(
    [codec for codec in CROSS_CHECK_CODECS if codec != CompressionType.ZSTD]
)


def as_bytes(view: Any) -> bytes | None:
    return None if view is None else bytes(view)


def kafka_python_records(raw: bytes | bytearray) -> list[tuple[Any, ...]]:
    """(offset, timestamp, key, value, headers) of every record, read by kafka-python."""
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(bytes(raw))
    out = []
    while True:
        batch = records.next_batch()
        if batch is None:
            return out
        assert batch.validate_crc()
        for record in batch:
            timestamp = -1 if record.timestamp is None else record.timestamp
            headers = [(key, value) for key, value in record.headers]
            out.append((record.offset, timestamp, record.key, record.value, headers))
