"""The ConsumerProtocol version-prefixed codec: every version round-trips, bad input is a ProtocolError."""

from __future__ import annotations

import struct

import pytest

from strom.protocol import consumer_protocol
from strom.protocol.errors import ProtocolError
from strom.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from strom.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription

OWNED = [("orders", 2), ("audit", 0), ("orders", 0)]


@pytest.mark.parametrize("version", ConsumerProtocolSubscription.VALID_VERSIONS)
def test_subscription_round_trips_in_every_version(version: int) -> None:
    value = consumer_protocol.subscription(["orders", "audit"], OWNED, generation_id=7, rack_id="r1")
    data = consumer_protocol.encode_subscription(value, version)
    assert struct.unpack_from(">h", data) == (version,)
    decoded = consumer_protocol.decode_subscription(data)
    assert decoded.topics == ("audit", "orders")
    # fields appear with the version that introduced them (owned partitions v1, generation and rack v3)
    assert consumer_protocol.owned_partitions(decoded) == (frozenset(OWNED) if version >= 1 else frozenset())
    assert decoded.generation_id == (7 if version >= 2 else -1)
    assert decoded.rack_id == ("r1" if version >= 3 else None)


@pytest.mark.parametrize("version", ConsumerProtocolAssignment.VALID_VERSIONS)
def test_assignment_round_trips_in_every_version(version: int) -> None:
    data = consumer_protocol.encode_assignment(consumer_protocol.assignment(OWNED), version)
    assert struct.unpack_from(">h", data) == (version,)
    decoded = consumer_protocol.decode_assignment(data)
    assert consumer_protocol.assigned_partitions(decoded) == [("audit", 0), ("orders", 0), ("orders", 2)]


def test_a_newer_version_is_read_as_the_newest_known() -> None:
    newest = consumer_protocol.SUBSCRIPTION_VERSION
    body = consumer_protocol.subscription(["t"], [("t", 1)], generation_id=3).encode(newest)
    future = struct.pack(">h", newest + 5) + body + b"fields a newer version appended"
    decoded = consumer_protocol.decode_subscription(future)
    assert decoded.topics == ("t",)
    assert decoded.generation_id == 3


def test_empty_assignment_bytes_are_no_partitions() -> None:
    assert consumer_protocol.assigned_partitions(consumer_protocol.decode_assignment(b"")) == []


@pytest.mark.parametrize("data", [b"", b"\x00"])
def test_too_short_for_the_version_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError, match="too short for the int16 version prefix"):
        consumer_protocol.decode_subscription(data)
    if data:
        with pytest.raises(ProtocolError, match="too short"):
            consumer_protocol.decode_assignment(data)


def test_a_negative_version_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="unknown version -1"):
        consumer_protocol.decode_subscription(b"\xff\xff\x00\x00\x00\x00")
    with pytest.raises(ProtocolError, match="unknown version -2"):
        consumer_protocol.decode_assignment(b"\xff\xfe\x00\x00\x00\x00")


@pytest.mark.parametrize("cut", [3, 6, 10])
def test_a_truncated_body_is_a_protocol_error_not_an_index_error(cut: int) -> None:
    subscription = consumer_protocol.encode_subscription(consumer_protocol.subscription(["orders"], OWNED))
    assignment = consumer_protocol.encode_assignment(consumer_protocol.assignment(OWNED))
    with pytest.raises(ProtocolError):
        consumer_protocol.decode_subscription(subscription[:cut])
    with pytest.raises(ProtocolError):
        consumer_protocol.decode_assignment(assignment[:cut])
