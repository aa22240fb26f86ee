"""The vectorised XXH3-128 against the xxhash library, bit for bit."""

from __future__ import annotations

import random

import numpy as np
import pytest
import xxhash

from strom.compaction.key_hash import MAX_VECTORISED_LENGTH, xxh3_128


def _reference(keys: list[bytes]) -> tuple[list[int], list[int]]:
    digests = [xxhash.xxh3_128_intdigest(key) for key in keys]
    return [d >> 64 for d in digests], [d & (2**64 - 1) for d in digests]


def _hash(keys: list[bytes], gap: bytes = b"") -> tuple[list[int], list[int]]:
    """Hash ``keys`` laid out in one arena with ``gap`` bytes between them."""
    arena = bytearray(gap)
    starts, lengths = [], []
    for key in keys:
        starts.append(len(arena))
        lengths.append(len(key))
        arena += key + gap
    high, low = xxh3_128(bytes(arena), np.array(starts, dtype=np.int64),
                         np.array(lengths, dtype=np.int64))
    return high.tolist(), low.tolist()


@pytest.mark.parametrize("length", range(0, 201))
def test_every_length_matches_xxhash(length: int) -> None:
    generator = random.Random(length)
    keys = [generator.randbytes(length) for _ in range(40)]
    keys += [bytes(length), b"\xff" * length]
    assert _hash(keys) == _reference(keys)
    assert _hash(keys, gap=b"\xa5" * 3) == _reference(keys)


def test_mixed_lengths_in_one_call_match_xxhash() -> None:
    generator = random.Random(7)
    keys = [generator.randbytes(generator.choice([0, 1, 3, 4, 8, 9, 16, 17, 32, 33, 64, 65,
                                                  96, 97, 128, 129, 300]))
            for _ in range(2000)]
    assert _hash(keys, gap=b"\x00") == _reference(keys)


def test_single_length_classes_take_the_whole_batch_path() -> None:
    keys = [b"key-%012d" % number for number in range(1000)]
    assert _hash(keys) == _reference(keys)


def test_key_at_the_very_end_of_a_short_arena() -> None:
    for length in (1, 4, 8, 9, 16, 17, MAX_VECTORISED_LENGTH):
        key = bytes(range(1, length + 1))
        assert _hash([key]) == _reference([key])


def test_no_keys() -> None:
    high, low = xxh3_128(b"", np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert len(high) == len(low) == 0
