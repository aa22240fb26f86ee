"""Varints of many records at once, with numpy: what the Arrow decoder and the log cleaner
share.

Both walk a buffer of v2 records without a Python object per record. A record starts
with its length as a zigzag varint, and almost every field of a small record is a one- or
two-byte varint, so a table indexed by the two bytes at a position (little-endian, as a
``uint16`` view of the buffer gives them) answers value and size in one lookup; longer
varints (size 0 in the table) take ``long_varints``.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError

Int64s = npt.NDArray[np.int64]


def _pair_tables() -> tuple[npt.NDArray[np.int16], npt.NDArray[np.int8]]:
    """Zigzag value and size (0: longer) of a varint of at most two bytes, by those bytes."""
    pair = np.arange(1 << 16, dtype=np.int32)
    first, second = pair & 0xFF, pair >> 8
    one_byte = first < 0x80
    raw = np.where(one_byte, first, (first & 0x7F) | (second << 7))
    size = np.where(one_byte, 1, np.where(second < 0x80, 2, 0))
    return ((raw >> 1) ^ -(raw & 1)).astype(np.int16), size.astype(np.int8)


PAIR_VALUE, PAIR_SIZE = _pair_tables()
# Bytes from a record's start to the next one's, by its first two bytes; 0 (slow path)
# for lengths of 3+ bytes and impossible ones (under a record body's 6-byte minimum).
RECORD_STEP: Final[list[int]] = np.where(
    (PAIR_SIZE > 0) & (PAIR_VALUE >= 6), PAIR_SIZE + PAIR_VALUE.astype(np.int32), 0
).tolist()
# One-byte strings by value, for counting runs of equal bytes with bytes.lstrip (in C).
SINGLE_BYTES: Final = [bytes((value,)) for value in range(256)]


def long_varints(u8: npt.NDArray[np.uint8], pos: Int64s, max_bytes: int) -> tuple[Int64s, Int64s]:
    """The zigzag varints of up to ``max_bytes`` bytes at ``pos``, and the positions after."""
    raw = np.zeros(len(pos), dtype=np.uint64)
    after = pos.copy()
    more = np.arange(len(pos))
    for shift in range(0, 7 * max_bytes, 7):
        if not more.size:
            break
        at = after[more]
        byte = u8[at]
        raw[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[more] = at + 1
        more = more[byte >= 0x80]
    if more.size:
        raise ProtocolError("varint too long", error_code=ErrorCode.CORRUPT_MESSAGE)
    one = np.uint64(1)
    return (raw >> one).astype(np.int64) ^ -(raw & one).astype(np.int64), after
