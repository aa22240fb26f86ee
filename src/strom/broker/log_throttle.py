"""Repeated log lines counted instead of written: one line per message per interval.

A broker that refuses every produce while its disk is full would otherwise write one
line per refused partition per request (hundreds a second), burying the first line, the
one that says what happened, and filling the disk that is already full. ``LogThrottle``
writes the first occurrence of a message, counts the identical ones that follow within
``interval_s``, and writes the next occurrence after the interval with that count
(``... (repeated 331 times in the 9.9 s before, not logged)``): a steady stream becomes
one line per interval, and a burst that stops gets its count when the line comes back. No timer
runs: the handler's own call is the only clock tick, so the helper costs nothing when
nothing is logged and needs no event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _Window:
    started: float  # when the written line went out
    repeats: int = 0  # identical lines since, not written
    last: float = 0.0  # when the latest of those came


class LogThrottle:
    """Writes through ``logger`` at most one line per distinct message per ``interval_s``.

    The key is the message as rendered (format and arguments), so different partitions
    or different errors are throttled apart. ``max_keys`` bounds the memory: past it,
    windows that have ended and hold no count are forgotten.
    """

    def __init__(self, logger: logging.Logger, interval_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = 1024) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self.max_keys = max_keys
        self._windows: dict[str, _Window] = {}

    def log(self, level: int, msg: str, *args: object) -> None:
        if not self.logger.isEnabledFor(level):
            return
        text = msg % args if args else msg
        now = self.clock()
        window = self._windows.get(text)
        if window is not None and now - window.started < self.interval_s:
            window.repeats += 1
            window.last = now
            return
        if window is not None and window.repeats:
            self.logger.log(level, "%s (repeated %d times in the %.1f s before, not logged)",
                            text, window.repeats, window.last - window.started)
        else:
            self.logger.log(level, "%s", text)
        if window is None and len(self._windows) >= self.max_keys:
            self._forget(now)
        self._windows[text] = _Window(now)

    def _forget(self, now: float) -> None:
        """Room for one more key: ended windows without a count go, else the oldest window."""
        ended = [key for key, window in self._windows.items()
                 if not window.repeats and now - window.started >= self.interval_s]
        for key in ended:
            del self._windows[key]
        if len(self._windows) >= self.max_keys:
            del self._windows[next(iter(self._windows))]
