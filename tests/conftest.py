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

CI runs the suite on two pytest-xdist workers (``-n 2``). A worker takes whole units
(``xdist_unit``): each file of tests/unit, tests/security and tests/operability, and everything else as one
unit, so the tests that start processes (brokers, ZooKeeper, JVMs) run one after another as
they always did, and the unit and security tests run beside them on the other core.
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
    "security": ("slow",),
    "operability": ("slow",),
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


# The xdist units (see the module docstring): each file of tests/unit is one; every test that
# starts processes (brokers, ZooKeeper, JVMs, clients) is in the one other unit, run one
# after another on one worker as the suite ran before two workers: run beside each other,
# their timing-sensitive waits failed now and then in clean-clone runs.
_PROCESS_GROUP = "processes"


# Directories whose files are each a unit of their own, like tests/unit's, though they start a
# broker process and real clients: their tests wait for answers, never for time to pass, so
# they run beside the process unit on the worker tests/unit leaves idle after its first minutes.
_OWN_UNITS = ("tests/unit/", "tests/security/", "tests/operability/")


def xdist_unit(path: str) -> str:
    """The unit of work a worker takes whole, for a test file's path relative to the repository."""
    return path if path.startswith(_OWN_UNITS) else _PROCESS_GROUP


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scope scheduling with ``xdist_unit`` as the scope (its own ``loadgroup`` marks
    no longer reach the node ids under pytest 9)."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid.split("::", 1)[0])

    return UnitScheduling(config, log)  # type: ignore[arg-type]


def _check_units(items: list[pytest.Item]) -> None:
    """A unit test that takes Kafka or Spark would run beside the process tests: say so."""
    for item in items:
        try:
            path = item.path.resolve().relative_to(TESTS.parent).as_posix()
        except ValueError:
            continue
        fixtures = set(getattr(item, "fixturenames", ()))
        if (_REFERENCE_FIXTURES & fixtures or "spark" in fixtures) and xdist_unit(path) != _PROCESS_GROUP:
            raise pytest.UsageError(f"{path} takes a JVM (Kafka or Spark): it belongs outside tests/unit")


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
