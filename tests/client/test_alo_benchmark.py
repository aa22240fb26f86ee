"""Smoke run of ``benchmarks/alo.py``: it finishes and reports every row (no timings asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "alo.py"


def test_quick_run_reports_every_row() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for label in ("sequential (poll, handle, commit)", "batch pool, 8 threads", "ParallelConsumer, 8 threads",
                  "ParallelConsumer, 64 async tasks", "bare AsyncConsumer.poll loop",
                  "ParallelConsumer, 8 async, no-op", "8 workers >= 7x sequential", "overhead <= 20"):
        assert label in done.stdout, (label, done.stdout)
