"""Apache Kafka's Java client (kafka-clients 3.9 and 4.x) over TLS and SASL against a real broker:
mutual TLS, and SASL_SSL with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN, each producing,
consuming in a group and committing; SCRAM users made and described with the Java Admin
(KIP-554); and what the client raises when the broker refuses it.

One broker for the module, three listeners: PLAINTEXT (set-up: the SCRAM users), SSL with
``ssl.client.auth=required`` and SASL_SSL. The Java client takes PEM itself (KIP-651): the
mutual-TLS client's certificate and key inline (``ssl.keystore.certificate.chain``,
``ssl.keystore.key``), the CA as a file (``ssl.truststore.type=PEM``). Certificates come from
tests/support/certs.py, made for this run.

tests/compat/java/SecurityScenarios.java runs every case of one client version in one JVM
(users first, then the others at once, each on its own thread) and prints one JSON line of
what the client saw; the assertions are here. Every wait is for an answer (the program's
own deadline is 60 s per condition), never for time to pass.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.certs import Certificates, make_certificates
from tests.support.java_client import LINES, JavaClient, compile_java_client
from tests.support.netproxy import reserved_ports
from tests.support.sasl import USERS, sasl_overrides

RECORDS = 5
SCRAM_USERS = {"SCRAM-SHA-256": ("carol", "carol-secret", 8192), "SCRAM-SHA-512": ("dave", "dave-secret", 4096)}
SASL_FAILED = "org.apache.kafka.common.errors.SaslAuthenticationException"


@dataclass(frozen=True)
class Listeners:
    """The module's broker: its three bootstraps and the certificates it was made with."""

    plaintext: str
    ssl: str
    sasl_ssl: str
    certs: Certificates


@pytest.fixture(scope="module")
def listeners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listeners]:
    directory = tmp_path_factory.mktemp("java-security")
    certs = make_certificates(directory / "certs")
    with reserved_ports(3) as (plaintext, ssl, sasl_ssl):
        pass
    broker = BrokerProcess(directory / "data", {
        "listeners": f"PLAINTEXT://127.0.0.1:{plaintext},SSL://127.0.0.1:{ssl},SASL_SSL://127.0.0.1:{sasl_ssl}",
        "offsets.topic.num.partitions": "1",
        **sasl_overrides("sasl_ssl"),
        **certs.broker_overrides("SSL", client_auth="required"),
        **certs.broker_overrides("SASL_SSL"),
    }).start()
    try:
        yield Listeners(f"127.0.0.1:{plaintext}", f"127.0.0.1:{ssl}", f"127.0.0.1:{sasl_ssl}", certs)
    finally:
        assert broker.stop() == 0


@pytest.fixture(scope="module", params=sorted(LINES), ids=[f"kafka-clients-{name}" for name in sorted(LINES)])
def java_client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    return compile_java_client(request.param, tmp_path_factory.mktemp("java"))


# --- the cases: each a properties file for SecurityScenarios ---------------------------------

def _properties(settings: dict[str, str]) -> str:
    """A Java properties file: backslashes and line breaks escaped (inline PEM spans lines)."""
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")

    return "".join(f"{escape(key)}={escape(value)}\n" for key, value in settings.items())


