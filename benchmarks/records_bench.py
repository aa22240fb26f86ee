"""Record batch throughput: Strom against kafka-python, measured in the same run.

Each ``bench_*`` function returns ``(label, seconds_per_op)`` rows, best of several
runs with ``time.perf_counter``; ``benchmarks/codec.py`` imports them, ``main()``
prints them. The whole module runs in well under a minute on two cores.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from strom.protocol.compression import CompressionType
from strom.protocol.records import build_record_batch, decode_batch, iter_batches, validate_crc

Row = tuple[str, float]

MIB = 1 << 20
HEADER_BATCHES = 1000
DISTINCT_BATCHES = 50  # 50 MiB buffer walked 20 times: 1,000 batches per op
DECODE_RECORDS = 10_000
REPEATS = 5


def _best(run: Callable[[], object], repeats: int = REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _payloads(count: int, value_size: int, seed: int) -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta", b"eta", b"theta"]
    out = []
    for index in range(count):
        value = b" ".join(rng.choice(words) for _ in range(value_size // 5))[:value_size]
        out.append((b"key-%08d" % index, value))
    return out


def _one_mib_batch(seed: int) -> bytes:
    """A v2 batch of ~1 MiB: 1 KiB values, uncompressed, so the CRC covers 1 MiB."""
    records = [(key, value, (), 1_700_000_000_000 + i)
               for i, (key, value) in enumerate(_payloads(1010, 1024, seed))]
    return bytes(build_record_batch(records))


def bench_batch_headers() -> list[Row]:
    """Parse the header and check the CRC of 1,000 batches of 1 MiB; seconds per batch."""
    buffer = b"".join(_one_mib_batch(seed) for seed in range(DISTINCT_BATCHES))
    rounds = HEADER_BATCHES // DISTINCT_BATCHES

    def strom() -> None:
        for _ in range(rounds):
            for pos, _header in iter_batches(buffer):
                validate_crc(buffer, pos)

    def kafka_python() -> None:
        for _ in range(rounds):
            records = MemoryRecords(buffer)
            while (batch := records.next_batch()) is not None:
                if not batch.validate_crc():
                    raise AssertionError("kafka-python rejected a batch")

    return [
        ("strom: header + CRC, 1 MiB v2 batch", _best(strom, 3) / HEADER_BATCHES),
        ("kafka-python: header + CRC, 1 MiB v2 batch", _best(kafka_python, 3) / HEADER_BATCHES),
    ]


def _decode_batches(codec: CompressionType) -> bytes:
    records = [(key, value, (), 1_700_000_000_000 + i)
               for i, (key, value) in enumerate(_payloads(DECODE_RECORDS, 100, 7))]
    return bytes(build_record_batch(records, compression=codec))


def bench_full_decode() -> list[Row]:
    """Decode every record of one 10,000-record batch; seconds per batch."""
    rows: list[Row] = []
    for codec in (CompressionType.NONE, CompressionType.GZIP):
        raw = _decode_batches(codec)
        name = codec.name.lower()

        def strom(raw: bytes = raw) -> None:
            records = decode_batch(raw).records
            assert len(records) == DECODE_RECORDS

        def kafka_python(raw: bytes = raw) -> None:
            records = list(DefaultRecordBatch(raw))
            assert len(records) == DECODE_RECORDS

        rows.append((f"strom: decode 10k records, {name}", _best(strom)))
        rows.append((f"kafka-python: decode 10k records, {name}", _best(kafka_python)))
    return rows


def bench_build() -> list[Row]:
    """Write one 10,000-record batch from (key, value) pairs; seconds per batch."""
    payloads = _payloads(DECODE_RECORDS, 100, 7)
    rows: list[Row] = []
    for codec in (CompressionType.NONE, CompressionType.GZIP):
        name = codec.name.lower()
        records = [(key, value, (), 1_700_000_000_000 + i)
                   for i, (key, value) in enumerate(payloads)]

        def strom(records: list[tuple[bytes, bytes, tuple[()], int]] = records,
                  codec: CompressionType = codec) -> None:
            build_record_batch(records, compression=codec)

        def kafka_python(codec: CompressionType = codec) -> None:
            builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 30)
            for index, (key, value) in enumerate(payloads):
                builder.append(index, 1_700_000_000_000 + index, key, value, [])
            builder.build()

        rows.append((f"strom: build 10k records, {name}", _best(strom)))
        rows.append((f"kafka-python: build 10k records, {name}", _best(kafka_python)))
    return rows


def main() -> None:
    started = time.perf_counter()
    rows = bench_batch_headers() + bench_full_decode() + bench_build()
    width = max(len(label) for label, _ in rows)
    print(f"{'benchmark':<{width}}  {'per op':>12}")
    for label, seconds in rows:
        print(f"{label:<{width}}  {seconds * 1e3:>9.3f} ms")
    print(f"(total {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
