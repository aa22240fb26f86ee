"""Smoke run of ``benchmarks/transactions.py`` against Strom alone: both workloads run, their
records are all accounted for in the topics' end offsets (the script fails otherwise), and
the report is printed (no timings asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "transactions.py"


def test_quick_run_reports_both_workloads() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--brokers", "strom"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rounds = re.findall(r"round 1: strom +(\w+) .* \(([\d,]+) records in .*, (\d+) transactions", done.stdout)
    assert {workload for workload, _, _ in rounds} == {"transactional", "idempotent"}, done.stdout
    for workload, records, transactions in rounds:
        assert int(records.replace(",", "")) > 0, done.stdout
        assert (int(transactions) > 0) == (workload == "transactional"), done.stdout
    assert re.search(r"round 1: strom +commits +[\d,]+ transactions/s", done.stdout), done.stdout
    table = done.stdout.split("broker / workload", 1)[1]
    for label in ("strom transactional ", "strom idempotent ", "broker CPU per record", "broker CPU per transaction"):
        assert label in table, done.stdout
