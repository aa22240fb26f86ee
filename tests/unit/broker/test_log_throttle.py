"""LogThrottle: the first line written, identical ones counted, one line per interval."""

from __future__ import annotations

import logging

import pytest

from strom.broker.log_throttle import LogThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


def test_a_burst_of_identical_lines_is_one_line_then_a_count(
        caplog: pytest.LogCaptureFixture, clock: Clock) -> None:
    throttle = LogThrottle(logging.getLogger("throttled"), 10.0, clock)
    with caplog.at_level(logging.INFO, "throttled"):
        for _ in range(332):  # the disk-full case: one refusal per request
            throttle.log(logging.INFO, "produce to %s-%d refused: %s", "t", 0, "disk full")
            clock.now += 0.01
        assert lines(caplog) == ["produce to t-0 refused: disk full"]
        clock.now = 112.0
        throttle.log(logging.INFO, "produce to %s-%d refused: %s", "t", 0, "disk full")
    assert lines(caplog) == [
        "produce to t-0 refused: disk full",
        "produce to t-0 refused: disk full (repeated 331 times in the 3.3 s before, not logged)",
    ]


def test_a_steady_stream_is_one_line_per_interval(caplog: pytest.LogCaptureFixture, clock: Clock) -> None:
    throttle = LogThrottle(logging.getLogger("throttled"), 10.0, clock)
    with caplog.at_level(logging.INFO, "throttled"):
        for _ in range(800):  # 100 s, eight lines a second (steps exact in binary)
            throttle.log(logging.INFO, "same")
            clock.now += 0.125
    assert len(caplog.records) == 10
    assert all(line == "same (repeated 79 times in the 9.9 s before, not logged)"
               for line in lines(caplog)[1:])


def test_different_messages_are_throttled_apart(caplog: pytest.LogCaptureFixture, clock: Clock) -> None:
    throttle = LogThrottle(logging.getLogger("throttled"), 10.0, clock)
    with caplog.at_level(logging.INFO, "throttled"):
        for partition in (0, 1, 0, 1, 2):
            throttle.log(logging.INFO, "produce to t-%d refused", partition)
    assert lines(caplog) == ["produce to t-0 refused", "produce to t-1 refused", "produce to t-2 refused"]


def test_a_line_after_a_quiet_interval_is_written_plainly(
        caplog: pytest.LogCaptureFixture, clock: Clock) -> None:
    throttle = LogThrottle(logging.getLogger("throttled"), 10.0, clock)
    with caplog.at_level(logging.INFO, "throttled"):
        throttle.log(logging.INFO, "once")
        clock.now += 30
        throttle.log(logging.INFO, "once")
    assert lines(caplog) == ["once", "once"]


def test_a_disabled_level_is_neither_written_nor_counted(
        caplog: pytest.LogCaptureFixture, clock: Clock) -> None:
    throttle = LogThrottle(logging.getLogger("throttled"), 10.0, clock)
    with caplog.at_level(logging.WARNING, "throttled"):
        throttle.log(logging.INFO, "quiet")
    with caplog.at_level(logging.INFO, "throttled"):
        throttle.log(logging.INFO, "quiet")
    assert lines(caplog) == ["quiet"]


def test_memory_is_bounded_by_max_keys(clock: Clock) -> None:
    throttle = LogThrottle(logging.getLogger("throttled"), 10.0, clock, max_keys=3)
    for index in range(10):
        throttle.log(logging.ERROR, "line %d", index)
    assert len(throttle._windows) == 3
    clock.now += 10
    throttle.log(logging.ERROR, "line new")
    assert list(throttle._windows) == ["line new"]  # the three ended windows were forgotten
