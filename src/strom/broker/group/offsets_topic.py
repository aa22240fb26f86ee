"""The records of ``__consumer_offsets``: Kafka's key and value formats, and a group's partition.

Every record has a key and, unless it is a tombstone, a value. Both start with an
int16 schema version; the rest is Kafka's classic (non-flexible) encoding: int16-length
UTF-8 strings (-1 = null), int32-length bytes, int32 array counts, big-endian ints.
Version 4 of both values is flexible (compact lengths, tagged-field sections), read
here so logs written by a newer Kafka still load.

Keys::

    v0, v1  OffsetCommitKey     group: string, topic: string, partition: int32
    v2      GroupMetadataKey    group: string

Values::

    OffsetCommitValue   v0: offset int64, metadata string, commit_timestamp int64
                        v1: + expire_timestamp int64 (after commit_timestamp)
                        v2: as v0
                        v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
                        v4: v3, flexible
    GroupMetadataValue  protocol_type string, generation int32, protocol nullable string,
                        leader nullable string, current_state_timestamp int64 (v2+),
                        members [member_id string, group_instance_id nullable string (v3+),
                                 client_id string, client_host string,
                                 rebalance_timeout int32 (v1+), session_timeout int32,
                                 subscription bytes, assignment bytes]

A null value (tombstone) deletes the key: an offset, or a whole group's metadata.
Invariants: the log is applied in offset order, the last record for a key wins (so
compaction may drop all but the last); keys of versions this code does not know (the
KIP-848 records, versions 3+) are skipped, not errors.

A group's records all go to partition ``abs(javaStringHashCode(group)) % partitions``,
with Kafka's ``Utils.abs`` (Integer.MIN_VALUE maps to 0).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from struct import Struct
from typing import Final

from strom.protocol import primitives as p
from strom.protocol.errors import ProtocolError

OFFSETS_TOPIC: Final = "__consumer_offsets"
OFFSET_COMMIT_KEY_VERSION: Final = 1
GROUP_METADATA_KEY_VERSION: Final = 2
OFFSET_COMMIT_VALUE_VERSION: Final = 3  # v1 when the commit carries an expire timestamp
GROUP_METADATA_VALUE_VERSION: Final = 3

_INT16 = Struct(">h")
_INT32 = Struct(">i")
_INT64 = Struct(">q")


def java_string_hash_code(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, as a signed 32-bit int."""
    raw = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for index in range(0, len(raw), 2):
        value = (31 * value + ((raw[index] << 8) | raw[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``."""
    code = java_string_hash_code(group_id)
    return (0 if code == -(1 << 31) else abs(code)) % partitions


# --- records ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadataValue, ...] = ()
    current_state_timestamp: int = -1


# --- reading ----------------------------------------------------------------------------


class _Reader:
    """Bounds-checked reads over one record key or value; every fault is a ProtocolError."""

    def __init__(self, buf: p.Buffer, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def _need(self, size: int) -> None:
        if self.pos + size > len(self.buf):
            raise ProtocolError(f"{self.what}: truncated at byte {self.pos} (need {size})")

    def int16(self) -> int:
        self._need(2)
        (value,) = _INT16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(value)

    def int32(self) -> int:
        self._need(4)
        (value,) = _INT32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def int64(self) -> int:
        self._need(8)
        (value,) = _INT64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(value)

    def _call(self, read: object) -> object:
        try:
            value, self.pos = read(self.buf, self.pos)  # type: ignore[operator]
        except (IndexError, ValueError, struct.error) as exc:  # short buffer, bad UTF-8
            raise ProtocolError(f"{self.what}: {exc}") from None
        except ProtocolError as exc:
            raise ProtocolError(f"{self.what}: {exc.reason}") from None
        return value

    def string(self, flexible: bool) -> str:
        value = self._call(p.read_compact_string if flexible else p.read_string)
        assert isinstance(value, str)
        return value

    def nullable_string(self, flexible: bool) -> str | None:
        value = self._call(
            p.read_compact_nullable_string if flexible else p.read_nullable_string
        )
        assert value is None or isinstance(value, str)
        return value

    def bytes_(self, flexible: bool) -> bytes:
        value = self._call(p.read_compact_bytes if flexible else p.read_bytes)
        assert isinstance(value, bytes)
        return value

    def array_count(self, flexible: bool) -> int:
        if flexible:
            count = self._call(p.read_uvarint)
            assert isinstance(count, int)
            count -= 1
        else:
            count = self.int32()
        if count < 0 or count > len(self.buf) - self.pos:
            raise ProtocolError(f"{self.what}: impossible array count {count}")
        return count

    def skip_tags(self) -> None:
        count = self._call(p.read_uvarint)
        assert isinstance(count, int)
        for _ in range(count):
            self._call(p.read_uvarint)  # tag
            size = self._call(p.read_uvarint)
            assert isinstance(size, int)
            self._need(size)
            self.pos += size


def decode_key(buf: p.Buffer) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key of a ``__consumer_offsets`` record; None for record types we do not know."""
    reader = _Reader(buf, "offsets topic key")
    version = reader.int16()
    if version in (0, 1):
        return OffsetCommitKey(reader.string(False), reader.string(False), reader.int32())
    if version == 2:
        return GroupMetadataKey(reader.string(False))
    if version < 0:
        raise ProtocolError(f"offsets topic key: negative version {version}")
    return None


def decode_offset_commit_value(buf: p.Buffer) -> OffsetCommitValue:
    reader = _Reader(buf, "OffsetCommitValue")
    version = reader.int16()
    if not 0 <= version <= 4:
        raise ProtocolError(f"OffsetCommitValue: unknown version {version}")
    flexible = version >= 4
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string(flexible)
    commit_timestamp = reader.int64()
    expire_timestamp = reader.int64() if version == 1 else -1
    if flexible:
        reader.skip_tags()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def decode_group_metadata_value(buf: p.Buffer) -> GroupMetadataValue:
    reader = _Reader(buf, "GroupMetadataValue")
    version = reader.int16()
    if not 0 <= version <= 4:
        raise ProtocolError(f"GroupMetadataValue: unknown version {version}")
    flexible = version >= 4
    protocol_type = reader.string(flexible)
    generation = reader.int32()
    protocol = reader.nullable_string(flexible)
    leader = reader.nullable_string(flexible)
    timestamp = reader.int64() if version >= 2 else -1
    members = tuple(_read_member(reader, version) for _ in range(reader.array_count(flexible)))
    if flexible:
        reader.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, members, timestamp)


def _read_member(reader: _Reader, version: int) -> MemberMetadataValue:
    flexible = version >= 4
    member_id = reader.string(flexible)
    instance_id = reader.nullable_string(flexible) if version >= 3 else None
    client_id = reader.string(flexible)
    client_host = reader.string(flexible)
    rebalance_timeout = reader.int32() if version >= 1 else -1
    session_timeout = reader.int32()
    subscription = reader.bytes_(flexible)
    assignment = reader.bytes_(flexible)
    if flexible:
        reader.skip_tags()
    if rebalance_timeout < 0:
        rebalance_timeout = session_timeout  # v0 had one timeout for both, as Kafka reads it
    return MemberMetadataValue(
        member_id, client_id, client_host, session_timeout, subscription, assignment,
        rebalance_timeout, instance_id,
    )


# --- writing ----------------------------------------------------------------------------


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    out = bytearray(_INT16.pack(OFFSET_COMMIT_KEY_VERSION))
    p.write_string(out, group)
    p.write_string(out, topic)
    out += _INT32.pack(partition)
    return bytes(out)


def encode_group_metadata_key(group: str) -> bytes:
    out = bytearray(_INT16.pack(GROUP_METADATA_KEY_VERSION))
    p.write_string(out, group)
    return bytes(out)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """v1 if the commit has an expire timestamp (as Kafka), else v3."""
    out = bytearray()
    if value.expire_timestamp >= 0:
        out += _INT16.pack(1)
        out += _INT64.pack(value.offset)
        p.write_string(out, value.metadata)
        out += _INT64.pack(value.commit_timestamp)
        out += _INT64.pack(value.expire_timestamp)
    else:
        out += _INT16.pack(OFFSET_COMMIT_VALUE_VERSION)
        out += _INT64.pack(value.offset)
        out += _INT32.pack(value.leader_epoch)
        p.write_string(out, value.metadata)
        out += _INT64.pack(value.commit_timestamp)
    return bytes(out)


def encode_group_metadata_value(value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    """Versions 0-3 (the non-flexible ones)."""
    if not 0 <= version <= 3:
        raise ValueError(f"GroupMetadataValue v{version} is not written here")
    out = bytearray(_INT16.pack(version))
    p.write_string(out, value.protocol_type)
    out += _INT32.pack(value.generation)
    p.write_nullable_string(out, value.protocol)
    p.write_nullable_string(out, value.leader)
    if version >= 2:
        out += _INT64.pack(value.current_state_timestamp)
    out += _INT32.pack(len(value.members))
    for member in value.members:
        p.write_string(out, member.member_id)
        if version >= 3:
            p.write_nullable_string(out, member.group_instance_id)
        p.write_string(out, member.client_id)
        p.write_string(out, member.client_host)
        if version >= 1:
            out += _INT32.pack(member.rebalance_timeout)
        out += _INT32.pack(member.session_timeout)
        p.write_bytes(out, member.subscription)
        p.write_bytes(out, member.assignment)
    return bytes(out)
