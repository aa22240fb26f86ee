"""XXH3-128 of many keys at once, in numpy: the offset map's key hash without a call per key.

The cleaner hashes every keyed record it reads, tens of millions per compaction, so a
Python call per key (slicing the key out, calling ``xxhash``) was the largest cost of a
pass. Keys are short in practice, and XXH3 hashes keys of up to 128 bytes with
closed formulas: a few 8-byte reads at fixed distances from the key's start and end,
64 x 64 -> 128-bit multiplies, xors and shifts. Those are computed here over arrays
of keys, the reads gathered from the record arena through an unaligned 8-byte-window
view (no per-key slice, no key matrix). Longer keys (rare) take ``xxhash`` per key.

The result is bit for bit XXH3-128 with seed 0 and the default secret (xxHash 0.8;
``tests/unit/compaction/test_key_hash.py`` checks every length 0..200 against the
``xxhash`` library), so the collision arithmetic in ``offset_map`` rests on a
published, SMHasher-tested hash rather than a home-made one.

numpy has no 128-bit product: ``_multiply_128`` splits both factors into 32-bit halves
and adds the four partial products with their carries, as xxHash's portable C does.
uint64 arithmetic in numpy wraps modulo 2^64, which is what the C code relies on.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt
import xxhash

Buffer = bytes | bytearray | memoryview
UInt64s = npt.NDArray[np.uint64]
Int64s = npt.NDArray[np.int64]

MAX_VECTORISED_LENGTH: Final = 128  # XXH3's "17 to 128 bytes" path is the last one here

_SECRET: Final = bytes.fromhex(  # XXH3_kSecret, the first 128 of its 192 bytes
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364")


def _secret64(at: int) -> int:
    return int.from_bytes(_SECRET[at : at + 8], "little")


def _secret32(at: int) -> int:
    return int.from_bytes(_SECRET[at : at + 4], "little")


_U = np.uint64
_MASK32: Final = _U(0xFFFFFFFF)
_PRIME32_2: Final = 0x85EBCA77
_PRIME64_1: Final = 0x9E3779B185EBCA87
_PRIME64_2: Final = 0xC2B2AE3D27D4EB4F
_PRIME64_3: Final = 0x165667B19E3779F9
_PRIME64_4: Final = 0x85EBCA77C2B2AE63
_PRIME_MX1: Final = 0x165667919E3779F9
_PRIME_MX2: Final = 0x9FB21C651E98DF25
_BITFLIP_0: Final = (_U(_secret64(64) ^ _secret64(72)), _U(_secret64(80) ^ _secret64(88)))
_BITFLIP_1TO3: Final = (_U(_secret32(0) ^ _secret32(4)), _U(_secret32(8) ^ _secret32(12)))
_BITFLIP_4TO8: Final = _U(_secret64(16) ^ _secret64(24))
_BITFLIP_9TO16: Final = (_U(_secret64(32) ^ _secret64(40)), _U(_secret64(48) ^ _secret64(56)))
_MIX_SECRET: Final = [(_U(_secret64(at)), _U(_secret64(at + 8))) for at in range(0, 128, 16)]


def _multiply_128(left: UInt64s, right: UInt64s | np.uint64) -> tuple[UInt64s, UInt64s]:
    """The full product of two uint64 arrays (or an array and a constant): (high, low)."""
    left_low, left_high = left & _MASK32, left >> _U(32)
    right_low, right_high = right & _MASK32, right >> _U(32)
    low_low = left_low * right_low
    high_low = left_high * right_low
    cross = (low_low >> _U(32)) + (high_low & _MASK32) + left_low * right_high
    high = (high_low >> _U(32)) + (cross >> _U(32)) + left_high * right_high
    low = (cross << _U(32)) | (low_low & _MASK32)
    return high, low


def _xorshift(value: UInt64s, shift: int) -> UInt64s:
    value ^= value >> _U(shift)
    return value


def _avalanche(value: UInt64s) -> UInt64s:
    """XXH3_avalanche."""
    value = _xorshift(value, 37) * _U(_PRIME_MX1)
    return _xorshift(value, 32)


def _xxh64_avalanche(value: UInt64s) -> UInt64s:
    """XXH64_avalanche."""
    value = _xorshift(value, 33) * _U(_PRIME64_2)
    value = _xorshift(value, 29) * _U(_PRIME64_3)
    return _xorshift(value, 32)


def _windows(arena: Buffer, width: int) -> npt.NDArray[np.unsignedinteger]:
    """Every ``width``-byte little-endian word of the arena, one per starting byte."""
    count = len(arena) - width + 1
    if count <= 0:
        return np.zeros(0, dtype=f"<u{width}")
    return np.ndarray((count,), f"<u{width}", arena, 0, (1,))


class _Arena:
    """Unaligned word reads from one buffer, created once per ``xxh3_128`` call."""

    def __init__(self, arena: Buffer) -> None:
        self.bytes = np.frombuffer(arena, dtype=np.uint8)
        self.words32 = _windows(arena, 4)
        self.words64 = _windows(arena, 8)

    def u64(self, at: Int64s) -> UInt64s:
        return self.words64[at]

    def u32(self, at: Int64s) -> UInt64s:
        return self.words32[at].astype(np.uint64)


def _empty(count: int) -> tuple[UInt64s, UInt64s]:
    high = _xxh64_avalanche(np.full(count, _BITFLIP_0[1], dtype=np.uint64))
    low = _xxh64_avalanche(np.full(count, _BITFLIP_0[0], dtype=np.uint64))
    return high, low


def _len_1to3(arena: _Arena, start: Int64s, length: Int64s) -> tuple[UInt64s, UInt64s]:
    u8 = arena.bytes
    first = u8[start].astype(np.uint32)
    middle = u8[start + (length >> 1)].astype(np.uint32)
    last = u8[start + length - 1].astype(np.uint32)
    combined = (first << np.uint32(16)) | (middle << np.uint32(24)) | last \
        | (length.astype(np.uint32) << np.uint32(8))
    swapped = combined.byteswap()
    rotated = (swapped << np.uint32(13)) | (swapped >> np.uint32(19))
    low = _xxh64_avalanche(combined.astype(np.uint64) ^ _BITFLIP_1TO3[0])
    high = _xxh64_avalanche(rotated.astype(np.uint64) ^ _BITFLIP_1TO3[1])
    return high, low


def _len_4to8(arena: _Arena, start: Int64s, length: Int64s) -> tuple[UInt64s, UInt64s]:
    word = arena.u32(start) + (arena.u32(start + length - 4) << _U(32))
    multiplier = length.astype(np.uint64) << _U(2)
    multiplier += _U(_PRIME64_1)
    high, low = _multiply_128(word ^ _BITFLIP_4TO8, multiplier)
    high += low << _U(1)
    low ^= high >> _U(3)
    low = _xorshift(_xorshift(low, 35) * _U(_PRIME_MX2), 28)
    return _avalanche(high), low


def _len_9to16(arena: _Arena, start: Int64s, length: Int64s) -> tuple[UInt64s, UInt64s]:
    word_low = arena.u64(start)
    word_high = arena.u64(start + length - 8)
    high, low = _multiply_128(word_low ^ word_high ^ _BITFLIP_9TO16[0], _U(_PRIME64_1))
    low += (length.astype(np.uint64) - _U(1)) << _U(54)
    word_high ^= _BITFLIP_9TO16[1]
    high += word_high + (word_high & _MASK32) * _U(_PRIME32_2 - 1)
    low ^= high.byteswap()
    product_high, product_low = _multiply_128(low, _U(_PRIME64_2))
    product_high += high * _U(_PRIME64_2)
    return _avalanche(product_high), _avalanche(product_low)


def _mix_16(arena: _Arena, at: Int64s, secret: tuple[np.uint64, np.uint64]
            ) -> tuple[UInt64s, UInt64s]:
    """XXH3_mix16B, and the sum of the two words it read (which XXH128_mix32B needs)."""
    first, second = arena.u64(at), arena.u64(at + 8)
    high, low = _multiply_128(first ^ secret[0], second ^ secret[1])
    return high ^ low, first + second


def _len_17to128(arena: _Arena, start: Int64s, length: Int64s) -> tuple[UInt64s, UInt64s]:
    size = length.astype(np.uint64)
    acc_low = size * _U(_PRIME64_1)
    acc_high = np.zeros(len(start), dtype=np.uint64)
    for round_number in (3, 2, 1, 0):  # XXH128_mix32B, from the innermost pair out
        rows = np.flatnonzero(length > 32 * round_number) if round_number else slice(None)
        first_at = start[rows] + 16 * round_number
        second_at = start[rows] + length[rows] - 16 * (round_number + 1)
        mixed_1, sum_1 = _mix_16(arena, first_at, _MIX_SECRET[2 * round_number])
        mixed_2, sum_2 = _mix_16(arena, second_at, _MIX_SECRET[2 * round_number + 1])
        acc_low[rows] = (acc_low[rows] + mixed_1) ^ sum_2
        acc_high[rows] = (acc_high[rows] + mixed_2) ^ sum_1
    low = _avalanche(acc_low + acc_high)
    high = acc_low * _U(_PRIME64_1) + acc_high * _U(_PRIME64_4) + size * _U(_PRIME64_2)
    return _U(0) - _avalanche(high), low


_PATHS: Final = ((1, 3, _len_1to3), (4, 8, _len_4to8), (9, 16, _len_9to16),
                 (17, MAX_VECTORISED_LENGTH, _len_17to128))


def xxh3_128(arena: Buffer, key_start: Int64s, key_length: Int64s) -> tuple[UInt64s, UInt64s]:
    """XXH3-128 (seed 0) of ``arena[start:start+length]`` per key: (high64, low64) arrays.

    The lengths must be >= 0 (no null keys) and each key inside the arena.
    """
    count = len(key_start)
    high = np.empty(count, dtype=np.uint64)
    low = np.empty(count, dtype=np.uint64)
    if not count:
        return high, low
    reads = _Arena(arena)
    shortest, longest = int(key_length.min()), int(key_length.max())
    if shortest == 0:
        rows = np.flatnonzero(key_length == 0)
        high[rows], low[rows] = _empty(len(rows))
    for least, most, path in _PATHS:
        if longest < least or shortest > most:
            continue
        if least <= shortest and longest <= most:
            high[:], low[:] = path(reads, key_start, key_length)
            return high, low
        rows = np.flatnonzero((key_length >= least) & (key_length <= most))
        if len(rows):
            high[rows], low[rows] = path(reads, key_start[rows], key_length[rows])
    if longest > MAX_VECTORISED_LENGTH:
        rows = np.flatnonzero(key_length > MAX_VECTORISED_LENGTH)
        view = memoryview(arena)
        digest = xxhash.xxh3_128_digest
        starts, ends = key_start[rows].tolist(), (key_start[rows] + key_length[rows]).tolist()
        words = np.frombuffer(b"".join([digest(view[s:e]) for s, e in zip(starts, ends,
                                                                      strict=True)]),
                              dtype=">u8").reshape(-1, 2)
        high[rows], low[rows] = words[:, 0], words[:, 1]
    return high, low
