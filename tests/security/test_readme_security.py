"""The README's Security section, run as written: its ``strom serve`` command line (with the mTLS
lines added, as the README says) starts one broker, with test certificates and free ports put in
for its paths and ports; then its snippets run in order: the SCRAM user and ACLs made over the
PLAINTEXT listener, confluent-kafka, kafka-python and aiokafka over SASL_SSL, kcat's ``-X``
settings reading back what they wrote, and a client certificate whose DN the mapping rule turns
into ``User:service-one`` (allowed only through the ACL the README grants that name).

A block is found by the ``<!-- readme-test: NAME -->`` comment just above it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker_process import READY
from tests.support.certs import Certificates, make_certificates
from tests.support.netproxy import reserved_ports

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"<!-- readme-test: (?P<name>[\w-]+) -->\n```\w*\n(?P<body>.*?)```", re.DOTALL)
START_TIMEOUT_S = 60


def shell_words(text: str) -> list[str]:
    """A shell command's words, its line continuations joined as the shell joins them."""
    return shlex.split(text.replace("\\\n", " "))


def readme_blocks(substitutions: dict[str, str]) -> dict[str, str]:
    blocks = {match["name"]: match["body"] for match in BLOCK.finditer(README.read_text())}
    for name, body in blocks.items():
        for placeholder, value in substitutions.items():
            body = body.replace(placeholder, value)
        blocks[name] = body
    return blocks


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("readme-certs"))


@pytest.fixture(scope="module")
def blocks(certs: Certificates, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with reserved_ports(3) as (plaintext, sasl_ssl, ssl):
        pass
    yield readme_blocks({
        ":9092": f":{plaintext}", ":9093": f":{sasl_ssl}", ":9094": f":{ssl}",
        "/etc/strom/broker.pem": str(certs.broker_keystore), "/etc/strom/ca.pem": str(certs.ca),
        "/etc/strom/service-one.pem": str(certs.service.cert), "/etc/strom/service-one.key": str(certs.service.key),
        "./strom-data": str(tmp_path_factory.mktemp("readme-broker") / "data"),
    })


@pytest.fixture(scope="module")
def broker(blocks: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    command = shell_words(blocks["serve"] + " " + blocks["mtls"])
    assert command[0] == "strom"
    log_path = tmp_path_factory.mktemp("readme-log") / "broker.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "strom", *command[1:]],
                                   stdout=subprocess.PIPE, stderr=log, text=True)
    assert process.stdout is not None
    try:
        for line in process.stdout:  # the first line says where it listens; EOF if it stopped
            assert READY in line, f"strom serve did not start:\n{log_path.read_text()}"
            break
        else:
            pytest.fail(f"strom serve exited {process.wait(START_TIMEOUT_S)}:\n{log_path.read_text()}")
        yield
    finally:
        process.terminate()
        assert process.wait(START_TIMEOUT_S) == 0


def run_snippet(blocks: dict[str, str], name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"readme_{name.replace('-', '_')}"}
    exec(compile(blocks[name], f"README.md:{name}", "exec"), namespace)
    return namespace


def test_the_readme_security_section_runs_as_written(broker: None, blocks: dict[str, str]) -> None:
    run_snippet(blocks, "scram-user")
    confluent = run_snippet(blocks, "confluent-kafka")
    message = confluent["message"]
    assert message is not None and message.error() is None and message.value() == b"first order"
    run_snippet(blocks, "kafka-python")
    run_snippet(blocks, "aiokafka")
    run_snippet(blocks, "mtls-client")
    kcat = subprocess.run(shell_words(blocks["kcat"]), capture_output=True, text=True, timeout=120, check=False)
    assert kcat.returncode == 0, kcat.stderr
    assert kcat.stdout.split("\n")[:4] == ["first order", "from kafka-python", "from aiokafka", "from service-one"]
