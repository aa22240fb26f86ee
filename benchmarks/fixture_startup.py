"""strom.testing's broker start-up: from the fixture's start to the first answered Metadata.

    .venv/bin/python benchmarks/fixture_startup.py [--rounds 20] [--kafka-rounds 5] [--no-kafka]

What a test suite waits for before its first test can talk to Kafka. Each round calls
``EmbeddedBroker.start`` (what the ``strom_broker`` fixture calls) on a new, empty data
directory, then polls with one Metadata v12 request for no topics
(``tests/support/reference_broker.metadata_answer``) until an answer lists a broker, and
stops the broker; the clock (CLOCK_BOOTTIME) runs from just before the start call to that
answer. Two modes:

- ``thread``: the broker in a thread of this process, as the fixture runs by default.
  The first start in a process pays for importing the broker (a test session pays that
  once); it is printed apart and the counted rounds are the starts after it.
- ``process``: ``python -m strom serve`` as a subprocess (``--strom-mode=process``), which
  pays for a new interpreter and the imports at every start.

The peer is Apache Kafka 3.9 (with its own ZooKeeper) started by the reference-broker
tooling (``tests/support/reference_broker.py``, ``scripts/kafka-reference``), timed the same
way from the start of its first JVM to the first Metadata answer listing a broker. There is
no Docker on the benchmark machine, so Kafka's processes stand in for "a Kafka container":
a container adds its own start (image layers, network namespace) on top of the JVMs'.
One uncounted start of each warms the page cache. Median and best are printed.

The subprocess runs from compiled bytecode as an installed package does: as
``benchmarks/startup.py``, the benchmark keeps the ``.pyc`` files in a cache of its own
(``PYTHONPYCACHEPREFIX``) even where the environment says ``PYTHONDONTWRITEBYTECODE``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from strom.testing import EmbeddedBroker, Mode  # noqa: E402
from tests.support.reference_broker import start_reference_broker, wait_for_metadata  # noqa: E402


def fixture_start(mode: Mode, work: Path) -> float:
    """One start of the fixture's broker on an empty data dir: seconds to the first Metadata."""
    with tempfile.TemporaryDirectory(prefix=f"strom-{mode}-", dir=work) as data:
        started = time.clock_gettime(time.CLOCK_BOOTTIME)
        broker = EmbeddedBroker.start(Path(data) / "data", mode=mode)
        try:
            answered = wait_for_metadata(broker.bootstrap_servers, lambda: True, timeout=60)
        finally:
            broker.stop()
        return answered - started


def kafka_start(work: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="kafka39-start-", dir=work) as data, \
            start_reference_broker("39", Path(data)) as kafka:
        return kafka.startup_seconds


def summarise(name: str, values: list[float]) -> float:
    median = statistics.median(values)
    print(f"{name:>16}: median {median * 1e3:8.1f} ms, best {min(values) * 1e3:8.1f} ms  ({len(values)} starts)")
    return median


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="counted starts of each Strom mode")
    parser.add_argument("--kafka-rounds", type=int, default=5,
                        help="counted starts of Kafka 3.9 (each takes seconds)")
    parser.add_argument("--no-kafka", action="store_true", help="leave Kafka out")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.kafka_rounds < 1:
        print("fixture_startup.py: --rounds and --kafka-rounds must be at least 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="strom-fixture-bench-") as work_dir:
        work = Path(work_dir)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the subprocesses inherit this environment
        os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        first = fixture_start("thread", work)  # imports the broker: what a session's first start pays
        starters: dict[str, Callable[[], float]] = {
            "strom thread": lambda: fixture_start("thread", work),
            "strom process": lambda: fixture_start("process", work),
        }
        for start in starters.values():
            start()  # warm-up, not counted
        figures: dict[str, list[float]] = {name: [] for name in starters}
        for _ in range(args.rounds):  # interleaved, so a busy moment falls on both
            for name, start in starters.items():
                figures[name].append(start())
        kafka: list[float] = []
        if not args.no_kafka:
            kafka_start(work)  # warm-up, not counted
            kafka = [kafka_start(work) for _ in range(args.kafka_rounds)]
        print("fixture start to first answered Metadata:")
        print(f"{'strom thread 1st':>16}: {first * 1e3:8.1f} ms  (this process's first start: imports the broker)")
        medians = {name: summarise(name, values) for name, values in figures.items()}
        if kafka:
            kafka_median = summarise("kafka 3.9 (+zk)", kafka)
            for name, median in medians.items():
                print(f"{name} is {kafka_median / median:.0f}x quicker than Kafka 3.9's start (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
