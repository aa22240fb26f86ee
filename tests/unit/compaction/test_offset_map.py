"""OffsetMap: the fixed-budget table against a dict, and its capacity arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
import xxhash

from strom.compaction.offset_map import ENTRY_BYTES, KeyHashes, OffsetMap, largest_prime_at_most


def hashes(keys: list[bytes]) -> KeyHashes:
    digests = [xxhash.xxh3_128_intdigest(key) for key in keys]
    return KeyHashes(np.array([d >> 64 for d in digests], dtype=np.uint64),
                     np.array([d & (2**64 - 1) for d in digests], dtype=np.uint64))


def test_budget_holds_eight_million_keys_per_128_mib() -> None:
    offset_map = OffsetMap(128 << 20)
    assert offset_map.memory_bytes <= 128 << 20
    assert offset_map.memory_bytes // offset_map.slots == ENTRY_BYTES
    assert offset_map.max_entries >= 8_000_000
    # the docstring's bound: n^2 / 2^81 for an 80-bit fingerprint
    assert offset_map.max_entries ** 2 / 2**81 < 1e-9


def test_largest_prime() -> None:
    assert largest_prime_at_most(100) == 97
    assert largest_prime_at_most(97) == 97
    assert largest_prime_at_most(2) == 2


def test_matches_a_dict_with_repeats_inside_one_call_and_across_calls() -> None:
    rng = np.random.default_rng(7)
    offset_map = OffsetMap(20_000 * ENTRY_BYTES, load_factor=0.9)
    offset_map.clear(1000)
    model: dict[bytes, int] = {}
    superseded: list[int] = []
    offset = 1000
    for _ in range(6):
        keys = [b"key-%d" % k for k in rng.integers(0, 3000, size=2500)]
        offsets = np.arange(offset, offset + len(keys), dtype=np.int64)
        superseded += offset_map.put(hashes(keys), offsets).tolist()
        for key, value in zip(keys, offsets.tolist(), strict=True):
            model[key] = value
        offset += len(keys) + 17  # gaps between calls, as compacted logs have
    assert offset_map.size == len(model)
    # every offset put is either some key's latest or reported superseded, never both
    put_offsets = {o for o in range(1000, offset) if (o - 1000) % (2500 + 17) < 2500}
    assert set(superseded) == put_offsets - set(model.values())
    found = offset_map.get(hashes(list(model)))
    assert found.tolist() == list(model.values())
    missing = offset_map.get(hashes([b"absent-%d" % i for i in range(500)]))
    assert (missing == -1).all()


def test_fills_to_the_load_factor_and_refuses_more() -> None:
    offset_map = OffsetMap(1000 * ENTRY_BYTES, load_factor=0.9)
    offset_map.clear(0)
    keys = [b"k%d" % i for i in range(offset_map.max_entries)]
    offset_map.put(hashes(keys), np.arange(len(keys), dtype=np.int64))
    assert offset_map.free_entries == 0
    assert (offset_map.get(hashes(keys)) == np.arange(len(keys))).all()
    with pytest.raises(OverflowError):
        offset_map.put(hashes([b"one more"]), np.array([len(keys)], dtype=np.int64))
    offset_map.clear(0)
    assert offset_map.size == 0 and (offset_map.get(hashes(keys)) == -1).all()


def test_offsets_beyond_the_32_bit_range_are_refused() -> None:
    offset_map = OffsetMap(100 * ENTRY_BYTES)
    offset_map.clear(5)
    with pytest.raises(ValueError):
        offset_map.put(hashes([b"a"]), np.array([5 + 2**32], dtype=np.int64))
