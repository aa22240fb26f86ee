"""The Prometheus text format written in one pass, and the same families for a registry.

prometheus_client's generic writer (``generate_latest``) spends about 8 µs a sample, which at
a thousand partitions (log size, lag, committed offset: three samples each) would be most of
a scrape; these families write themselves with one format string per family. ``metric()``
gives prometheus_client's own family objects, so a ``CollectorRegistry`` can hold them too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString


class Family:
    """One gauge or counter (``kind``) and its samples; a counter's ``name`` is without ``_total``."""

    __slots__ = ("documentation", "kind", "labels", "name", "samples")

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = (), value: float | None = None,
                 kind: str = "gauge") -> None:
        self.name, self.documentation, self.labels, self.kind = name, documentation, tuple(labels), kind
        self.samples: list[tuple[Sequence[str], float]] = [((), value)] if value is not None else []

    def add_metric(self, label_values: Sequence[str], value: float) -> None:
        self.samples.append((label_values, value))

    def metric(self) -> Metric:
        family: GaugeMetricFamily | CounterMetricFamily = (
            CounterMetricFamily(self.name, self.documentation, labels=self.labels) if self.kind == "counter"
            else GaugeMetricFamily(self.name, self.documentation, labels=self.labels))
        for label_values, value in self.samples:
            family.add_metric(list(label_values), value)
        return family

    def render(self, out: list[str]) -> None:
        name = self.name
        out.append(f"# HELP {name} {self.documentation}\n# TYPE {name} {self.kind}\n")
        sample = name + "_total" if self.kind == "counter" else name
        if not self.labels:
            out.extend(f"{sample} {_number(value)}\n" for _, value in self.samples)
            return
        line = sample + "{" + ",".join(f'{label}="%s"' for label in self.labels) + "} %s\n"
        out.extend(line % (*[_escape(v) for v in label_values], _number(value))
                   for label_values, value in self.samples)


class HistogramFamily:
    """A histogram: per label set, each bucket's own count (not yet cumulative) and the sum."""

    __slots__ = ("bounds", "documentation", "labels", "name", "samples")

    def __init__(self, name: str, documentation: str, labels: Sequence[str], bounds: Sequence[float]) -> None:
        self.name, self.documentation, self.labels, self.bounds = name, documentation, tuple(labels), tuple(bounds)
        self.samples: list[tuple[Sequence[str], Sequence[int], float]] = []

    def add_metric(self, label_values: Sequence[str], counts: Sequence[int], total: float) -> None:
        """``counts``: one per bound, then the +Inf bucket's own."""
        self.samples.append((label_values, counts, total))

    def _cumulative(self, counts: Sequence[int]) -> list[tuple[str, int]]:
        running, buckets = 0, []
        for bound, count in zip((*self.bounds, float("inf")), counts, strict=True):
            running += count
            buckets.append((floatToGoString(bound), running))  # type: ignore[no-untyped-call]
        return buckets

    def metric(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        for label_values, counts, total in self.samples:
            family.add_metric(list(label_values), self._cumulative(counts), total)
        return family

    def render(self, out: list[str]) -> None:
        name = self.name
        out.append(f"# HELP {name} {self.documentation}\n# TYPE {name} histogram\n")
        for label_values, counts, total in self.samples:
            pairs = ",".join(f'{label}="{_escape(v)}"' for label, v in zip(self.labels, label_values, strict=True))
            prefix = pairs + "," if pairs else ""
            buckets = self._cumulative(counts)
            out.extend(f'{name}_bucket{{{prefix}le="{le}"}} {count}\n' for le, count in buckets)
            out.append(f"{name}_count{{{pairs}}} {buckets[-1][1]}\n{name}_sum{{{pairs}}} {_number(total)}\n")


def render(families: Iterable[Family | HistogramFamily]) -> bytes:
    out: list[str] = []
    for family in families:
        family.render(out)
    return "".join(out).encode()


def _number(value: float) -> str:
    return str(value) if type(value) is int else floatToGoString(value)  # type: ignore[no-untyped-call]


def _escape(value: str) -> str:
    """A label value in the text format: backslash, double quote and newline escaped."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value
