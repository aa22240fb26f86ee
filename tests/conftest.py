"""Markers by place, so a developer can run the fast part of the suite alone:

    .venv/bin/python -m pytest -m "not compat and not spark and not slow"

``compat``: tests/compat, real client processes (librdkafka, kafka-python, aiokafka,
kafkajs, kcat) and peer brokers. ``spark``: tests/spark and any test that takes the
``spark`` fixture (a real SparkSession, seconds to start). ``slow``: the directories
whose tests spawn and kill broker processes (tests/client, tests/crash), the protocol's
exhaustive per-version sweeps, and any test marked by hand. ``reference``: Apache Kafka
itself runs beside Strom (tests/differential and any test that takes the ``kafka39`` or
``kafka4`` fixture; JVMs, seconds to start, so these are ``slow`` too). ``zookeeper``:
tests/cluster, a real ZooKeeper and brokers as processes (``slow`` too). CI
(``./scripts/test``) runs everything: markers only select.

CI runs the suite on two pytest-xdist workers (``-n 2``): most of its time is spent
waiting on processes (brokers, JVMs, ZooKeeper sessions), not on the two cores. A worker
takes whole units (``xdist_unit``): a test file (its module fixtures start once); every
file that uses Apache Kafka (one JVM per run, not per worker); and tests/cluster with
tests/spark, which run one after another on one worker, so ZooKeeper sessions and Spark's
JVMs never compete with each other for the cores (their waits are the timing-sensitive ones).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# Top-level directory under tests/ -> the markers every test in it gets.
_BY_DIRECTORY: dict[str, tuple[str, ...]] = {
    "compat": ("compat",),
    "spark": ("spark",),
    "client": ("slow",),
    "crash": ("slow",),
    "differential": ("reference", "slow"),
    "cluster": ("zookeeper", "slow"),
}
_REFERENCE_FIXTURES = frozenset({"kafka39", "kafka4"})


# Modules marked slow as a whole: sweeps over every (API, version) pair of the protocol,
# about 130 s of the unit tests' 180 s on two cores. The other codec tests (fuzz, records,
# generated code) stay in the fast part.
_SLOW_MODULES = frozenset({
    "unit/protocol/test_roundtrip.py",
    "unit/protocol/test_crosscheck_kio.py",
})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "reference: Apache Kafka runs beside Strom (tests/differential; set in tests/conftest.py)")


# The xdist units (see the module docstring): a file, unless it belongs to one of these.
_SERIAL_GROUP = "cluster-and-spark"
_SERIAL_DIRECTORIES = ("tests/cluster/", "tests/spark/")
_REFERENCE_GROUP = "kafka-reference"
_REFERENCE_FILES = frozenset({  # outside tests/differential, the files that take kafka39/kafka4
    "tests/compat/test_java_client.py",
    "tests/client/test_transactional_producer.py",
})


def xdist_unit(path: str) -> str:
    """The unit of work a worker takes whole, for a test file's path relative to the repository."""
    if path.startswith(_SERIAL_DIRECTORIES):
        return _SERIAL_GROUP
    if path.startswith("tests/differential/") or path in _REFERENCE_FILES:
        return _REFERENCE_GROUP
    return path


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scope scheduling with ``xdist_unit`` as the scope (its own ``loadgroup`` marks
    no longer reach the node ids under pytest 9)."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid.split("::", 1)[0])

    return UnitScheduling(config, log)  # type: ignore[arg-type]


def _check_units(items: list[pytest.Item]) -> None:
    """A file that takes Kafka or Spark must be in its unit, or a second worker would start
    a second JVM (or run Spark beside the ZooKeeper tests): say so at collection."""
    for item in items:
        try:
            path = item.path.resolve().relative_to(TESTS.parent).as_posix()
        except ValueError:
            continue
        fixtures = set(getattr(item, "fixturenames", ()))
        unit = xdist_unit(path)
        if _REFERENCE_FIXTURES & fixtures and unit != _REFERENCE_GROUP:
            raise pytest.UsageError(f"{path} takes a reference broker: add it to _REFERENCE_FILES in tests/conftest.py")
        if "spark" in fixtures and unit != _SERIAL_GROUP:
            raise pytest.UsageError(f"{path} takes the spark fixture: put it under tests/spark or tests/cluster")


@pytest.hookimpl(wrapper=True)  # before the mark plugin deselects by these markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    _place_markers(items)
    _check_units(items)
    yield


def _place_markers(items: list[pytest.Item]) -> None:
    """The place markers (the module docstring's), by directory, module and fixture."""
    for item in items:
        try:
            relative = item.path.resolve().relative_to(TESTS)
        except ValueError:  # a test outside tests/ (e.g. a path given on the command line)
            continue
        names = set(_BY_DIRECTORY.get(relative.parts[0], ()))
        if relative.as_posix() in _SLOW_MODULES:
            names.add("slow")
        if "spark" in getattr(item, "fixturenames", ()):
            names.add("spark")
        if _REFERENCE_FIXTURES & set(getattr(item, "fixturenames", ())):
            names.update(("reference", "slow"))
        for name in sorted(names):
            item.add_marker(getattr(pytest.mark, name))
