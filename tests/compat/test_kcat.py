"""kcat, the command-line client: Debian's build (librdkafka 2.0.2) and one on librdkafka 2.16.

Debian's kcat skips tagged fields wrongly (librdkafka < 2.2), so it fails on brokers that
send tagged fields holding defaults (Tansu does; shared/peers/README.md). Strom omits
them as Kafka does, and this test holds it to that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import confluent_kafka
import pytest

from tests.support.broker_process import BrokerProcess

KCAT = shutil.which("kcat")
if KCAT is None:  # scripts/test installs Debian's kcat; without it this suite is incomplete
    raise RuntimeError("kcat is not installed: run ./scripts/test, which installs it with apt")


def _wheel_librdkafka_env(tmp_path: Path) -> dict[str, str]:
    """Run kcat on the librdkafka that confluent-kafka's wheel ships (2.16)."""
    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    (library,) = libs.glob("librdkafka-*.so.1")
    folder = tmp_path / "librdkafka"
    folder.mkdir()
    (folder / "librdkafka.so.1").symlink_to(library)
    return {**os.environ, "LD_LIBRARY_PATH": str(folder)}


@pytest.fixture(params=["debian", "wheel"])
def kcat_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    return dict(os.environ) if request.param == "debian" else _wheel_librdkafka_env(tmp_path)


def _kcat(env: dict[str, str], *args: str, data: str | None = None) -> str:
    assert KCAT is not None
    result = subprocess.run(
        [KCAT, *args], input=data, capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kcat_lists_produces_and_consumes(broker: BrokerProcess, kcat_env: dict[str, str]) -> None:
    lines = [f"key{i}:value {i}" for i in range(100)]
    _kcat(kcat_env, "-b", broker.bootstrap, "-P", "-t", "kcat", "-K", ":", "-z", "gzip", data="\n".join(lines) + "\n")
    listing = _kcat(kcat_env, "-b", broker.bootstrap, "-L")
    assert 'topic "kcat" with 1 partitions' in listing
    consumed = _kcat(kcat_env, "-b", broker.bootstrap, "-C", "-t", "kcat", "-o", "beginning", "-e", "-K", ":")
    assert consumed.splitlines() == lines
    tail = _kcat(kcat_env, "-b", broker.bootstrap, "-C", "-t", "kcat", "-o", "-3", "-e", "-f", "%o %s\n")
    assert tail.splitlines() == ["97 value 97", "98 value 98", "99 value 99"]
