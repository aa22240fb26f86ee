"""Zigzag varints, the variable-length integers inside v2 records.

Layout: the signed value ``n`` is zigzag-mapped to ``(n << 1) ^ (n >> 63)`` so small
magnitudes of either sign stay small, then written 7 bits at a time, least
significant group first, with bit 7 set on every byte but the last (protobuf's
encoding). A ``varint`` carries an int32 and takes at most 5 bytes, a ``varlong`` an
int64 in at most 10. No checksum of their own: the batch CRC covers them.

Encoding is table-driven for the values that dominate real records (lengths and
deltas below 8192 in magnitude, 1-2 bytes), so the batch builder appends a cached
``bytes`` object instead of creating one per field.
"""

from __future__ import annotations

from typing import Final

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError

Buffer = bytes | bytearray | memoryview

_TABLE_LIMIT: Final = 1 << 14  # every zigzag value that encodes in at most 2 bytes


def _encode_unsigned(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Built from its two byte forms (value < 128: one byte; else low 7 bits with bit 7 set, then
# the rest) rather than by _encode_unsigned, which took several ms of every start-up.
_ENCODED: Final[list[bytes]] = [bytes((value,)) for value in range(0x80)] + [
    bytes((low | 0x80, high)) for high in range(1, _TABLE_LIMIT >> 7) for low in range(0x80)
]
# The varints of 0, 1, 2, ... 8191 (zigzag maps n >= 0 to 2n): counts, deltas, lengths.
SMALL_VARINTS: Final[list[bytes]] = _ENCODED[0::2]
SMALL_VARINTS_LIMIT: Final = len(SMALL_VARINTS)


def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def encode_varint(value: int) -> bytes:
    """Zigzag varint/varlong bytes of a signed int (the encoding is the same for both)."""
    mapped = (value << 1) ^ (value >> 63)
    return _ENCODED[mapped] if mapped < _TABLE_LIMIT else _encode_unsigned(mapped)


encode_varlong = encode_varint


def encode_unsigned_varint(value: int) -> bytes:
    """Unsigned varint (no zigzag), as flexible-version message fields use."""
    return _ENCODED[value] if value < _TABLE_LIMIT else _encode_unsigned(value)


def varint_size(value: int) -> int:
    mapped = (value << 1) ^ (value >> 63)
    size = 1
    while mapped >= 0x80:
        mapped >>= 7
        size += 1
    return size


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint (int32) at ``pos``; return ``(value, next_pos)``."""
    return _read(buf, pos, 35)


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varlong (int64) at ``pos``; return ``(value, next_pos)``."""
    return _read(buf, pos, 70)


def _read(buf: Buffer, pos: int, max_shift: int) -> tuple[int, int]:
    try:
        byte = buf[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
        result = byte & 0x7F
        shift = 7
        while True:
            pos += 1
            byte = buf[pos]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return (result >> 1) ^ -(result & 1), pos + 1
            shift += 7
            if shift >= max_shift:
                raise ProtocolError(
                    "varint too long", error_code=ErrorCode.CORRUPT_MESSAGE
                )
    except IndexError:
        raise ProtocolError("truncated varint", error_code=ErrorCode.CORRUPT_MESSAGE) from None
