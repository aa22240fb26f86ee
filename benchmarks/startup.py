"""Start-up benchmark: from process start to the first answered Metadata request.

    .venv/bin/python benchmarks/startup.py [--rounds 7] [--kafka 39 --kafka 4] [--breakdown]
                                           [--no-bytecode-cache] [--compare-src DIR]

Each round starts ``strom serve`` on a new, empty data directory (and, with ``--kafka``,
each reference Kafka the same way, rounds interleaved) and polls with one Metadata v12
request for no topics (``tests/support/reference_broker.metadata_answer``) until an
answer lists a broker. Both sides are timed the same way: from the kernel's record of
when the first process started (``/proc/PID/stat``; for Kafka 3.9 that is ZooKeeper's
JVM, as a deployment starts it too) to the answer, on CLOCK_BOOTTIME. One uncounted
start of each warms the page cache (and Python's bytecode cache). Best and median are
printed, and Strom / Kafka for each.

Python runs from compiled bytecode as an installed package does: the benchmark keeps
the ``.pyc`` files in a cache of its own (``PYTHONPYCACHEPREFIX``), even where the
environment says ``PYTHONDONTWRITEBYTECODE``; ``--no-bytecode-cache`` measures the
other case, every module compiled from source at every start.

``--compare-src DIR`` adds another tree's ``strom`` (``git archive <commit> src | tar -x -C
DIR``, then ``--compare-src DIR/src``) to the same rounds, for a before/after.
``--breakdown`` also prints where one Strom start spends its time: imports by package
(``python -X importtime``) and the broker's own start-up steps.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from strom.broker.config import PROPERTY_NAMES  # noqa: E402
from tests.support.reference_broker import (  # noqa: E402
    free_port,
    process_start_boottime,
    shared_settings,
    start_reference_broker,
    wait_for_metadata,
)

START_TIMEOUT = 120.0


def strom_command(data_dir: Path, port: int) -> list[str]:
    """``strom serve`` with the settings the reference brokers share (those Strom knows)."""
    command = [
        sys.executable, "-m", "strom", "serve", "--data-dir", str(data_dir),
        "--listeners", f"PLAINTEXT://127.0.0.1:{port}", "--log-level", "warning",
    ]
    for name, value in shared_settings().items():
        if name in PROPERTY_NAMES:
            command += ["--override", f"{name}={value}"]
    return command


def python_env(bytecode_cache: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if bytecode_cache is None:
        # Nothing written; Python's own library still loads from the .pyc files it was
        # installed with (a cache prefix would hide those too), strom's is compiled.
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = str(bytecode_cache)
    return env


def strom_start(work: Path, env: dict[str, str]) -> float:
    """One start of ``strom serve`` on an empty data dir: seconds to the first Metadata."""
    with tempfile.TemporaryDirectory(prefix="strom-start-", dir=work) as data:
        port = free_port()
        process = subprocess.Popen(strom_command(Path(data), port), env=env, stdout=subprocess.DEVNULL)
        try:
            started = process_start_boottime(process.pid)
            answered = wait_for_metadata(f"127.0.0.1:{port}", lambda: process.poll() is None, START_TIMEOUT)
            return answered - started
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)


def kafka_start(line: str, work: Path) -> float:
    with tempfile.TemporaryDirectory(prefix=f"kafka{line}-start-", dir=work) as data, \
            start_reference_broker(line, Path(data)) as broker:
        return broker.startup_seconds


def breakdown(work: Path, env: dict[str, str]) -> None:
    """Imports by package, then the broker's start-up steps, for one start."""
    def run(*options: str) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(prefix="strom-breakdown-", dir=work) as data:
            script = _STEPS.replace("@DATA@", repr(data))
            return subprocess.run([sys.executable, *options, "-c", script], env=env,
                                  capture_output=True, text=True, check=True)

    result = run("-X", "importtime")
    by_package: dict[str, int] = {}
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        if not own.strip().isdigit():
            continue  # the header line
        parts = name.strip().split(".")
        package = ".".join(parts[:3]) if parts[0] == "strom" else parts[0]
        by_package[package] = by_package.get(package, 0) + int(own)
    total = sum(by_package.values())
    print(f"\nimports: {total / 1e3:.0f} ms in all (-X importtime's own figures, which it inflates)")
    for package, micros in sorted(by_package.items(), key=lambda item: -item[1])[:15]:
        print(f"  {micros / 1e3:7.1f} ms  {package}")
    print("broker start-up steps (without -X importtime):")
    steps = run()
    for step, seconds in json.loads(steps.stdout.splitlines()[-1]).items():
        print(f"  {seconds * 1e3:7.1f} ms  {step}")


