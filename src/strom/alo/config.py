"""``ParallelConsumerConfig``: the concurrent consumer's own settings.

The Kafka consumer's settings stay in ``ConsumerConfig`` under Kafka's names; these are
the ones a Kafka consumer does not have. They are spelled like Kafka properties
(``max.concurrency`` ↔ ``max_concurrency``) and take the same string forms, so one
``.properties`` file can carry both. The names follow Confluent's Parallel Consumer
where it has one (ordering, max concurrency, commit interval, retry delay).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from strom.client.errors import ConfigError

Ordering = Literal["partition", "key", "unordered"]
ORDERINGS: tuple[str, ...] = get_args(Ordering)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelConsumerConfig:
    """How records are spread over workers, committed, retried and bounded.

    ``ordering``: ``partition`` runs one record of a partition at a time (the plain
    consumer's order, parallel only across partitions); ``key`` runs records of one key in
    offset order and different keys in parallel; ``unordered`` runs anything at once.

    ``max.uncommitted.offsets.per.partition`` bounds the span between a partition's
    oldest unfinished record and its newest fetched one. A stuck record would otherwise
    let finished ones pile up without limit (memory, and a commit metadata string that
    no longer fits). The default keeps the span's bitset (one bit per offset, base64)
    inside the broker's ``offset.metadata.max.bytes`` default of 4096.
    """

    ordering: Ordering = "key"
    max_concurrency: int = 16  # workers: threads for a plain handler, tasks for a coroutine
    max_records_in_flight: int = 10_000  # fetched and not yet finished, all partitions
    max_buffered_bytes: int = 64 * 1024 * 1024  # keys + values of those records
    max_buffered_records_per_partition: int = 1_000  # the partition is paused at this many
    max_uncommitted_offsets_per_partition: int = 24_000
    commit_interval_ms: int = 1_000
    offset_metadata_encoding: bool = True  # finished offsets past the committed one, in the metadata
    offset_metadata_max_bytes: int = 4096  # the broker's offset.metadata.max.bytes
    retry_backoff_ms: int = 100  # first retry delay; doubles per attempt
    retry_backoff_max_ms: int = 10_000
    max_attempts: int = 0  # 0: retry forever; else a dead letter (or a stop) after this many
    dead_letter_topic: str | None = None
    poll_timeout_ms: int = 100
    shutdown_timeout_ms: int = 30_000  # close() waits this long for records in progress

    @classmethod
    def from_properties(cls, properties: dict[str, object] | None = None,
                        **overrides: object) -> ParallelConsumerConfig:
        """From property names (``"max.concurrency": "8"``) and/or Python names."""
        return _FromProperties.build(properties, overrides)

    def __post_init__(self) -> None:
        if self.ordering not in ORDERINGS:
            raise ConfigError(f"ordering must be one of {ORDERINGS}, not {self.ordering!r}")
        for name in ("max_concurrency", "max_records_in_flight", "max_buffered_bytes",
                     "max_buffered_records_per_partition", "max_uncommitted_offsets_per_partition",
                     "commit_interval_ms", "poll_timeout_ms"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name.replace('_', '.')} must be >= 1")
        for name in ("retry_backoff_ms", "retry_backoff_max_ms", "max_attempts", "shutdown_timeout_ms"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name.replace('_', '.')} must be >= 0")
        if self.offset_metadata_max_bytes < 64:
            raise ConfigError("offset.metadata.max.bytes must be >= 64 to hold any offset map")
        if self.dead_letter_topic is not None and not self.dead_letter_topic.strip():
            raise ConfigError("dead.letter.topic is empty; leave it unset for none")

    def retry_delay(self, attempt: int) -> float:
        """Seconds before attempt ``attempt + 1``: exponential, so a failing dependency is
        not hammered, and capped, so a record is retried within a known time."""
        delay_ms = min(self.retry_backoff_ms * (2 ** min(attempt - 1, 30)), self.retry_backoff_max_ms)
        return float(delay_ms) / 1000


class _FromProperties:
    """Reuses the client config's parsing (dots, string values, typo suggestions)."""

    @staticmethod
    def build(properties: dict[str, object] | None, overrides: dict[str, object]) -> ParallelConsumerConfig:
        from strom.client import config as client_config

        known = client_config._field_types(ParallelConsumerConfig)
        values: dict[str, object] = {}
        for name, value in {**(properties or {}), **overrides}.items():
            field = name.replace(".", "_").replace("-", "_")
            if field not in known:
                raise ConfigError(client_config._unknown(ParallelConsumerConfig, name))
            kind = known[field]
            if field == "ordering":
                values[field] = str(value)
            else:
                values[field] = client_config._convert(name, value, kind)
        try:
            return ParallelConsumerConfig(**values)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None


__all__ = ["ORDERINGS", "Ordering", "ParallelConsumerConfig"]
