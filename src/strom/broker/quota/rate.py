"""SampledRate: a rate over sample windows, as Kafka's ``Rate`` over a ``WindowedSum``.

A quota is judged on the rate of the last ``samples`` windows of ``window_ms`` each
(``quota.window.num`` x ``quota.window.size.seconds``: 11 x 1 s by default). Values are
added to the current sample; a sample older than one window is complete and the next
record starts the following one, reusing the oldest slot. A sample whose window began
``samples x window_ms`` or longer ago is obsolete: it is zeroed before measuring.

The rate's divisor is Kafka's ``Rate.windowSize``: the time since the oldest live
sample began, but never less than ``samples - 1`` whole windows, so a client's first
burst is measured against ~10 s, not the few milliseconds it has existed (which would
throttle every new client), and a client idle for a while is not judged on one sample.

The throttle time is Kafka's ``QuotaUtils.throttleTime``: how long the client must stay
silent for its rate over that same window to fall back to the bound,
``(rate - bound) / bound x window``. Times are integer milliseconds, as Kafka's.
"""

from __future__ import annotations


class SampledRate:
    """The sum of recent values per second; one per quota group and quota type."""

    __slots__ = ("_current", "_starts", "_values", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._starts = [now_ms]  # each sample's window start (Kafka's Sample.startTimeMs)
        self._values = [0.0]
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` (bytes, or percent-seconds of a core) at ``now_ms``."""
        index = self._current
        if now_ms - self._starts[index] >= self.window_ms:  # complete: advance to the next slot
            index = (index + 1) % self.samples
            if index >= len(self._starts):
                self._starts.append(now_ms)
                self._values.append(0.0)
            else:
                self._starts[index] = now_ms
                self._values[index] = 0.0
            self._current = index
        self._values[index] += value

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms`` (Kafka's ``Rate.measure``)."""
        window_ms = self.window_size_ms(now_ms)  # purges obsolete samples first
        return sum(self._values) * 1000.0 / window_ms

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is taken over: since the oldest live sample, at least
        ``samples - 1`` whole windows, at least 1 ms (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts)
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def last_window_start_ms(self) -> int:
        """When the newest sample began: the last activity, to a window."""
        return max(self._starts)

    def _purge(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        starts = self._starts
        for index, start in enumerate(starts):
            if now_ms - start >= expire_age:
                starts[index] = now_ms
                self._values[index] = 0.0

    def record_and_check(self, value: float, bound: float, now_ms: int) -> int:
        """Record, then the throttle time in ms the rate now calls for (0 within the
        bound): Kafka's ``Sensor.record`` with its quota check, then ``throttleTime``."""
        self.record(value, now_ms)
        window_ms = self.window_size_ms(now_ms)
        rate = sum(self._values) * 1000.0 / window_ms
        if rate <= bound:
            return 0
        return throttle_time_ms(rate, bound, window_ms)


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """How long to hold a client whose rate over ``window_ms`` is ``rate`` so that it
    falls to ``bound`` (Kafka's ``QuotaUtils.throttleTime``, rounded as Java's Math.round)."""
    if bound <= 0:  # a zero quota: Kafka's division gives infinity, capped to an int
        return 2**31 - 1
    return min(int((rate - bound) / bound * window_ms + 0.5), 2**31 - 1)