# One start of the broker, step by step, as ``strom serve`` does it (src/strom/cli.py).
_STEPS = """
import time
marks = {"interpreter": time.perf_counter()}
import asyncio, json, sys
from pathlib import Path
from strom.broker.broker import Broker
from strom.broker.config import BrokerConfig
from strom.broker.server import SocketServer
marks["import strom.broker"] = time.perf_counter()
config = BrokerConfig.load(None, {"log.dirs": @DATA@, "listeners": "PLAINTEXT://127.0.0.1:0"})
broker = Broker(config)
marks["Broker(config)"] = time.perf_counter()
for step in ("dynamic_config.load", "log_manager.startup", "log_cleaner.startup",
             "replica_manager.startup", "admin_manager.load", "group_coordinator.load",
             "producer_ids.load"):
    part, method = step.split(".")
    getattr(getattr(broker, part), method)()
    marks[step] = time.perf_counter()
async def listen():
    server = SocketServer(broker)
    await server.start()
    marks["listener bound"] = time.perf_counter()
    broker.start_background_work()
    await server.stop()
    await broker.shutdown()
asyncio.run(listen())
names = list(marks)
print(json.dumps({name: marks[name] - marks[previous] for previous, name in zip(names, names[1:])}))
"""


def summarise(name: str, figures: list[float]) -> tuple[float, float]:
    best, median = min(figures), statistics.median(figures)
    shown = " ".join(f"{value:.2f}" for value in figures)
    print(f"{name:>9}: best {best:.3f} s, median {median:.3f} s  ({shown})")
    return best, median


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="counted starts of each broker")
    parser.add_argument("--kafka", action="append", choices=["39", "4"], default=[],
                        help="also start Apache Kafka 3.9 (ZooKeeper) or 4.x (KRaft); repeatable")
    parser.add_argument("--breakdown", action="store_true", help="where one Strom start spends its time")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="compile every module from source at every start")
    parser.add_argument("--compare-src", type=Path, action="append", default=[],
                        help="also start the strom of another source tree's src/ (e.g. an older "
                             "commit's, from git archive), in the same rounds; repeatable")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        print("startup.py: --rounds must be at least 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="strom-startup-bench-") as work_dir:
        work = Path(work_dir)
        env = python_env(None if args.no_bytecode_cache else work / "pycache")
        starters: dict[str, Callable[[], float]] = {"strom": lambda: strom_start(work, env)}
        for number, src in enumerate(args.compare_src, 1):
            if not (src / "strom" / "__init__.py").is_file():
                print(f"startup.py: {src} is not a src/ directory holding strom", file=sys.stderr)
                return 2
            other = {**env, "PYTHONPATH": str(src.resolve())}
            starters[f"strom@{number}"] = functools.partial(strom_start, work, other)
        for line in args.kafka:
            starters[f"kafka{line}"] = functools.partial(kafka_start, line, work)
        for start in starters.values():
            start()  # warm-up, not counted
        figures: dict[str, list[float]] = {name: [] for name in starters}
        for _ in range(args.rounds):
            for name, start in starters.items():
                figures[name].append(start())
        print(f"process start to first answered Metadata, {args.rounds} starts each "
              f"({'no ' if args.no_bytecode_cache else ''}bytecode cache):")
        for number, src in enumerate(args.compare_src, 1):
            print(f"strom@{number}: {src}")
        results = {name: summarise(name, values) for name, values in figures.items()}
        for name in results:
            if name.startswith("kafka"):
                best, median = (s / k for s, k in zip(results["strom"], results[name], strict=True))
                print(f"strom / {name}: best {best:.2f}x, median {median:.2f}x")
        if args.breakdown:
            breakdown(work, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
