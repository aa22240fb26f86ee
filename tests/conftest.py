"""Markers by place, so a developer can run the fast part of the suite alone:

    .venv/bin/python -m pytest -m "not compat and not spark and not slow"

``compat``: tests/compat, real client processes (librdkafka, kafka-python, aiokafka,
kafkajs, kcat) and peer brokers. ``spark``: tests/spark and any test that takes the
``spark`` fixture (a real SparkSession, seconds to start). ``slow``: the directories
whose tests spawn and kill broker processes (tests/client, tests/crash), plus any test
marked by hand. CI (``./scripts/test``) runs everything: markers only select.
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            top = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:  # a test outside tests/ (e.g. a path given on the command line)
            top = ""
        names = set(_BY_DIRECTORY.get(top, ()))
        if "spark" in getattr(item, "fixturenames", ()):
            names.add("spark")
        for name in sorted(names):
            item.add_marker(getattr(pytest.mark, name))
