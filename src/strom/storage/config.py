"""Per-topic log configuration with Kafka's property names and defaults.

On disk (``<data-dir>/topic-configs/<topic>.properties``) a topic's config is a
Java-properties text file holding only the topic's *overrides*, one ``name=value``
per line, e.g. ``retention.ms=3600000``; ``#`` starts a comment. Anything not in the
file takes the broker default, so changing a broker default reaches every topic that
did not override it, as in Kafka. The file is replaced atomically (temp + rename).

Invariant: ``LogConfig`` is frozen; a config change makes a new object and the log
picks it up on its next operation.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from strom.protocol.error_codes import ErrorCode
from strom.storage.errors import StorageError

LONG_MAX: Final = 2**63 - 1


def _kafka(name: str) -> dict[str, str]:
    return {"kafka": name}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """One topic's log settings; field metadata carries the Kafka property name."""

    segment_bytes: int = field(default=1 << 30, metadata=_kafka("segment.bytes"))
    segment_ms: int = field(default=7 * 24 * 3600 * 1000, metadata=_kafka("segment.ms"))
    segment_index_bytes: int = field(default=10 << 20, metadata=_kafka("segment.index.bytes"))
    index_interval_bytes: int = field(default=4096, metadata=_kafka("index.interval.bytes"))
    flush_messages: int = field(default=LONG_MAX, metadata=_kafka("flush.messages"))
    flush_ms: int = field(default=LONG_MAX, metadata=_kafka("flush.ms"))
    retention_ms: int = field(default=7 * 24 * 3600 * 1000, metadata=_kafka("retention.ms"))
    retention_bytes: int = field(default=-1, metadata=_kafka("retention.bytes"))
    cleanup_policy: str = field(default="delete", metadata=_kafka("cleanup.policy"))
    message_timestamp_type: str = field(
        default="CreateTime", metadata=_kafka("message.timestamp.type")
    )
    # How far a CreateTime record's timestamp may lie before / after the broker's clock
    # (KIP-937); a batch with one outside is refused, naming those records. Unbounded by
    # default, as in Kafka 3.9. The deprecated difference.max.ms bounds both sides
    # where the newer settings are left at their defaults (Kafka's LogConfig).
    message_timestamp_before_max_ms: int = field(
        default=LONG_MAX, metadata=_kafka("message.timestamp.before.max.ms"))
    message_timestamp_after_max_ms: int = field(
        default=LONG_MAX, metadata=_kafka("message.timestamp.after.max.ms"))
    message_timestamp_difference_max_ms: int = field(
        default=LONG_MAX, metadata=_kafka("message.timestamp.difference.max.ms"))
    max_message_bytes: int = field(default=1048588, metadata=_kafka("max.message.bytes"))
    file_delete_delay_ms: int = field(default=60000, metadata=_kafka("file.delete.delay.ms"))
    compression_type: str = field(default="producer", metadata=_kafka("compression.type"))
    delete_retention_ms: int = field(default=86400000, metadata=_kafka("delete.retention.ms"))
    min_compaction_lag_ms: int = field(default=0, metadata=_kafka("min.compaction.lag.ms"))
    max_compaction_lag_ms: int = field(default=LONG_MAX, metadata=_kafka("max.compaction.lag.ms"))
    min_cleanable_dirty_ratio: float = field(
        default=0.5, metadata=_kafka("min.cleanable.dirty.ratio")
    )
    # posix_fallocate each new segment to segment.bytes (see ``segment``). Off by
    # default as in Kafka: every partition then holds segment.bytes of disk at once.
    preallocate: bool = field(default=False, metadata=_kafka("preallocate"))
    # acks=all produces are refused (NOT_ENOUGH_REPLICAS) while the ISR is smaller.
    min_insync_replicas: int = field(default=1, metadata=_kafka("min.insync.replicas"))
    # Read by a cluster's controller, not by the log: whether a replica outside the ISR may
    # lead when no in-sync one is alive (and lose what only the ISR had). Off, as Kafka 0.11+.
    unclean_leader_election_enable: bool = field(
        default=False, metadata=_kafka("unclean.leader.election.enable"))
    # Deprecated settings Kafka 3.9 still accepts and lists, so older tools keep working;
    # both are ignored (see DEPRECATED_TOPIC_CONFIGS). Defaults are Kafka 3.9's.
    message_format_version: str = field(default="3.0-IV1", metadata=_kafka("message.format.version"))
    message_downconversion_enable: bool = field(
        default=True, metadata=_kafka("message.downconversion.enable")
    )
    # Derived, not a setting (no Kafka name): whether produced CreateTime timestamps are
    # checked at all (not by default). Computed once in __post_init__ because every
    # produce asks (Partition.append_as_leader), where a property chain cost four calls.
    bounds_timestamps: bool = field(default=False, init=False, repr=False, compare=False, metadata=_kafka(""))

    def __post_init__(self) -> None:
        if self.segment_bytes < 14 or self.segment_index_bytes < 12:
            raise _invalid("segment.bytes and segment.index.bytes are too small")
        if self.index_interval_bytes < 0 or self.max_message_bytes < 0:
            raise _invalid("index.interval.bytes and max.message.bytes cannot be negative")
        if self.flush_messages < 1 or self.flush_ms < 0 or self.segment_ms < 1:
            raise _invalid("flush.messages/segment.ms must be >= 1, flush.ms >= 0")
        if self.min_insync_replicas < 1:
            raise _invalid("min.insync.replicas must be >= 1")
        if min(self.message_timestamp_before_max_ms, self.message_timestamp_after_max_ms,
               self.message_timestamp_difference_max_ms) < 0:
            raise _invalid("message.timestamp.before.max.ms, after.max.ms and difference.max.ms must be >= 0")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise _invalid(f"message.timestamp.type {self.message_timestamp_type!r}")
        if not _MESSAGE_FORMAT_VERSION.fullmatch(self.message_format_version):
            raise _invalid(f"message.format.version {self.message_format_version!r} is not a valid version")
        if self.compression_type not in COMPRESSION_TYPES:
            # Kafka's ValidString: case-sensitive, and its message word for word.
            raise StorageError(
                f"Invalid value {self.compression_type} for configuration compression.type: "
                f"String must be one of: {', '.join(COMPRESSION_TYPES)}", ErrorCode.INVALID_CONFIG)
        policies = set(self.cleanup_policy.replace(" ", "").split(","))
        if not policies or not policies <= {"delete", "compact"}:
            raise _invalid(f"cleanup.policy {self.cleanup_policy!r}")
        object.__setattr__(self, "bounds_timestamps", not self.log_append_time and (
            self.timestamp_before_max_ms != LONG_MAX or self.timestamp_after_max_ms != LONG_MAX))

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def timestamp_before_max_ms(self) -> int:
        """The bound in force: before.max.ms if set, else the deprecated difference.max.ms."""
        before = self.message_timestamp_before_max_ms
        return before if before != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        after = self.message_timestamp_after_max_ms
        return after if after != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def deletes(self) -> bool:
        """Whether time/size retention applies (``delete`` in cleanup.policy)."""
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        return "compact" in self.cleanup_policy

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """A copy with Kafka-named string overrides applied (what AlterConfigs sends)."""
        changes: dict[str, Any] = {}
        for name, text in overrides.items():
            python_name = _BY_KAFKA_NAME.get(name)
            if python_name is None:
                raise _invalid(f"unknown topic config {name!r}")
            changes[python_name] = _parse(name, _TYPES[python_name], text)
        return dataclasses.replace(self, **changes)

    def overrides_against(self, defaults: LogConfig) -> dict[str, str]:
        """Kafka-named settings that differ from ``defaults``; what the file stores."""
        result: dict[str, str] = {}
        for item in _SETTINGS:
            value = getattr(self, item.name)
            if value != getattr(defaults, item.name):
                result[item.metadata["kafka"]] = _format(value)
        return result

    def to_properties(self) -> dict[str, str]:
        """Every setting by its Kafka name (DescribeConfigs answers from this)."""
        return {
            item.metadata["kafka"]: _format(getattr(self, item.name))
            for item in _SETTINGS
        }


