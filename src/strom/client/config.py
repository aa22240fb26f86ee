"""Client configuration under the property names a Kafka user already knows.

Each setting is a typed field whose Python name is the Kafka property with dots turned
into underscores (``linger.ms`` ↔ ``linger_ms``); every Kafka property name maps this
way, so no table of aliases is needed. ``from_properties`` takes either spelling, and
string values as they come from a ``.properties`` file or the command line. Defaults
are the Java client's (Kafka 4.x), so code moved from another client behaves the same.
An unknown name is an error with a suggestion, not a silently ignored typo.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Self

from strom.client.errors import ConfigError
from strom.protocol.compression import CompressionType

COMPRESSION_TYPES = {codec.name.lower(): codec for codec in CompressionType}
ASSIGNORS = ("range", "roundrobin", "cooperative-sticky")
# The Java client's class names for the assignors, accepted for portability.
_JAVA_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """Settings every client shares: where the cluster is and how to talk to it."""

    bootstrap_servers: str = "127.0.0.1:9092"
    client_id: str = "strom"
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1_000
    socket_connection_setup_timeout_ms: int = 10_000
    metadata_max_age_ms: int = 300_000
    allow_auto_create_topics: bool = True

    @classmethod
    def from_properties(cls, properties: Mapping[str, object] | None = None, **overrides: object) -> Self:
        """Build from Kafka property names (``"linger.ms": "5"``) and/or Python names."""
        known = _field_types(cls)
        values: dict[str, Any] = {}
        for name, value in {**(properties or {}), **overrides}.items():
            field = name.replace(".", "_").replace("-", "_")
            if field not in known:
                raise ConfigError(_unknown(cls, name))
            values[field] = _convert(name, value, known[field])
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None

    def with_overrides(self, properties: Mapping[str, object] | None = None, **overrides: object) -> Self:
        """A copy with some properties changed (same spellings as ``from_properties``)."""
        changed = type(self).from_properties(properties, **overrides)
        explicit = {k.replace(".", "_").replace("-", "_") for k in {**(properties or {}), **overrides}}
        return replace(self, **{name: getattr(changed, name) for name in explicit})

    def to_properties(self) -> dict[str, object]:
        """The settings under their Kafka names."""
        return {f.name.replace("_", "."): getattr(self, f.name) for f in fields(self)}

    def bootstrap_addresses(self) -> list[tuple[str, int]]:
        addresses = []
        for entry in self.bootstrap_servers.split(","):
            entry = entry.strip()
            if "://" in entry:
                entry = entry.split("://", 1)[1]
            host, sep, port = entry.rpartition(":")
            if not sep or not port.isdigit():
                raise ConfigError(f"bootstrap.servers entry {entry!r} is not host:port")
            addresses.append((host.strip("[]"), int(port)))
        return addresses

    def __post_init__(self) -> None:
        if not self.bootstrap_servers.strip():
            raise ConfigError("bootstrap.servers is empty")
        self.bootstrap_addresses()
        for name in ("request_timeout_ms", "retry_backoff_ms", "reconnect_backoff_ms",
                     "socket_connection_setup_timeout_ms", "metadata_max_age_ms"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name.replace('_', '.')} must be >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig(ClientConfig):
    acks: int = -1  # "all"
    linger_ms: int = 5
    batch_size: int = 16_384
    buffer_memory: int = 32 * 1024 * 1024
    max_block_ms: int = 60_000
    compression_type: str = "none"
    enable_idempotence: bool = True
    retries: int = 2_147_483_647
    delivery_timeout_ms: int = 120_000
    max_in_flight_requests_per_connection: int = 5
    max_request_size: int = 1_048_576
    partitioner_ignore_keys: bool = False
    # A transactional producer (KIP-98): its id across restarts, and how long the
    # coordinator lets one of its transactions stay open before aborting it.
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000

    def __post_init__(self) -> None:
        ClientConfig.__post_init__(self)
        if self.acks not in (0, 1, -1):
            raise ConfigError(f"acks must be all, -1, 0 or 1, not {self.acks}")
        if self.compression_type not in COMPRESSION_TYPES:
            raise ConfigError(
                f"compression.type {self.compression_type!r} is not one of {sorted(COMPRESSION_TYPES)}")
        if self.transactional_id is not None:
            if not self.enable_idempotence:
                raise ConfigError("transactional.id requires enable.idempotence")
            if not self.transactional_id:
                raise ConfigError("transactional.id must not be empty")
            if self.transaction_timeout_ms <= 0:
                raise ConfigError("transaction.timeout.ms must be > 0")
        if self.enable_idempotence:
            if self.acks != -1:
                raise ConfigError("enable.idempotence requires acks=all")
            if not 1 <= self.max_in_flight_requests_per_connection <= 5:
                raise ConfigError("enable.idempotence requires max.in.flight.requests.per.connection <= 5")
        if self.batch_size < 0 or self.linger_ms < 0 or self.buffer_memory <= 0:
            raise ConfigError("batch.size and linger.ms must be >= 0 and buffer.memory > 0")
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ConfigError("delivery.timeout.ms must be >= linger.ms + request.timeout.ms")

    @property
    def compression(self) -> CompressionType:
        return COMPRESSION_TYPES[self.compression_type]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig(ClientConfig):
    group_id: str | None = None
    group_instance_id: str | None = None
    auto_offset_reset: str = "latest"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    max_poll_records: int = 500
    max_poll_interval_ms: int = 300_000
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    rebalance_timeout_ms: int | None = None  # the Java client sends max.poll.interval.ms
    partition_assignment_strategy: str = "range,cooperative-sticky"
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52_428_800
    fetch_max_wait_ms: int = 500
    max_partition_fetch_bytes: int = 1_048_576
    isolation_level: str = "read_uncommitted"
    check_crcs: bool = True
    exclude_internal_topics: bool = True
    client_rack: str = ""

    def __post_init__(self) -> None:
        ClientConfig.__post_init__(self)
        if self.auto_offset_reset not in ("earliest", "latest", "none"):
            raise ConfigError(
                f"auto.offset.reset must be earliest, latest or none, not {self.auto_offset_reset!r}")
        if self.isolation_level not in ("read_uncommitted", "read_committed"):
            raise ConfigError(f"isolation.level {self.isolation_level!r} is not read_uncommitted or read_committed")
        for name in self.assignors:
            if name not in ASSIGNORS:
                raise ConfigError(f"partition.assignment.strategy {name!r} is not one of {ASSIGNORS}")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
        if self.max_poll_records < 1:
            raise ConfigError("max.poll.records must be >= 1")
        if self.group_instance_id is not None and self.group_id is None:
            raise ConfigError("group.instance.id needs a group.id")

    @property
    def assignors(self) -> list[str]:
        names = [s.strip() for s in self.partition_assignment_strategy.split(",") if s.strip()]
        return [_JAVA_ASSIGNORS.get(name, name) for name in names]

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"


@dataclass(frozen=True, slots=True, kw_only=True)
class AdminConfig(ClientConfig):
    pass


_FIELD_TYPES: dict[type, dict[str, Any]] = {}


def _field_types(cls: type) -> dict[str, Any]:
    types = _FIELD_TYPES.get(cls)
    if types is None:
        types = _FIELD_TYPES[cls] = typing.get_type_hints(cls)
    return types


def _unknown(cls: type, name: str) -> str:
    names = [n.replace("_", ".") for n in _field_types(cls)]
    close = difflib.get_close_matches(name.replace("_", "."), names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{cls.__name__} has no property {name!r}{hint}"


def _convert(name: str, value: object, kind: Any) -> object:
    """A property value as its field's type; strings as a properties file writes them."""
    optional = type(None) in typing.get_args(kind)
    base = next((t for t in typing.get_args(kind) if t is not type(None)), kind) if optional else kind
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{name} cannot be null")
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"{name} must be true or false, not {value!r}")
    if base is int:
        if name.replace("_", ".") == "acks" and str(value).lower() == "all":
            return -1
        if isinstance(value, bool):
            raise ConfigError(f"{name} must be an integer, not {value!r}")
        try:
            return int(value)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be an integer, not {value!r}") from None
    if base is str:
        if isinstance(value, list | tuple):  # e.g. a list of assignors or servers
            return ",".join(str(v) for v in value)
        return str(value)
    return value
