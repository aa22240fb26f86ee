"""Markers by place, so a developer can run the fast part of the suite alone:

    .venv/bin/python -m pytest -m "not compat and not spark and not slow"

``compat``: tests/compat, real client processes (librdkafka, kafka-python, aiokafka,
kafkajs, kcat) and peer brokers. ``spark``: tests/spark and any test that takes the
``spark`` fixture (a real SparkSession, seconds to start). ``slow``: the directories
whose tests spawn and kill broker processes (tests/client, tests/crash), the protocol's
exhaustive per-version sweeps, and any test marked by hand. CI (``./scripts/test``) runs everything: markers only select.
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
}


# Modules marked slow as a whole: sweeps over every (API, version) pair of the protocol,
# about 130 s of the unit tests' 180 s on two cores. The other codec tests (fuzz, records,
# generated code) stay in the fast part.
_SLOW_MODULES = frozenset({
    "unit/protocol/test_roundtrip.py",
    "unit/protocol/test_crosscheck_kio.py",
})


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
        for name in sorted(names):
            item.add_marker(getattr(pytest.mark, name))
