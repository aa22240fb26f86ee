"""What the concurrent consumer reports: per partition and in total.

The numbers an operator needs to see whether the workers keep up: lag (records the
group has not finished, measured against the high watermark, so it includes records
not fetched yet), how many are buffered and in flight, how fast records finish, and
how often they fail. Counters are plain integers bumped on the event loop; a snapshot
is built only when asked for, so metrics cost nothing per record beyond the bumps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from strom.protocol.topic_partition import TopicPartition


@dataclass(slots=True)
class RateMeter:
    """Completions per second over a sliding window, sampled when metrics are read or the
    poll loop ticks: two samples about a second apart, never a per-record timestamp."""

    window_s: float = 1.0
    _samples: list[tuple[float, int]] = field(default_factory=list)

    def sample(self, total: int, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        samples = self._samples
        if samples and now - samples[-1][0] < self.window_s / 4:
            return
        samples.append((now, total))
        while len(samples) > 2 and now - samples[1][0] >= self.window_s:
            samples.pop(0)

    def rate(self, total: int, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        self.sample(total, now)
        if not self._samples:
            return 0.0
        start, start_total = self._samples[0]
        elapsed = now - start
        return (total - start_total) / elapsed if elapsed > 0 else 0.0


@dataclass(slots=True)
class PartitionCounters:
    completed: int = 0
    retries: int = 0
    dead_lettered: int = 0
    skipped: int = 0  # finished before (offset map) and not processed again
    dropped: int = 0  # buffered when the partition was revoked
    rate: RateMeter = field(default_factory=lambda: RateMeter())


@dataclass(frozen=True, slots=True)
class PartitionMetrics:
    """One partition now. ``lag`` is None until a fetch has told the high watermark."""

    lag: int | None
    committable: int | None
    committed: int | None
    buffered: int
    in_flight: int  # fetched and not finished: buffered, running, or waiting to retry
    completed: int
    completed_per_second: float  # since the previous read of the metrics, over at least 1/4 s
    retries: int
    dead_lettered: int
    skipped: int


@dataclass(frozen=True, slots=True)
class ProcessorMetrics:
    """The whole consumer now; ``completed_per_second`` over the last ``window_s`` seconds."""

    partitions: dict[TopicPartition, PartitionMetrics]
    running: int  # records a worker is processing right now
    in_flight: int
    buffered: int
    buffered_bytes: int
    paused: int
    completed: int
    completed_per_second: float
    window_s: float
    retries: int
    dead_lettered: int
    skipped: int
    dropped: int
    commits: int
    commit_failures: int  # refused or failed; the next periodic commit tries again
    revocation_commit_failures: int  # a partition left without its finished work committed

    @property
    def lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions.values())
