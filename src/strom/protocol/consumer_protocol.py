"""The consumer group's embedded formats: ConsumerProtocolSubscription and ConsumerProtocolAssignment.

A ``consumer`` group carries these as opaque bytes inside JoinGroup (a member's
subscription), SyncGroup (the leader's assignments), DescribeGroups and the
``__consumer_offsets`` group records. Unlike a request body they carry their own
version: an int16 prefix, then the body in that version (Kafka's ``ConsumerProtocol``).

Reading follows Kafka: a version newer than the codec knows is read as the newest it
knows, because these formats only ever append fields; a negative version or fewer
than two bytes is a ``ProtocolError`` naming what was wrong, never an ``IndexError``.
The client's coordinator, its admin client and the broker's group coordinator all
read and write these bytes through this module only.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable
from typing import Final

from strom.protocol.errors import ProtocolError
from strom.protocol.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
)
from strom.protocol.messages.consumer_protocol_assignment import (
    TopicPartition as AssignedTopic,
)
from strom.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from strom.protocol.messages.consumer_protocol_subscription import (
    TopicPartition as OwnedTopic,
)
from strom.protocol.topic_partition import TopicPartition

_VERSION_PREFIX: Final = struct.Struct(">h")
SUBSCRIPTION_VERSION: Final = ConsumerProtocolSubscription.VALID_VERSIONS[-1]
ASSIGNMENT_VERSION: Final = ConsumerProtocolAssignment.VALID_VERSIONS[-1]

__all__ = [
    "ASSIGNMENT_VERSION",
    "SUBSCRIPTION_VERSION",
    "ConsumerProtocolAssignment",
    "ConsumerProtocolSubscription",
    "assigned_partitions",
    "assignment",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "owned_partitions",
    "subscription",
]


def encode_subscription(value: ConsumerProtocolSubscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    """The version prefix, then ``value`` in that version (a JoinGroup protocol's metadata)."""
    return _VERSION_PREFIX.pack(version) + value.encode(version)


def decode_subscription(data: bytes | memoryview) -> ConsumerProtocolSubscription:
    """A member's subscription of any version; raises ``ProtocolError`` if unreadable."""
    version = _read_version(data, "ConsumerProtocolSubscription", SUBSCRIPTION_VERSION)
    return ConsumerProtocolSubscription.decode(version, memoryview(data)[2:], exact=False)


def encode_assignment(value: ConsumerProtocolAssignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    """The version prefix, then ``value`` in that version (a SyncGroup member assignment)."""
    return _VERSION_PREFIX.pack(version) + value.encode(version)


def decode_assignment(data: bytes | memoryview) -> ConsumerProtocolAssignment:
    """A member's assignment of any version; raises ``ProtocolError`` if unreadable.

    Empty bytes are what a broker hands a member the leader assigned nothing (or before
    any SyncGroup), so they decode to an empty assignment, as in Kafka's consumer.
    """
    if len(data) == 0:
        return ConsumerProtocolAssignment()
    version = _read_version(data, "ConsumerProtocolAssignment", ASSIGNMENT_VERSION)
    return ConsumerProtocolAssignment.decode(version, memoryview(data)[2:], exact=False)


def subscription(topics: Iterable[str], owned: Iterable[TopicPartition] = (), *, generation_id: int = -1,
                 rack_id: str | None = None) -> ConsumerProtocolSubscription:
    """A subscription with topics sorted and owned partitions grouped by topic (as Java writes them)."""
    return ConsumerProtocolSubscription(
        topics=tuple(sorted(topics)),
        owned_partitions=tuple(OwnedTopic(topic=t, partitions=ps) for t, ps in _by_topic(owned)),
        generation_id=generation_id, rack_id=rack_id)


def assignment(partitions: Iterable[TopicPartition]) -> ConsumerProtocolAssignment:
    """An assignment of ``partitions``, grouped by topic, in sorted order."""
    return ConsumerProtocolAssignment(
        assigned_partitions=tuple(AssignedTopic(topic=t, partitions=ps) for t, ps in _by_topic(partitions)))


def owned_partitions(value: ConsumerProtocolSubscription) -> frozenset[TopicPartition]:
    """The partitions a member says it owns, flattened."""
    return frozenset((t.topic, p) for t in value.owned_partitions for p in t.partitions)


def assigned_partitions(value: ConsumerProtocolAssignment) -> list[TopicPartition]:
    """The partitions of an assignment, flattened in the order they were written."""
    return [(t.topic, p) for t in value.assigned_partitions for p in t.partitions]


def _read_version(data: bytes | memoryview, name: str, newest: int) -> int:
    if len(data) < _VERSION_PREFIX.size:
        raise ProtocolError(f"{len(data)} bytes: too short for the int16 version prefix",
                            message_name=name, field="version")
    version: int = _VERSION_PREFIX.unpack_from(data)[0]
    if version < 0:
        raise ProtocolError(f"unknown version {version}", message_name=name, field="version")
    return min(version, newest)


def _by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, tuple[int, ...]]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(partitions):
        grouped[topic].append(partition)
    return [(topic, tuple(numbers)) for topic, numbers in grouped.items()]
