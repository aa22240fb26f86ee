"""OffsetMap: key hash -> latest offset, in a fixed memory budget (Kafka's SkimpyOffsetMap).

Layout: a flat open-addressing table of ``slots`` entries, held as three numpy arrays
(structure of arrays, so every probe round is a vectorised gather)::

    fingerprint_high  uint64[slots]   bits 0..63 of the key's 80-bit fingerprint
    fingerprint_low   uint16[slots]   bits 64..79
    relative_offset   uint32[slots]   offset - base_offset; 0xFFFFFFFF marks an empty slot

14 bytes per slot, no per-entry object, no pointers. ``slots`` is the largest prime
that fits the budget (``log.cleaner.dedupe.buffer.size``, default 128 MiB), so
double hashing (home slot from the fingerprint, step from 48 other bits of the
digest) visits every slot. The map takes at most ``load_factor`` * slots keys
(``log.cleaner.io.buffer.load.factor``, Kafka's default 0.9); with double hashing an
insert or a miss probes ~1/(1-0.9) = 10 slots on average, a hit ~2.6.

Hash: XXH3-128 of the key bytes, computed for a whole batch of keys at once by
``key_hash`` (numpy, bit-exact with the ``xxhash`` library). Of its two 64-bit halves
``high64, low64`` the fingerprint is ``high64`` and the low 16 bits of ``low64``; the
step is ``1 + (low64 >> 16) % (slots - 1)``.

Why 80 bits and 14 bytes. A collision — two distinct keys of one pass with the same
stored fingerprint — makes the cleaner think the older key was superseded and delete
its live record, so the stored width is chosen for a per-pass collision probability
below 1e-9 at >= 8 M keys per 128 MiB. Two keys are confused only if their stored
fingerprints are equal (the home slot comes from the same bits, so no extra bits are
won from the index). For ``n`` keys and ``b`` stored bits the birthday bound is
``p ~= n^2 / 2^(b+1)``::

    layout (fingerprint + offset)  bytes  slots/128MiB  keys at 0.9  p(collision)/pass
    MD5 128 + int64 (Kafka)          24      5.59 M       5.03 M        3.7e-26
    64 + 32                          12     11.18 M      10.07 M        2.7e-6   too high
    72 + 32                          13     10.32 M       9.29 M        9.1e-9   too high
    80 + 32 (this map)               14      9.59 M       8.63 M        3.1e-11
    96 + 32                          16      8.39 M       7.55 M        3.6e-16  too few keys

So 80 bits is the narrowest fingerprint under 1e-9 and the widest that still holds
8 M keys. The offset is stored relative to the pass's first dirty offset in 32 bits;
a pass therefore covers fewer than 2^32 - 1 offsets (the cleaner ends a pass there,
as it ends one when the map is full).

Inserts come in offset order; when a key repeats, the larger offset wins
(``np.maximum.at``), which also resolves repeats inside one vectorised batch. ``put``
returns the offsets it superseded (each record whose key came again later in the
pass), so the cleaner knows which dirty segments hold anything to remove. Empty
slots claimed by several keys in one probe round are settled by writing the keys'
batch indexes into the offset array and reading back which one stuck; the others
look again in the next round.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

ENTRY_BYTES: Final = 14
EMPTY: Final = 0xFFFFFFFF
MAX_RELATIVE_OFFSET: Final = EMPTY - 1
DEFAULT_LOAD_FACTOR: Final = 0.9

UInt64s = npt.NDArray[np.uint64]
UInt16s = npt.NDArray[np.uint16]
Int64s = npt.NDArray[np.int64]


def largest_prime_at_most(limit: int) -> int:
    """Trial division: a table of ~10 M slots needs divisors up to ~3,200 only."""
    if limit < 2:
        raise ValueError(f"no prime at most {limit}")
    candidate = limit if limit % 2 or limit == 2 else limit - 1
    while candidate > 2:
        divisor, prime = 3, True
        while divisor * divisor <= candidate:
            if candidate % divisor == 0:
                prime = False
                break
            divisor += 2
        if prime:
            return candidate
        candidate -= 2
    return 2


class KeyHashes:
    """A vectorised batch of key hashes: fingerprint words and the probe step source."""

    __slots__ = ("high", "low", "step_bits")

    def __init__(self, high64: UInt64s, low64: UInt64s) -> None:
        """The two halves of each key's XXH3-128 (``key_hash.xxh3_128``)."""
        self.high: UInt64s = high64
        self.low: UInt16s = (low64 & np.uint64(0xFFFF)).astype(np.uint16)
        self.step_bits: UInt64s = low64 >> np.uint64(16)

    def __len__(self) -> int:
        return len(self.high)

    def select(self, which: npt.NDArray[np.intp] | npt.NDArray[np.bool_]) -> KeyHashes:
        chosen = KeyHashes.__new__(KeyHashes)
        chosen.high, chosen.low = self.high[which], self.low[which]
        chosen.step_bits = self.step_bits[which]
        return chosen


