"""What ``AsyncAdmin`` takes and returns: small frozen values named as in Kafka's Admin API.

They are plain data (no futures, no callbacks) so that the sync facade can hand them
across threads unchanged; the few conversions from the wire that belong to a value
live beside it. ``TopicPartition`` is a named tuple, so ``("t", 0)`` works as
a key wherever one is expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Literal, NamedTuple
from uuid import UUID

from strom.client.errors import KafkaError
from strom.protocol import consumer_protocol
from strom.protocol.errors import ProtocolError

ZERO_UUID = UUID(int=0)

# What ``list_offsets`` looks up for a partition: a named position or a timestamp in ms.
OffsetSpec = Literal["earliest", "latest", "max-timestamp"] | int


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ConfigResourceType(IntEnum):
    """DescribeConfigs / IncrementalAlterConfigs resource types (Kafka's numbering)."""

    TOPIC = 2
    BROKER = 4


class AlterConfigOpType(IntEnum):
    """IncrementalAlterConfigs operations (Kafka's numbering)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigSource(IntEnum):
    """Where a config value came from, as DescribeConfigs v1+ reports it."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    @classmethod
    def from_wire(cls, value: int) -> ConfigSource:
        """A source a newer broker may add is UNKNOWN rather than an error."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create; -1 leaves partitions / replication factor to the broker's defaults."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    # partition -> broker ids; when given, num_partitions and replication_factor stay -1
    replica_assignment: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    topic_id: UUID = ZERO_UUID
    num_partitions: int = -1  # -1 when the broker's version does not report it (< v5)
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class TopicListing:
    name: str
    topic_id: UUID = ZERO_UUID
    internal: bool = False


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int  # -1 when leaderless
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: UUID
    internal: bool
    partitions: tuple[PartitionDescription, ...]


@dataclass(frozen=True, slots=True)
class ConfigResource:
    type: ConfigResourceType
    name: str  # a topic name, or a broker's node id as a string


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    is_default: bool = False
    read_only: bool = False
    is_sensitive: bool = False


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str = ""  # "" when the broker's ListGroups version does not report it (< v4)


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    # the partitions assigned to the member, decoded from the consumer protocol;
    # empty for members of a group that is not a consumer group
    assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the assignor chosen for a consumer group
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    offset: int
    timestamp: int  # -1 when the answer is not about a record (earliest / latest)
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class Lag:
    committed: int
    end_offset: int
    lag: int


def decode_assignment(raw: bytes) -> tuple[TopicPartition, ...]:
    """A consumer group member's assignment: an int16 version, then the body in that version.

    A newer version than we know is read as our newest, as Kafka does: versions only
    append fields. Bytes we cannot read give an empty assignment, not a failed call.
    """
    try:
        assignment = consumer_protocol.decode_assignment(raw)
    except ProtocolError:
        return ()
    return tuple(TopicPartition(*tp) for tp in consumer_protocol.assigned_partitions(assignment))


class AdminBatchError(KafkaError):
    """Some items of a batch call failed.

    It carries the first failure's error code, so ``except KafkaError`` and a check of
    ``error_code`` work as for a single item; ``errors`` maps every failed item to its
    own error and ``results`` holds what the items that succeeded returned, so a
    caller that expects partial failure (creating topics some of which exist) loses
    nothing.
    """

    def __init__(self, errors: dict[Any, KafkaError], results: dict[Any, Any]) -> None:
        key, first = next(iter(errors.items()))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(first.error_code, f"{key!r}: {first.detail or first.error_code.message}{more}")
        self.errors = errors
        self.results = results
