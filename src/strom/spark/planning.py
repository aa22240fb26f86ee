"""Driver-side planning: which partitions, which offsets, and how the work is cut into tasks.

It runs where Spark plans the query (the driver's Python data-source worker), never
on executors. Every offset it hands on is concrete: ``earliest``/``latest`` and
timestamps are resolved against the brokers here, once, so an input partition means the
same records however often Spark re-runs its task, and a streaming checkpoint holds only
plain numbers.

Offset ranges are half-open, ``[start, end)``, as Kafka's positions are.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.protocol.topic_partition import TopicPartition
from strom.spark.options import (
    EARLIEST,
    LATEST,
    OffsetRequest,
    OptionError,
    SourceOptions,
)

if TYPE_CHECKING:
    from strom.client.sync import Admin

log = logging.getLogger(__name__)


class DataLossError(RuntimeError):
    """Records the query should read are gone (retention, DeleteRecords, a re-created topic).

    Raised only with ``failOnDataLoss=true`` (the default), as Spark's Kafka source does;
    with ``false`` the query skips to what is still there and logs a warning.
    """


@dataclass(frozen=True, slots=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


class OffsetReader:
    """The brokers' view of the subscribed partitions, through one admin client."""

    def __init__(self, options: SourceOptions) -> None:
        from strom.client.sync import Admin

        self.options = options
        self.admin: Admin = Admin({"bootstrap.servers": options.client.bootstrap_servers,
                                   "client.id": f"{options.group_id_prefix}-driver"})

    def close(self) -> None:
        self.admin.close()

    def partitions(self) -> list[TopicPartition]:
        """Every partition the query reads now (new ones appear as topics grow)."""
        opts = self.options
        existing = set(self.admin.list_topics())
        if opts.assign:
            missing = sorted({t for t, _ in opts.assign} - existing)
            if missing:
                raise OptionError(f"assigned topics do not exist: {', '.join(missing)}")
        topics = sorted(opts.topics_wanted(existing) & existing)
        if not topics:
            return []
        described = self.admin.describe_topics(topics)
        found = sorted((t, p.partition) for t, d in described.items() for p in d.partitions)
        if opts.assign:
            wanted = set(opts.assign)
            absent = sorted(wanted - set(found))
            if absent:
                raise OptionError(f"assigned partitions do not exist: {absent}")
            return sorted(wanted)
        return found

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list(dict.fromkeys(tps, "earliest"))

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list(dict.fromkeys(tps, "latest"))

    def _list(self, specs: Mapping[TopicPartition, str | int]) -> dict[TopicPartition, int]:
        from strom.client.admin_types import TopicPartition as NamedPartition

        if not specs:
            return {}
        isolation = self.options.client.client.get("isolation.level", "read_uncommitted")
        answers = self.admin.list_offsets(
            {NamedPartition(*tp): spec for tp, spec in specs.items()},  # type: ignore[misc]
            isolation_level=isolation)
        return {(tp[0], tp[1]): r.offset for tp, r in answers.items()}

    def resolve(self, request: OffsetRequest, tps: list[TopicPartition],
                *, what: str) -> dict[TopicPartition, int]:
        """Concrete offsets for ``tps`` from a starting/ending request."""
        kind, arg = request
        if kind == "earliest":
            return self.earliest(tps)
        if kind == "latest":
            return self.latest(tps)
        if kind == "offsets":
            assert isinstance(arg, dict)
            out = _every_partition(arg, tps, f"{what} offsets")
            earliest = self.earliest(tp for tp, o in out.items() if o == EARLIEST)
            latest = self.latest(tp for tp, o in out.items() if o == LATEST)
            return {tp: earliest.get(tp, latest.get(tp, o)) for tp, o in out.items()}
        if kind == "timestamp":
            assert isinstance(arg, int)
            stamps = dict.fromkeys(tps, arg)
        else:
            assert isinstance(arg, dict)
            stamps = _every_partition(arg, tps, f"{what}OffsetsByTimestamp")
        found = self._list(stamps)
        none = [tp for tp, o in found.items() if o < 0]
        if none:
            if what == "starting" and self.options.no_timestamp_match == "error":
                raise OptionError(f"no record at or after the {what} timestamp in {sorted(none)}; "
                                  "set startingOffsetsByTimestampStrategy=latest to start at the end")
            found.update(self.latest(none))
        return found


def _every_partition(given: dict[TopicPartition, int], tps: list[TopicPartition],
                     option: str) -> dict[TopicPartition, int]:
    """Per-partition JSON must name every partition the query reads, as in Spark."""
    missing = [tp for tp in tps if tp not in given]
    if missing:
        raise OptionError(f"{option} must name every partition the query reads; missing {missing}")
    return {tp: given[tp] for tp in tps}


def check_data_loss(ranges: list[OffsetRange], earliest: Mapping[TopicPartition, int],
                    latest: Mapping[TopicPartition, int], *, fail: bool) -> list[OffsetRange]:
    """Ranges that start below the log start (or past the end) lost records."""
    out = []
    for r in ranges:
        tp = (r.topic, r.partition)
        low, high = earliest.get(tp, r.start), latest.get(tp, r.end)
        start, end = r.start, r.end
        if start < low or end > high:
            message = (f"{r.topic}-{r.partition}: offsets [{start}, {end}) are no longer all in the log "
                       f"(it holds [{low}, {high})): records were deleted by retention or "
                       "DeleteRecords, or the topic was re-created")
            if fail:
                raise DataLossError(message + ". Set failOnDataLoss=false to skip them.")
            log.warning("%s; skipping them (failOnDataLoss=false)", message)
            end = min(end, high)
            start = min(max(start, low), end)
        out.append(OffsetRange(r.topic, r.partition, start, end))
    return out


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None,
                 max_records: int | None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: cut large ranges so there are enough tasks.

    With ``minPartitions`` above the number of ranges, each range gets pieces in
    proportion to its share of all records (at least ``minPartitions`` in all); ``maxRecordsPerPartition`` caps every piece.
    Empty ranges are dropped.
    """
    ranges = [r for r in ranges if r.size > 0]
    if max_records is not None:
        ranges = [piece for r in ranges for piece in _cut(r, math.ceil(r.size / max_records))]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    out = []
    for r in ranges:
        # Spark rounds the share, which can leave fewer tasks than asked; the ceiling
        # keeps the promise (the shares sum to min_partitions).
        out.extend(_cut(r, math.ceil(r.size / total * min_partitions)))
    return out


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(bounds)]


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: int) -> dict[TopicPartition, int]:
    """Spread ``limit`` records over the partitions in proportion to what each has waiting.

    Spark's Kafka source does the same, so a partition with a large backlog cannot starve
    the others. At least one record per waiting partition, so every trigger makes
    progress.
    """
    sizes = {tp: max(end - start.get(tp, end), 0) for tp, end in latest.items()}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        prorate = limit * sizes[tp] / total
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(begin + step, end)
    return out


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON: ``{"topic": {"0": 23}}``."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}
