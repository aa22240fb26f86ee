"""RateMeter: completions per second over a sliding window, from sparse samples."""

from __future__ import annotations

from strom.alo.metrics import RateMeter


def test_rate_over_the_last_window() -> None:
    meter = RateMeter(window_s=1.0)
    assert meter.rate(0, now=100.0) == 0.0
    meter.sample(500, now=100.5)
    assert meter.rate(1000, now=101.0) == 1000.0
    # Later the window slides: only the last second or so counts.
    meter.sample(1000, now=102.0)
    meter.sample(1000, now=102.5)
    assert meter.rate(1000, now=103.0) == 0.0


def test_samples_closer_than_a_quarter_window_are_not_kept() -> None:
    meter = RateMeter(window_s=1.0)
    meter.sample(0, now=10.0)
    for step in range(1, 100):
        meter.sample(step, now=10.0 + step * 0.001)
    assert meter.rate(200, now=10.5) == 400.0
