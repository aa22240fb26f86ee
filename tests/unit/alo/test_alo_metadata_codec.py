"""The offset map in the commit metadata: round trips (large gaps too), the size limit and
its safe fallback, and damaged or foreign strings."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.alo.metadata_codec import MAX_FINISHED, _text, decode_offset_map, encode_offset_map, fits
from strom.protocol.records.varint import encode_unsigned_varint


@given(base=st.integers(0, 2**62), deltas=st.sets(st.integers(1, 50_000), max_size=300))
@settings(max_examples=200, deadline=None)
def test_round_trip(base: int, deltas: set[int]) -> None:
    done = {base + d for d in deltas}
    text = encode_offset_map(base, done, 1 << 20)
    assert len(text) <= 1 << 20
    assert decode_offset_map(base, text) == done
    assert text.isascii()


def test_nothing_finished_is_an_empty_string() -> None:
    assert encode_offset_map(7, []) == ""
    assert encode_offset_map(7, [3, 7]) == ""  # at or below the base: not part of the map
    assert decode_offset_map(7, "") == frozenset()


def test_large_gaps_and_long_runs_encode_as_run_lengths() -> None:
    base = 10_000_000_000
    done = set(range(base + 1, base + 200_000)) | {base + 5_000_000, base + 9_000_000}
    text = encode_offset_map(base, done)
    assert text.startswith("alo1R") and len(text) < 40
    assert decode_offset_map(base, text) == done


def test_scattered_offsets_encode_as_a_bitset() -> None:
    rng = random.Random(3)
    done = {o for o in range(1, 20_001) if rng.random() < 0.5}
    text = encode_offset_map(0, done)
    assert text.startswith("alo1B")
    assert len(text) <= 4096
    assert decode_offset_map(0, text) == done


def test_a_span_of_24000_offsets_always_fits_the_default_limit() -> None:
    # The default max.uncommitted.offsets.per.partition relies on this: the worst case
    # (every other offset done: no runs, a dense bitset) still fits 4096 bytes.
    done = set(range(2**40 + 1, 2**40 + 24_000, 2))
    assert fits(done, 2**40, 4096)


def test_too_large_maps_are_cut_at_the_highest_offset_that_fits() -> None:
    rng = random.Random(5)
    done = sorted(o for o in range(1, 200_000) if rng.random() < 0.5)  # incompressible, ~25 kB bitset
    assert not fits(done, 0, 4096)
    text = encode_offset_map(0, done, 4096)
    assert 0 < len(text) <= 4096
    decoded = decode_offset_map(0, text)
    # A prefix of the finished offsets: everything left out is simply processed again.
    assert decoded == set(done[:len(decoded)])
    assert len(decoded) > 10_000


def test_a_tiny_limit_falls_back_to_no_map() -> None:
    done = list(range(1, 1000, 3))
    text = encode_offset_map(0, done, 12)
    assert len(text) <= 12
    assert decode_offset_map(0, text) <= set(done)


def test_compressible_maps_use_zlib_when_raw_is_too_large() -> None:
    done = [o for o in range(1, 100_000) if o % 4 == 1]  # regular: runs are many, zlib shrinks it
    text = encode_offset_map(0, done, 4096)
    assert text[4] in "rb"
    assert decode_offset_map(0, text) == set(done)


@pytest.mark.parametrize("metadata", [
    "some application's note", "alo1", "alo1B!!!!", "alo1Xabcd", "alo1R" + "_" * 10, "alo1r" + "A" * 20,
])
def test_foreign_or_damaged_metadata_decodes_to_nothing(metadata: str) -> None:
    assert decode_offset_map(0, metadata) == frozenset()


def test_a_map_for_another_base_is_ignored() -> None:
    text = encode_offset_map(100, [105])
    assert decode_offset_map(100, text) == {105}
    assert decode_offset_map(99, text) == frozenset()


def test_a_hostile_run_length_cannot_build_a_huge_set() -> None:
    uvarint = encode_unsigned_varint
    huge = uvarint(0) + uvarint(1) + uvarint(MAX_FINISHED * 4)  # base 0, 1 not done, 4M done
    assert decode_offset_map(0, _text("R", huge)) == frozenset()
    ok = uvarint(0) + uvarint(1) + uvarint(1000)
    assert decode_offset_map(0, _text("R", ok)) == set(range(1, 1001))
