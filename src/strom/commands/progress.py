"""A one-line progress display on stderr for long commands, shown only on a terminal.

On a pipe or in a file it writes nothing, so scripts and logs see only the command's
output. It redraws at most five times a second: a record costs one ``time.monotonic()``
and a comparison, not a write. No dependency: one line with count, rate and ETA is all
a producer of a file or a consumer of a range needs.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

REDRAW_SECONDS = 0.2


class Progress:
    """``done`` out of ``total`` (records or bytes; ``total`` None when not known ahead)."""

    def __init__(self, what: str, total: int | None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.what = what
        self.total = total
        self.done = 0
        self.records = 0
        self._started = time.monotonic()
        self._next_draw = self._started + REDRAW_SECONDS

    def advance(self, records: int = 1, amount: int | None = None) -> None:
        """Count ``records`` more, and ``amount`` more of the total (records when not given)."""
        self.records += records
        self.done += records if amount is None else amount
        if self.enabled:
            now = time.monotonic()
            if now >= self._next_draw:
                self._next_draw = now + REDRAW_SECONDS
                self._draw(now)

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()

    def line(self, now: float) -> str:
        elapsed = max(now - self._started, 1e-9)
        rate = self.records / elapsed
        text = f"{self.what}: {self.records:,} records, {rate:,.0f}/s"
        if self.total:
            fraction = min(self.done / self.total, 1.0)
            remaining = (elapsed / fraction - elapsed) if fraction > 0 else 0.0
            text += f", {fraction:.0%}, ETA {remaining:,.0f}s"
        return text

    def _draw(self, now: float) -> None:
        self.stream.write("\r" + self.line(now) + "\x1b[K")
        self.stream.flush()