class OffsetMap:
    """The cleaner's map for one pass; ``clear`` starts the next pass in the same memory."""

    def __init__(self, memory_bytes: int, load_factor: float = DEFAULT_LOAD_FACTOR) -> None:
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor {load_factor} is not in (0, 1]")
        self.slots = largest_prime_at_most(max(memory_bytes // ENTRY_BYTES, 3))
        self.max_entries = max(1, int(self.slots * load_factor))
        self._high = np.zeros(self.slots, dtype=np.uint64)
        self._low = np.zeros(self.slots, dtype=np.uint16)
        self._offset = np.full(self.slots, EMPTY, dtype=np.uint32)
        self._modulus = np.uint64(self.slots)
        self._step_modulus = np.uint64(self.slots - 1)
        self.base_offset = 0
        self.size = 0
        self.latest_offset = -1

    @property
    def memory_bytes(self) -> int:
        return self._high.nbytes + self._low.nbytes + self._offset.nbytes

    @property
    def free_entries(self) -> int:
        return self.max_entries - self.size

    def clear(self, base_offset: int) -> None:
        self._offset.fill(EMPTY)
        self.base_offset = base_offset
        self.size = 0
        self.latest_offset = -1

    def _start(self, keys: KeyHashes) -> tuple[Int64s, Int64s]:
        home = (keys.high % self._modulus).astype(np.int64)
        step = (np.uint64(1) + keys.step_bits % self._step_modulus).astype(np.int64)
        return home, step

    def put(self, keys: KeyHashes, offsets: Int64s) -> Int64s:
        """Map each key to its offset; returns the offsets superseded by this call.

        Offsets ascend and lie in [base, base + 2^32 - 1). A superseded offset is one
        whose key now maps to a larger offset (it may be in ``offsets`` or an earlier
        call's); one superseded by several keys of one probe round appears repeatedly. The caller keeps ``len(keys) <= free_entries`` (every key may be new).
        """
        superseded: list[npt.NDArray[np.uint32]] = []
        if not len(keys):
            return np.zeros(0, dtype=np.int64)
        if len(keys) > self.free_entries:
            raise OverflowError(f"{len(keys)} keys exceed the map's {self.free_entries} free entries")
        relative = offsets - self.base_offset
        if relative[0] < 0 or relative[-1] > MAX_RELATIVE_OFFSET:
            raise ValueError("offsets outside the pass's 32-bit range")
        relative32 = relative.astype(np.uint32)
        position, step = self._start(keys)
        high, low, table = self._high, self._low, self._offset
        modulus = self.slots
        pending = np.arange(len(keys), dtype=np.int64)
        while pending.size:
            slot = position[pending]
            current = table[slot]
            empty = current == EMPTY
            same = ~empty & (high[slot] == keys.high[pending]) & (low[slot] == keys.low[pending])
            if same.any():
                # Every record is compared with its key's maximum once it meets the key
                # in the table, so each offset that is not the maximum is reported.
                same_slots, incoming = slot[same], relative32[pending[same]]
                np.maximum.at(table, same_slots, incoming)
                final = table[same_slots]
                superseded += [incoming[incoming != final], current[same][current[same] != final]]
            lost = pending[:0]
            if empty.any():
                claimed, claimants = slot[empty], pending[empty]
                table[claimed] = claimants.astype(np.uint32)  # batch index as a claim ticket
                won = table[claimed] == claimants.astype(np.uint32)
                winners, won_slots = claimants[won], claimed[won]
                high[won_slots] = keys.high[winners]
                low[won_slots] = keys.low[winners]
                table[won_slots] = relative32[winners]
                self.size += int(winners.size)
                lost = claimants[~won]  # look at the same slot again next round
            moving = ~(same | empty)
            movers = pending[moving]
            position[movers] = (slot[moving] + step[movers]) % modulus
            pending = np.concatenate((lost, movers))
        self.latest_offset = max(self.latest_offset, int(offsets[-1]))
        if not superseded:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate(superseded).astype(np.int64) + self.base_offset

    def get(self, keys: KeyHashes) -> Int64s:
        """Each key's latest mapped offset, or -1 if the key is not in the map."""
        result = np.full(len(keys), -1, dtype=np.int64)
        if not len(keys) or not self.size:
            return result
        position, step = self._start(keys)
        high, low, table = self._high, self._low, self._offset
        pending = np.arange(len(keys), dtype=np.int64)
        while pending.size:
            slot = position[pending]
            current = table[slot]
            empty = current == EMPTY
            same = ~empty & (high[slot] == keys.high[pending]) & (low[slot] == keys.low[pending])
            result[pending[same]] = current[same].astype(np.int64) + self.base_offset
            moving = ~(same | empty)
            movers = pending[moving]
            position[movers] = (slot[moving] + step[movers]) % self.slots
            pending = movers
        return result

    def utilization(self) -> float:
        return self.size / self.slots
