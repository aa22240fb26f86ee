"""The producer's partitioner: murmur2 as the Java client computes it, sticky key-less
placement (KIP-480) driven by the accumulator's batches, explicit partitions."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2  # type: ignore[import-untyped]

from strom.client.accumulator import AbortForNewBatch, RecordAccumulator
from strom.client.partitioner import DefaultPartitioner, murmur2, partition_for_key, to_positive

# org.apache.kafka.common.utils.UtilsTest.testMurmur2 (signed Java ints).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_murmur2_matches_the_java_client(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_murmur2_of_empty_and_one_to_three_byte_tails() -> None:
    # seed ^ 0 through the finaliser; each tail length takes a different branch.
    assert murmur2(b"") == 275646681
    for key in (b"a", b"ab", b"abc", b"abcd", b"abcde"):
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_murmur2_agrees_with_kafka_python_on_random_keys() -> None:
    rng = random.Random(20240611)
    for _ in range(10_000):
        key = rng.randbytes(rng.randint(0, 64))
        result = murmur2(key)
        assert -(1 << 31) <= result < (1 << 31)
        assert result & 0xFFFFFFFF == kafka_python_murmur2(key), key


def test_murmur2_accepts_bytearray_and_memoryview() -> None:
    for key, expected in JAVA_VECTORS.items():
        assert murmur2(bytearray(key)) == expected
        assert murmur2(memoryview(b"xx" + key)[2:]) == expected


def test_murmur2_of_a_key_longer_than_the_reader_cache() -> None:
    key = random.Random(3).randbytes(4 * 300 + 3)
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_to_positive_clears_the_sign_bit_rather_than_negating() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(5) == 5


def test_keyed_records_go_to_the_hashed_partition() -> None:
    partitioner = DefaultPartitioner()
    for key, expected in JAVA_VECTORS.items():
        for count in (1, 3, 7, 100):
            assert partitioner.partition("t", key, count) == (expected & 0x7FFFFFFF) % count
            assert partition_for_key(key, count) == (expected & 0x7FFFFFFF) % count
    # Available partitions do not move a keyed record: per-key order comes first.
    assert partitioner.partition("t", b"21", 7, available=[0]) == (-973932308 & 0x7FFFFFFF) % 7


def test_an_explicit_partition_wins_and_is_checked() -> None:
    partitioner = DefaultPartitioner()
    assert partitioner.partition("t", b"21", 7, explicit_partition=6) == 6
    assert partitioner.partition("t", None, 7, explicit_partition=2) == 2
    with pytest.raises(ValueError, match="not in the range"):
        partitioner.partition("t", b"21", 7, explicit_partition=7)
    with pytest.raises(ValueError, match="no partitions"):
        partitioner.partition("t", b"21", 0)


def test_key_less_records_stick_until_a_new_batch() -> None:
    partitioner = DefaultPartitioner(rng=random.Random(1))
    first = partitioner.partition("t", None, 5)
    assert all(partitioner.partition("t", None, 5) == first for _ in range(100))
    assert partitioner.sticky_partition("t") == first
    partitioner.on_new_batch("t", (first + 1) % 5, 5)  # another partition's batch: no change
    assert partitioner.partition("t", None, 5) == first
    for _ in range(50):
        previous = partitioner.partition("t", None, 5)
        partitioner.on_new_batch("t", previous, 5)
        assert partitioner.partition("t", None, 5) != previous


def test_key_less_records_prefer_available_partitions() -> None:
    partitioner = DefaultPartitioner(rng=random.Random(2))
    chosen = set()
    for _ in range(40):
        partition = partitioner.partition("t", None, 6, available=[1, 4])
        chosen.add(partition)
        partitioner.on_new_batch("t", partition, 6, available=[1, 4])
    assert chosen == {1, 4}
    only = DefaultPartitioner()
    only.partition("u", None, 6, available=[3])
    only.on_new_batch("u", 3, 6, available=[3])  # the only choice stays the choice
    assert only.partition("u", None, 6, available=[3]) == 3


def test_ignore_keys_places_keyed_records_like_key_less_ones() -> None:
    partitioner = DefaultPartitioner(ignore_keys=True, rng=random.Random(5))
    placements = {partitioner.partition("t", f"k{i}".encode(), 8) for i in range(100)}
    assert len(placements) == 1


async def _produce_key_less(
    accumulator: RecordAccumulator, partitioner: DefaultPartitioner, count: int, num_partitions: int
) -> list[int]:
    """The producer's KIP-480 dance: append, and on a new batch re-pick and append again."""
    placements = []
    for i in range(count):
        value = b"v%05d" % i + b"." * 90
        partition = partitioner.partition("t", None, num_partitions)
        try:
            await accumulator.append("t", partition, None, value, abort_on_new_batch=True)
        except AbortForNewBatch:
            partitioner.on_new_batch("t", partition, num_partitions)
            partition = partitioner.partition("t", None, num_partitions)
            await accumulator.append("t", partition, None, value)
        placements.append(partition)
    return placements


def test_key_less_records_fill_one_batch_per_partition_and_spread_across_batches() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=1024, linger_ms=1_000_000)
        partitioner = DefaultPartitioner(rng=random.Random(7))
        placements = await _produce_key_less(accumulator, partitioner, 400, 4)
        accumulator.begin_flush()
        batches = []
        while accumulator.has_undrained():
            ready, _ = accumulator.ready()
            for batch in accumulator.drain(ready, 1 << 20).values():
                batches.append(batch)
                batch.complete(0)
        await accumulator.await_flush_completion()
        # Consecutive runs of one partition are whole batches: every batch but the
        # last of each run was full, so there is no one-record batch left behind.
        runs = [1]
        for previous, current in itertools.pairwise(placements):
            if current == previous:
                runs[-1] += 1
            else:
                runs.append(1)
        full_batch_records = (1024 - 61) // 105
        assert all(run >= full_batch_records - 1 for run in runs[:-1])
        assert len(runs) == len(batches)
        assert sum(batch.record_count for batch in batches) == 400
        assert len(set(placements)) == 4  # spread over partitions across batches

    asyncio.run(scenario())


def test_a_drained_batch_moves_key_less_records_on() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=16384, linger_ms=0)
        partitioner = DefaultPartitioner(rng=random.Random(11))
        placements: list[int] = []
        for _ in range(20):
            placements += await _produce_key_less(accumulator, partitioner, 3, 3)
            ready, _ = accumulator.ready()
            for batch in accumulator.drain(ready, 1 << 20).values():
                assert batch.record_count == 3
                batch.complete(0)
        per_round = [placements[i : i + 3] for i in range(0, 60, 3)]
        assert all(len(set(group)) == 1 for group in per_round)
        assert all(a[0] != b[0] for a, b in itertools.pairwise(per_round))
        assert {group[0] for group in per_round} == {0, 1, 2}

    asyncio.run(scenario())
