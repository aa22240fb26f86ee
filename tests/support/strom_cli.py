"""Run ``strom`` commands in-process for tests, and compare their output with golden files.

In-process ``main([...])`` with captured streams costs no interpreter start, so most CLI
tests use it; a few run ``python -m strom`` as a real subprocess. Golden files hold the
output with what varies from run to run (topic ids, ports, member ids, timestamps)
replaced by placeholders; ``STROM_UPDATE_GOLDEN=1`` rewrites them for review.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from strom.cli import main

_VARYING = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<UUID>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<PORT>"),
    (re.compile(r'("port": )\d+'), r"\1<PORT>"),
    (re.compile(r'("ts": )\d+'), r"\1<TS>"),
    (re.compile(r"(CLUSTER-ID: |\"cluster_id\": \")[A-Za-z0-9_-]{22}"), r"\1<CLUSTER-ID>"),
)


@dataclass(frozen=True, slots=True)
class CliResult:
    code: int
    out: str
    err: str


def strom(bootstrap: str, *argv: str, stdin: str = "") -> CliResult:
    """``strom <argv> --bootstrap-server <bootstrap>`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([*argv, "--bootstrap-server", bootstrap])
            except SystemExit as exc:  # argparse's usage errors
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdin = saved_stdin
    return CliResult(code, out.getvalue(), err.getvalue())


def strom_process(bootstrap: str, *argv: str, stdin: str = "", timeout: float = 120.0) -> CliResult:
    """``python -m strom <argv>`` as a real subprocess, bootstrap from $STROM_BOOTSTRAP."""
    env = {**os.environ, "STROM_BOOTSTRAP": bootstrap}
    done = subprocess.run([sys.executable, "-m", "strom", *argv], input=stdin, capture_output=True,
                          text=True, env=env, timeout=timeout, check=False)
    return CliResult(done.returncode, done.stdout, done.stderr)


def normalise(text: str) -> str:
    for pattern, placeholder in _VARYING:
        text = pattern.sub(placeholder, text)
    return text


def assert_golden(directory: Path, name: str, text: str) -> None:
    """The normalised ``text`` equals golden file ``name`` (rewritten when STROM_UPDATE_GOLDEN=1)."""
    path = directory / name
    actual = normalise(text)
    if os.environ.get("STROM_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
    assert path.exists(), f"no golden file {path}; run with STROM_UPDATE_GOLDEN=1 and review it"
    assert actual == path.read_text(), f"output differs from {path}:\n{actual}"
