"""The pytest plugin: ``strom_broker`` (one per session), ``strom_broker_function`` (one per
test) and ``strom_broker_factory`` (as many as a test starts).

Registered as a ``pytest11`` entry point, so a project with Strom installed needs no
conftest line. Settings, most specific last:

- ``strom_overrides`` ini lines (``name=value``, Kafka property names): every broker;
- ``@pytest.mark.strom_broker(overrides={...})``: the test's ``strom_broker_function``
  (a session's broker is shared, so a marker cannot change it);
- ``--strom-mode=thread|process`` or the ``strom_mode`` ini option: where brokers run
  (``thread``, the default, is in the test process; ``process`` a ``strom serve`` child);
  the marker's ``mode=`` for one test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import cast

import pytest

from strom.testing.embedded import MODES, EmbeddedBroker, Mode

MARKER = "strom_broker"

BrokerFactory = Callable[..., EmbeddedBroker]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("strom", "embedded Strom Kafka broker (strom.testing)")
    group.addoption("--strom-mode", choices=MODES, default=None,
                    help="run test brokers in this process's thread (default) or as a subprocess")
    parser.addini("strom_mode", "thread (default) or process: where strom_broker fixtures run", default="thread")
    parser.addini("strom_overrides", "broker properties for every strom_broker fixture, one name=value a line",
                  type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(overrides=None, mode=None): broker properties and mode for strom_broker_function")
    _mode(config)  # a mistaken setting stops the run at once, in one line, not in every test's setup
    _ini_overrides(config)


def _mode(config: pytest.Config, requested: str | None = None) -> Mode:
    mode = requested or config.getoption("--strom-mode") or config.getini("strom_mode")
    if mode not in MODES:
        raise pytest.UsageError(f"strom_mode: {mode!r} is not one of {', '.join(MODES)}")
    return cast(Mode, mode)


def _ini_overrides(config: pytest.Config) -> dict[str, str]:
    overrides = {}
    for line in config.getini("strom_overrides"):
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise pytest.UsageError(f"strom_overrides: {line!r} is not name=value")
        overrides[name.strip()] = value.strip()
    return overrides


class _Brokers:
    """Starts brokers on fresh data dirs and stops every one it started."""

    def __init__(self, config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._config = config
        self._tmp = tmp_path_factory
        self._started: list[EmbeddedBroker] = []

    def start(self, overrides: Mapping[str, str] | None = None, mode: str | None = None) -> EmbeddedBroker:
        settings = {**_ini_overrides(self._config), **(overrides or {})}
        broker = EmbeddedBroker.start(self._tmp.mktemp("strom-broker"), mode=_mode(self._config, mode),
                                      overrides=settings)
        self._started.append(broker)
        return broker

    def stop_all(self) -> None:
        while self._started:
            self._started.pop().stop()


@pytest.fixture(scope="session")
def strom_broker(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """One broker for the whole session (topics persist between tests: name them per test)."""
    brokers = _Brokers(pytestconfig, tmp_path_factory)
    try:
        yield brokers.start()
    finally:
        brokers.stop_all()


@pytest.fixture
def strom_broker_factory(pytestconfig: pytest.Config,
                         tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    """``start(overrides=None, mode=None)``: a new broker, stopped when the test ends."""
    brokers = _Brokers(pytestconfig, tmp_path_factory)
    try:
        yield brokers.start
    finally:
        brokers.stop_all()


@pytest.fixture
def strom_broker_function(request: pytest.FixtureRequest, strom_broker_factory: BrokerFactory) -> EmbeddedBroker:
    """A fresh broker for this test alone, with the ``strom_broker`` marker's settings."""
    marker = request.node.get_closest_marker(MARKER)
    overrides = marker.kwargs.get("overrides") if marker else None
    mode = marker.kwargs.get("mode") if marker else None
    return strom_broker_factory(overrides=overrides, mode=mode)
