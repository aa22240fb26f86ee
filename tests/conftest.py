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
"""

from __future__ import annotations

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
