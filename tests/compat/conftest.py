from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A fresh ``strom serve`` on a free port with its own data directory."""
    process = BrokerProcess(tmp_path / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
    yield process
    if process.alive():
        process.stop()
