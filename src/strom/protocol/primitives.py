"""The protocol's primitive types, for the generated message codecs.

Generated code inlines fixed-width fields as precompiled ``struct.Struct`` calls and
calls these helpers for everything of variable length. Readers take ``(buf, pos)``
and return ``(value, new_pos)``; writers append to a ``bytearray``. Every reader checks
declared lengths against the buffer, so a hostile length can neither read past the
frame nor allocate more than the frame holds (the rule Kafka's own readers follow: a
collection may not claim more elements than there are bytes left); that raises
``ProtocolError``. A buffer too short for a fixed-width prefix raises ``struct.error``
or ``IndexError`` instead, which ``Message.decode_from`` turns into a ``ProtocolError``
naming the field; code calling these readers directly must do the same.
"""

from __future__ import annotations

from struct import Struct
from typing import NoReturn, Protocol, TypeAlias, TypeVar
from uuid import UUID

from strom.protocol.errors import ProtocolError

Buffer: TypeAlias = bytes | bytearray | memoryview
"""What a byte field may hold: decoded record sets are zero-copy memoryviews."""



class Region(Protocol):
    """Record bytes that are not in memory: a range of a segment file for ``sendfile``.

    The codec only needs its length; whoever sends the encoded buffers writes it with
    ``os.sendfile(socket, fd, position, length)``. The storage engine's ``FileRegion``
    is one; the network layer knows only this protocol, not the storage engine.
    """

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...

    def __len__(self) -> int: ...


Records: TypeAlias = Buffer | Region
"""What a ``records`` field may hold: bytes in memory, or a region sent by ``sendfile``."""

UnknownTaggedFields: TypeAlias = tuple[tuple[int, bytes], ...]

ZERO_UUID = UUID(int=0)

T = TypeVar("T")

INT8 = Struct(">b")
INT16 = Struct(">h")
INT32 = Struct(">i")
INT64 = Struct(">q")
UINT16 = Struct(">H")

# Precompiled structs for arrays of fixed-width elements, by format code and length;
# longer arrays fall back to struct's own format cache.
ARRAY_CACHE = 64
ARRAY_STRUCTS: dict[str, tuple[Struct, ...]] = {
    code: tuple(Struct(f">{n}{code}") for n in range(ARRAY_CACHE)) for code in "bhHiqd?"
}