# The compression.type values Kafka 3.9 accepts, in the order its error message lists them.
COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# Why each deprecated setting is accepted and ignored: logged (once per topic and value)
# when a topic sets it. Kafka 3.9 ignores message.format.version since the 3.0
# inter-broker protocol (records are always v2); message.downconversion.enable only
# matters for Fetch v0-v3, which Strom does not serve, so there is nothing to convert.
DEPRECATED_TOPIC_CONFIGS: Final = {
    "message.format.version": "is ignored because the inter-broker protocol version is greater than or "
    "equal to 3.0 (records are always written in format v2). This configuration is deprecated and "
    "removed in Apache Kafka 4.0",
    "message.downconversion.enable": "is ignored because Strom never down-converts records (it serves "
    "Fetch v4 and later only). This configuration is deprecated and a no-op in Apache Kafka 4.0",
}
# What Kafka's MetadataVersionValidator accepts, in shape: "0.10.2", "2.8-IV1", "3.0-IV1".
_MESSAGE_FORMAT_VERSION: Final = re.compile(r"(0\.(8|9|10|11)(\.\d+){0,2}|[1-3]\.\d+(\.\d+)?)(-IV\d+)?")

# The settings: every field with a Kafka name (bounds_timestamps is derived).
_SETTINGS: Final = tuple(item for item in dataclasses.fields(LogConfig) if item.metadata["kafka"])
_BY_KAFKA_NAME: Final = {item.metadata["kafka"]: item.name for item in _SETTINGS}
_TYPES: Final = {item.name: type(item.default) for item in _SETTINGS}


def _invalid(reason: str) -> StorageError:
    return StorageError(f"invalid topic config: {reason}", ErrorCode.INVALID_CONFIG)


def _parse(name: str, kind: type, text: str) -> int | float | str | bool:
    try:
        if kind is bool:
            if text.strip().lower() not in ("true", "false"):
                raise ValueError(text)
            return text.strip().lower() == "true"
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        return text.strip()
    except ValueError as exc:
        raise _invalid(f"{name}={text!r}") from exc


def _format(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_properties(text: str) -> dict[str, str]:
    """``name=value`` lines; blank lines and ``#``/``!`` comments skipped."""
    result: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        name, _, value = line.partition("=")
        result[name.strip()] = value.strip()
    return result


def format_properties(properties: Mapping[str, str]) -> str:
    lines = ["# Strom topic config overrides (Kafka property names)"]
    lines += [f"{name}={value}" for name, value in sorted(properties.items())]
    return "\n".join(lines) + "\n"