def _scram_jaas(user: str, password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'


def _plain_jaas(user: str, password: str) -> str:
    return f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" password="{password}";'


def _sasl_ssl(listeners: Listeners, mechanism: str, jaas: str) -> dict[str, str]:
    return {"bootstrap.servers": listeners.sasl_ssl, "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.jaas.config": jaas, "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(listeners.certs.ca)}


def _mutual_tls(listeners: Listeners, with_certificate: bool) -> dict[str, str]:
    settings = {"bootstrap.servers": listeners.ssl, "security.protocol": "SSL", "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(listeners.certs.ca)}
    if with_certificate:
        identity = listeners.certs.client
        settings |= {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": identity.cert.read_text(),
                     "ssl.keystore.key": identity.key.read_text()}
    return settings


def _cases(listeners: Listeners, line: str) -> dict[str, dict[str, str]]:
    """Case name -> the case's settings (``client.*``: the client's own)."""
    def round_trip(name: str, client: dict[str, str]) -> dict[str, str]:
        return {"case": "round-trip", "topic": f"java{line}-{name}", "group": f"java{line}-{name}-group",
                "count": str(RECORDS), **{f"client.{key}": value for key, value in client.items()}}

    def refused(name: str, client: dict[str, str]) -> dict[str, str]:
        return {"case": "refused", "topic": f"java{line}-{name}",
                **{f"client.{key}": value for key, value in client.items()}}

    users = ",".join(f"{user}:{mechanism}:{iterations}:{password}"
                     for mechanism, (user, password, iterations) in SCRAM_USERS.items())
    cases = {
        "scram-users": {"case": "scram-users", "users": users, "client.bootstrap.servers": listeners.plaintext},
        "mutual-tls": round_trip("mtls", _mutual_tls(listeners, with_certificate=True)),
        "plain": round_trip("plain", _sasl_ssl(listeners, "PLAIN", _plain_jaas("alice", USERS["alice"]))),
        "no-certificate": refused("nocert", _mutual_tls(listeners, with_certificate=False)),
        "wrong-password": refused("wrong", _sasl_ssl(listeners, "SCRAM-SHA-512", _scram_jaas("dave", "not-dave"))),
    }
    for mechanism, (user, password, _) in SCRAM_USERS.items():
        cases[mechanism.lower()] = round_trip(mechanism.lower(), _sasl_ssl(listeners, mechanism,
                                                                           _scram_jaas(user, password)))
    return cases


@pytest.fixture(scope="module")
def outcomes(listeners: Listeners, java_client: JavaClient, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every case, in one JVM run per client version."""
    directory: Path = tmp_path_factory.mktemp(f"cases-{java_client.line}")
    files = []
    for name, settings in _cases(listeners, java_client.line).items():
        path = directory / f"{name}.properties"
        path.write_text(_properties(settings))
        files.append(str(path))
    return java_client.run_program("SecurityScenarios", *files)


def test_the_java_admin_makes_and_describes_scram_users(outcomes: Any) -> None:
    assert outcomes["scram-users"] == {
        user: [[mechanism, iterations]] for mechanism, (user, _, iterations) in SCRAM_USERS.items()}


@pytest.mark.parametrize("case", ["mutual-tls", "scram-sha-512", "scram-sha-256", "plain"])
def test_the_java_client_produces_consumes_and_commits(outcomes: Any, case: str) -> None:
    assert outcomes[case] == {"offsets": list(range(RECORDS)), "values": [f"record-{i}" for i in range(RECORDS)],
                              "committed": RECORDS}


def test_a_wrong_scram_password_raises_kafkas_sasl_authentication_exception(outcomes: Any) -> None:
    assert outcomes["wrong-password"] == {
        "error": SASL_FAILED,
        "message": "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                   "SCRAM-SHA-512"}



def test_no_client_certificate_on_a_required_listener_raises_ssl_authentication_exception(outcomes: Any) -> None:
    """``ssl.client.auth=required`` refuses the handshake; over TLS 1.3 the client has finished
    its side already and learns it from the broker's alert, as it would from Kafka."""
    assert outcomes["no-certificate"] == {"error": "org.apache.kafka.common.errors.SslAuthenticationException",
                                          "message": "Failed to process post-handshake messages"}


def test_the_java_program_refuses_a_bad_command_line(java_client: JavaClient, tmp_path: Path) -> None:
    unknown = tmp_path / "unknown.properties"
    unknown.write_text(_properties({"case": "teleport"}))
    for args, message in [((), "usage: SecurityScenarios CASE_FILE..."),
                          ((str(unknown),), f"{unknown}: unknown case 'teleport' (scram-users, round-trip, refused)")]:
        result = subprocess.run(java_client.command(*args, program="SecurityScenarios"),
                                capture_output=True, text=True, timeout=120, check=False)
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr.strip() == f"SecurityScenarios: {message}"  # one clear line, no stack trace