_uuid_new = UUID.__new__
_set = object.__setattr__
_SAFE_UNKNOWN = ZERO_UUID.is_safe


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """An unsigned 32-bit varint: at most five bytes, the fifth holding four bits."""
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    while True:
        pos += 1
        byte = buf[pos]  # IndexError on truncation: reported as a truncated frame
        if shift == 28 and byte > 0x0F:
            raise ProtocolError("unsigned varint longer than 32 bits")
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + 1
        shift += 7


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0x80:
        out.append(value)
        return
    if value > 0xFFFFFFFF or value < 0:
        raise ValueError(f"unsigned varint out of range: {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)



def _take(buf: Buffer, pos: int, size: int) -> int:
    """The end of a ``size``-byte span at ``pos``, if the buffer holds it."""
    end = pos + size
    if end > len(buf):
        raise ProtocolError(f"length {size} exceeds the {len(buf) - pos} bytes left")
    return end


def read_string(buf: Buffer, pos: int) -> tuple[str, int]:
    (size,) = INT16.unpack_from(buf, pos)
    pos += 2
    if size < 0:
        raise ProtocolError(f"negative string length {size} in a non-nullable field")
    end = _take(buf, pos, size)
    return str(buf[pos:end], "utf-8"), end


def read_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    (size,) = INT16.unpack_from(buf, pos)
    pos += 2
    if size < 0:
        if size != -1:
            raise ProtocolError(f"invalid string length {size}")
        return None, pos
    end = _take(buf, pos, size)
    return str(buf[pos:end], "utf-8"), end


def read_compact_string(buf: Buffer, pos: int) -> tuple[str, int]:
    size, pos = read_uvarint(buf, pos)
    if size == 0:
        raise ProtocolError("null compact string in a non-nullable field")
    end = _take(buf, pos, size - 1)
    return str(buf[pos:end], "utf-8"), end


def read_compact_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    size, pos = read_uvarint(buf, pos)
    if size == 0:
        return None, pos
    end = _take(buf, pos, size - 1)
    return str(buf[pos:end], "utf-8"), end


def write_string(out: bytearray, value: str) -> None:
    raw = value.encode()
    out += INT16.pack(len(raw))
    out += raw


def write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
    else:
        write_string(out, value)


def write_compact_string(out: bytearray, value: str) -> None:
    raw = value.encode()
    write_uvarint(out, len(raw) + 1)
    out += raw


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_string(out, value)


def read_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    (size,) = INT32.unpack_from(buf, pos)
    pos += 4
    if size < 0:
        raise ProtocolError(f"negative bytes length {size} in a non-nullable field")
    end = _take(buf, pos, size)
    return bytes(buf[pos:end]), end


def read_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    (size,) = INT32.unpack_from(buf, pos)
    pos += 4
    if size < 0:
        if size != -1:
            raise ProtocolError(f"invalid bytes length {size}")
        return None, pos
    end = _take(buf, pos, size)
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    size, pos = read_uvarint(buf, pos)
    if size == 0:
        raise ProtocolError("null compact bytes in a non-nullable field")
    end = _take(buf, pos, size - 1)
    return bytes(buf[pos:end]), end


def read_compact_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    size, pos = read_uvarint(buf, pos)
    if size == 0:
        return None, pos
    end = _take(buf, pos, size - 1)
    return bytes(buf[pos:end]), end


def read_view(buf: memoryview, pos: int) -> tuple[memoryview, int]:
    """Zero-copy bytes (record sets, ``zeroCopy`` fields): a view into the frame."""
    (size,) = INT32.unpack_from(buf, pos)
    pos += 4
    if size < 0:
        raise ProtocolError(f"negative bytes length {size} in a non-nullable field")
    end = _take(buf, pos, size)
    return buf[pos:end], end


def read_nullable_view(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    (size,) = INT32.unpack_from(buf, pos)
    pos += 4
    if size < 0:
        if size != -1:
            raise ProtocolError(f"invalid bytes length {size}")
        return None, pos
    end = _take(buf, pos, size)
    return buf[pos:end], end


def read_compact_view(buf: memoryview, pos: int) -> tuple[memoryview, int]:
    size, pos = read_uvarint(buf, pos)
    if size == 0:
        raise ProtocolError("null compact bytes in a non-nullable field")
    end = _take(buf, pos, size - 1)
    return buf[pos:end], end


def read_compact_nullable_view(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    size, pos = read_uvarint(buf, pos)
    if size == 0:
        return None, pos
    end = _take(buf, pos, size - 1)
    return buf[pos:end], end


def write_bytes(out: bytearray, value: Buffer) -> None:
    out += INT32.pack(len(value) if not isinstance(value, memoryview) else value.nbytes)
    out += value


def write_nullable_bytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
    else:
        write_bytes(out, value)


def write_compact_bytes(out: bytearray, value: Buffer) -> None:
    write_uvarint(out, (len(value) if not isinstance(value, memoryview) else value.nbytes) + 1)
    out += value


def write_compact_nullable_bytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_bytes(out, value)


def read_uuid(buf: Buffer, pos: int) -> tuple[UUID, int]:
    end = _take(buf, pos, 16)
    # UUID(bytes=...) validates and converts in Python; build it directly from the int.
    uuid = _uuid_new(UUID)
    _set(uuid, "int", int.from_bytes(buf[pos:end], "big"))
    _set(uuid, "is_safe", _SAFE_UNKNOWN)
    return uuid, end



def bad_array_size(count: int, remaining: int, nullable: bool) -> NoReturn:
    """Raise the error for an element count that is negative or cannot fit."""
    if count < 0:
        if count == -1 and not nullable:
            raise ProtocolError("null array in a non-nullable field")
        raise ProtocolError(f"invalid array length {count}")
    raise ProtocolError(f"array of {count} elements cannot fit in {remaining} bytes")



def read_tag_count(buf: Buffer, pos: int) -> tuple[int, int]:
    """How many tagged fields follow; each takes at least two bytes."""
    count, pos = read_uvarint(buf, pos)
    if count > (len(buf) - pos) // 2:
        raise ProtocolError(f"{count} tagged fields cannot fit in {len(buf) - pos} bytes")
    return count, pos


def read_tag_header(buf: Buffer, pos: int, last_tag: int) -> tuple[int, int, int]:
    """One tagged field's tag and size; tags must be strictly ascending (as Kafka checks)."""
    tag, pos = read_uvarint(buf, pos)
    if tag <= last_tag:
        raise ProtocolError(f"tagged field {tag} out of order or repeated (after {last_tag})")
    size, pos = read_uvarint(buf, pos)
    _take(buf, pos, size)
    return tag, size, pos


def read_unknown_tag(buf: Buffer, pos: int, size: int) -> tuple[bytes, int]:
    end = _take(buf, pos, size)
    return bytes(buf[pos:end]), end


def check_tag_end(pos: int, expected: int, tag: int) -> None:
    if pos != expected:
        raise ProtocolError(f"tagged field {tag} declared {expected - pos} bytes more than it used")



def read_nullable_struct_marker(buf: Buffer, pos: int) -> tuple[bool, int]:
    """Nullable structs are prefixed with int8 -1 (null) or 1 (present); like Kafka's
    readers, any negative marker reads as null."""
    (marker,) = INT8.unpack_from(buf, pos)
    return marker >= 0, pos + 1


def write_unknown_section(out: bytearray, unknown: UnknownTaggedFields) -> None:
    """The tagged-field section of a struct with no known tags in this version."""
    write_tag_section(out, [], unknown)


def write_tag_section(
    out: bytearray, tags: list[tuple[int, Buffer]], unknown: UnknownTaggedFields
) -> None:
    """Known tags that differ from their defaults plus unknown ones, ascending by tag."""
    if unknown:
        tags = sorted([*tags, *unknown], key=lambda entry: entry[0])
    write_uvarint(out, len(tags))
    for tag, raw in tags:
        write_uvarint(out, tag)
        write_uvarint(out, len(raw))
        out += raw


def not_null(value: T | None, name: str, version: int) -> T:
    """A field that is nullable only in other versions of its message."""
    if value is None:
        raise ValueError(f"{name} cannot be null in version {version}")
    return value
