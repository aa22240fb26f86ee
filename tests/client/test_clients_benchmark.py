"""Smoke run of ``benchmarks/clients.py``: it finishes and reports every client (no timings asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "clients.py"
LINES = (
    "Strom AsyncProducer.produce + flush",
    "Strom AsyncProducer.produce_many (batch API) + flush",
    "Strom AsyncProducer.send (futures) + flush",
    "Strom sync Producer.send + flush",
    "confluent-kafka produce + poll(0) + flush",
    "aiokafka send (futures) + flush",
    "aiokafka create_batch/send_batch + flush",
    "Strom AsyncConsumer.poll",
    "Strom AsyncConsumer.poll_arrow",
    "confluent-kafka consume, defaults",
    "confluent-kafka consume, fetch.queue.backoff.ms=10",
    "aiokafka getmany",
)


def test_quick_run_reports_every_client() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--rounds", "1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout.split("client / workload", 1)[1]
    for label in LINES:
        assert any(line.startswith(label + " ") for line in table.splitlines()), (label, done.stdout)
    assert "Goals" in table
