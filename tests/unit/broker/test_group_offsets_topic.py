"""The ``__consumer_offsets`` record formats, checked against bytes built by hand from
Kafka's schemas (OffsetCommitKey/Value, GroupMetadataKey/Value), and the partitioning."""

from __future__ import annotations

import struct

import pytest

from strom.broker.group.offsets_topic import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    java_string_hash_code,
    partition_for,
)
from strom.protocol.errors import ProtocolError


def s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def b(raw: bytes) -> bytes:
    return struct.pack(">i", len(raw)) + raw


def test_offset_commit_key_matches_kafka_bytes() -> None:
    expected = struct.pack(">h", 1) + s("g") + s("topic") + struct.pack(">i", 7)
    assert encode_offset_commit_key("g", "topic", 7) == expected
    assert decode_key(expected) == OffsetCommitKey("g", "topic", 7)
    assert decode_key(struct.pack(">h", 0) + s("g") + s("t") + struct.pack(">i", 0)) == OffsetCommitKey("g", "t", 0)


def test_group_metadata_key_and_unknown_versions() -> None:
    expected = struct.pack(">h", 2) + s("grp")
    assert encode_group_metadata_key("grp") == expected
    assert decode_key(expected) == GroupMetadataKey("grp")
    assert decode_key(struct.pack(">h", 3) + s("x")) is None  # KIP-848 record types: skipped


def test_offset_commit_value_v3_and_v1() -> None:
    v3 = struct.pack(">hqi", 3, 42, 5) + s("meta") + struct.pack(">q", 1000)
    value = OffsetCommitValue(42, "meta", 1000, leader_epoch=5)
    assert encode_offset_commit_value(value) == v3
    assert decode_offset_commit_value(v3) == value
    v1 = struct.pack(">hq", 1, 42) + s("") + struct.pack(">qq", 1000, 2000)
    expiring = OffsetCommitValue(42, "", 1000, expire_timestamp=2000)
    assert encode_offset_commit_value(expiring) == v1
    assert decode_offset_commit_value(v1) == expiring
    v0 = struct.pack(">hq", 0, 9) + s("m") + struct.pack(">q", 5)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(9, "m", 5)


def test_offset_commit_value_v4_flexible_with_tags() -> None:
    raw = struct.pack(">hqi", 4, 11, 2) + bytes([4]) + b"abc" + struct.pack(">q", 77) + bytes([1, 0, 2, 9, 9])
    assert decode_offset_commit_value(raw) == OffsetCommitValue(11, "abc", 77, leader_epoch=2)


def _member_v3() -> bytes:
    return (
        s("m-1") + s("inst") + s("client") + s("/127.0.0.1")
        + struct.pack(">ii", 30000, 6000) + b(b"sub") + b(b"asg")
    )


def test_group_metadata_value_v3_matches_kafka_bytes() -> None:
    raw = (
        struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 4) + s("range") + s("m-1")
        + struct.pack(">q", 123) + struct.pack(">i", 1) + _member_v3()
    )
    value = GroupMetadataValue(
        "consumer", 4, "range", "m-1",
        (MemberMetadataValue("m-1", "client", "/127.0.0.1", 6000, b"sub", b"asg", 30000, "inst"),),
        123,
    )
    assert encode_group_metadata_value(value) == raw
    assert decode_group_metadata_value(raw) == value


def test_group_metadata_value_v0_and_null_protocol() -> None:
    member = s("m") + s("c") + s("h") + struct.pack(">i", 10000) + b(b"") + b(b"")
    raw = struct.pack(">h", 0) + s("consumer") + struct.pack(">i", 0) + b"\xff\xff" + b"\xff\xff" + struct.pack(">i", 1) + member
    decoded = decode_group_metadata_value(raw)
    assert decoded.protocol is None and decoded.leader is None
    assert decoded.members[0].rebalance_timeout == 10000  # v0: one timeout for both
    assert decoded.members[0].group_instance_id is None
    assert encode_group_metadata_value(decoded, 0) == raw


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00",
        struct.pack(">h", 1) + s("g"),  # topic missing
        struct.pack(">h", 1) + struct.pack(">h", 50) + b"x",  # string longer than the buffer
        struct.pack(">h", -2),
    ],
)
def test_bad_keys_raise_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_key(raw)


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">h", 9),
        struct.pack(">hq", 3, 1),
        struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 1) + b"\xff\xff" * 2 + struct.pack(">q", 0) + struct.pack(">i", 1000),
        struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 1) + b"\xff\xff" * 2 + struct.pack(">q", 0) + struct.pack(">i", -5),
    ],
)
def test_bad_values_raise_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        if len(raw) > 2 and raw[:2] == struct.pack(">h", 3) and len(raw) > 12:
            decode_group_metadata_value(raw)
        else:
            decode_offset_commit_value(raw)


def test_java_string_hash_code_and_partition() -> None:
    assert java_string_hash_code("") == 0
    assert java_string_hash_code("a") == 97
    assert java_string_hash_code("hello") == 99162322
    assert java_string_hash_code("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert java_string_hash_code("😀") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogate pair
    negative = java_string_hash_code("my-group")
    assert negative < 0
    assert partition_for("my-group", 50) == -negative % 50  # Math.abs, not a bit mask
    assert partition_for("zzzzzzz", 50) == abs(java_string_hash_code("zzzzzzz")) % 50
