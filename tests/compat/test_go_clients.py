"""Go's Kafka clients against a real ``strom serve``: franz-go's own ``pkg/kgo`` test suite,
and IBM/sarama and segmentio/kafka-go through the scenarios of test_clients.py/test_groups.py.

franz-go's integration tests read their seed broker from ``KGO_SEEDS``; the whole package
runs as it would against Kafka, minus the tests FINDINGS.md names ("franz-go kgo integration
tests against Strom"), excluded by ``-skip`` with the reason there. Sarama and kafka-go run
tests/compat/go (``go build`` once per session), one named scenario per fresh broker; the
program prints what the client observed as JSON and the assertions live here. franz-go
also runs from there over SASL_SSL with SCRAM (kgo's own SCRAM tests dial without TLS).

The Go modules come from the Go module proxy (tests/compat/go/fetch, run by scripts/test).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.protocol.error_codes import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.certs import make_certificates
from tests.support.sasl import SaslBroker, create_scram_user, sasl_broker

GO_DIR = Path(__file__).parent / "go"
FETCH = GO_DIR / "fetch"

# franz-go tests that cannot pass against Strom, each with its cause in FINDINGS.md.
KGO_EXCLUDED: dict[str, str] = {}
# Tests kgo skips by itself after asking the broker what it supports (or for SASL, which
# needs a second listener); FINDINGS.md lists them. Any other skip is a failure here.
KGO_SELF_SKIPPED = {
    "TestSCRAMAuth", "TestSCRAMAuthBadCredentials",  # no SASL listener here: test_franz_go_kgo_scram_tests_pass
    "TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin",
    "TestConsumeRegexShareSkipsInternal",  # share groups (KIP-932): no ShareFetch
    "Test848RegexBrokerResolves", "TestGroupETL/range/848", "TestGroupETL/sticky/848",
    "TestGroupETL/sticky/848/static", "TestGroupSimple/848",  # KIP-848: no ConsumerGroupHeartbeat
    "TestIssueProduceBrokerTooOldFailsRecords",  # Strom takes Produce v2, as Kafka 3.9 does
    "TestTxnEtl/range/848", "TestTxnEtl/sticky/848", "TestTxnEtl/sticky/848/static",  # KIP-848 again
}
# The tests of the package that talk to the broker (the rest are unit tests, or run on
# franz-go's in-process kfake): each must pass unless excluded or self-skipped above.
KGO_BROKER_TESTS = {
    "TestPing", "TestIssue1034", "TestIssue325", "TestConsumeRegex", "TestIssue337", "TestDirectPartitionPurge",
    "TestIssue434", "TestAddRemovePartitions", "TestPauseIssue489", "TestPauseIssueOct2023", "TestIssue523",
    "TestIssue648", "TestIssue810", "TestIssue865", "TestIssueFetchLargerThanBrokerMaxReadBytes", "TestPooling",
    "TestGroupSimple", "TestHookPollStart", "TestConsumeMaxDecompressBatchBytes", "TestGroupETL",
    "TestClient_Produce", "TestIssue769", "TestIssueProduceSyncManualPartitionNegativeDoesNotPanic", "TestIssue831",
    "TestClient_ProduceLargeMessages", "TestTxnEtl",
}
# Records per kgo ETL test (kgo's default is 500,000): enough to cross many batches and a
# rebalance in the middle, small enough for two shared cores.
KGO_RECORDS = 5000
KGO_TIMEOUT = 600


def _go() -> str:
    go = shutil.which("go")
    assert go is not None, "the Go toolchain (go) is not installed: the Go client tests need Go 1.26+"
    return go


def _run(command: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
                            env={**os.environ, **(env or {})})
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


@pytest.fixture(scope="session")
def go_scenarios(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/compat/go built once per session (Go's build cache makes a rebuild quick)."""
    binary = tmp_path_factory.mktemp("go") / "strom-go-compat"
    _run([_go(), "build", "-mod=readonly", "-buildvcs=false", "-o", str(binary), "."], GO_DIR, timeout=600)
    return binary


@pytest.fixture(scope="session")
def kgo_tests(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """franz-go's pkg/kgo test binary, and the source directory it must run in (a few
    tests read kgo's own source files)."""
    franz_go = Path(_run([str(FETCH), "franz-go-dir"], GO_DIR, timeout=300).strip())
    binary = tmp_path_factory.mktemp("kgo") / "kgo.test"
    _run([_go(), "test", "-c", "-o", str(binary), "./pkg/kgo"], franz_go, timeout=900)
    return binary, franz_go / "pkg" / "kgo"


def _kgo_results(output: str) -> dict[str, str]:
    """Test name -> PASS/FAIL/SKIP from ``go test -v`` output (subtests by their full name)."""
    return dict((name, result) for result, name in re.findall(r"^\s*--- (PASS|FAIL|SKIP): (\S+)", output, re.MULTILINE))


def test_franz_go_kgo_integration_tests_pass(kgo_tests: tuple[Path, Path], broker: BrokerProcess) -> None:
    """kgo needs no broker setting beyond the fixture's (it creates its topics itself; it
    passes with auto.create.topics.enable off as well)."""
    binary, source = kgo_tests
    skip = "^(" + "|".join(sorted(KGO_EXCLUDED)) + ")$"
    result = subprocess.run(
        [str(binary), "-test.v", "-test.count=1", f"-test.timeout={KGO_TIMEOUT}s", f"-test.skip={skip}"],
        cwd=source, capture_output=True, text=True, timeout=KGO_TIMEOUT + 60, check=False,
        env={**os.environ, "KGO_SEEDS": broker.bootstrap, "KGO_TEST_RF": "1",
             "KGO_TEST_RECORDS": str(KGO_RECORDS), "KGO_LOG_LEVEL": "none"},
    )
    results = _kgo_results(result.stdout)
    failed = sorted(name for name, outcome in results.items() if outcome == "FAIL")
    assert result.returncode == 0 and not failed, f"failed: {failed}\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
    skipped = {name for name, outcome in results.items() if outcome == "SKIP"}
    assert skipped <= KGO_SELF_SKIPPED, f"skipped without a FINDINGS.md entry: {sorted(skipped - KGO_SELF_SKIPPED)}"
    assert not set(KGO_EXCLUDED) & set(results), "an excluded test ran: -skip did not apply"
    not_passed = sorted(name for name in KGO_BROKER_TESTS if results.get(name) != "PASS")
    assert not not_passed, f"broker tests that did not pass: {not_passed}"


def _scenario(binary: Path, client: str, name: str, broker: BrokerProcess) -> dict[str, object]:
    output = _run([str(binary), client, name, broker.bootstrap], GO_DIR, timeout=150)
    outcome: dict[str, object] = json.loads(output.strip().splitlines()[-1])
    assert (outcome["client"], outcome["scenario"]) == (client, name)
    return outcome


CLIENTS = ["sarama", "kafka-go"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_go_client_produces_every_codec_and_reads_it_back(
    go_scenarios: Path, broker: BrokerProcess, client: str, codec: str
) -> None:
    outcome = _scenario(go_scenarios, client, f"produce-{codec}", broker)
    assert outcome["sent"] == outcome["received"] == outcome["matching"] == 2000
    assert outcome["contiguous"] is True  # each partition's offsets 0..n-1: nothing lost or twice
    per_partition = outcome["per_partition"]
    assert isinstance(per_partition, dict) and set(per_partition) == {"0", "1"}
    assert not outcome.get("failures")


@pytest.mark.parametrize("client", CLIENTS)
def test_go_client_headers_null_keys_and_null_values(go_scenarios: Path, broker: BrokerProcess, client: str) -> None:
    outcome = _scenario(go_scenarios, client, "headers", broker)
    assert outcome["records"] == [
        {"key": "tombstone", "value": None, "headers": []},
        {"key": None, "value": "no key", "headers": []},
        {"key": None, "value": "headers", "headers": [
            {"key": "h1", "value": "v1"}, {"key": "h2", "value": None}, {"key": "h1", "value": "again"},
        ]},
    ]


@pytest.mark.parametrize("client", CLIENTS)
def test_go_client_offsets_by_time(go_scenarios: Path, broker: BrokerProcess, client: str) -> None:
    outcome = _scenario(go_scenarios, client, "offsets-by-time", broker)
    # Ten records at base + i s: base + 4.5 s finds offset 5; past the last, Kafka answers -1.
    assert outcome["offsets"] == {"earliest": 0, "latest": 10, "at_4500": 5, "after_last": -1}
    assert (outcome["first_value"], outcome["first_timestamp"]) == ("5", 1_700_000_005_000)


@pytest.mark.parametrize("client", CLIENTS)
def test_go_client_admin_creates_and_deletes_topics(go_scenarios: Path, broker: BrokerProcess, client: str) -> None:
    outcome = _scenario(go_scenarios, client, "admin", broker)
    assert outcome["dry_listed"] is False  # validate-only created nothing
    assert outcome["orders_partitions"] == 3
    assert outcome["orders_retention_ms"] == "3600000"
    assert outcome["duplicate_error"] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert outcome["replication_error"] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert outcome["deleted"] is True
    assert outcome["delete_missing_error"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _expected_values(prefix: str, count: int) -> list[str]:
    return sorted(f"{prefix}{i}" for i in range(count))


@pytest.mark.parametrize(("client", "scenario"), [
    ("sarama", "group-range"), ("sarama", "group-roundrobin"), ("sarama", "group-cooperative-sticky"),
    ("kafka-go", "group"),
])
def test_go_client_group_commits_and_a_new_member_resumes(
    go_scenarios: Path, broker: BrokerProcess, client: str, scenario: str
) -> None:
    outcome = _scenario(go_scenarios, client, scenario, broker)
    # Every record once while the group rebalanced (a second member joined), ...
    before = outcome["before_restart"]
    assert isinstance(before, list)
    assert sorted(before) == _expected_values("a", 40) + _expected_values("b", 40)
    if client == "sarama":
        second = outcome["second_member_read"]
        assert isinstance(second, int) and second > 0  # the member that joined held partitions
    # ... and a member that came later started exactly after the commits.
    assert outcome["resumed"] == _expected_values("c", 20)
    assert outcome["committed"] == 100


@pytest.mark.parametrize("client", CLIENTS)
def test_go_client_large_message_with_raised_limits(go_scenarios: Path, broker: BrokerProcess, client: str) -> None:
    outcome = _scenario(go_scenarios, client, "large-message", broker)
    assert (outcome["records"], outcome["received_bytes"], outcome["same"]) == (1, 5 * 1024 * 1024, True)


@pytest.mark.parametrize("client", CLIENTS)
def test_go_client_restart_keeps_records_and_commits(go_scenarios: Path, broker: BrokerProcess, client: str) -> None:
    before = _scenario(go_scenarios, client, "restart-before", broker)
    broker.restart()
    after = _scenario(go_scenarios, client, "restart-after", broker)
    everything = _expected_values("d", 500)
    assert after["read_back"] == everything  # every acknowledged record survived
    consumed, resumed = before["consumed"], after["resumed"]
    assert isinstance(consumed, list) and isinstance(resumed, list)
    assert after["committed"] == len(consumed) >= 200
    assert sorted(consumed + resumed) == everything  # resumed exactly after the commits


SCRAM_USERS = {"SCRAM-SHA-256": "carol", "SCRAM-SHA-512": "dave"}  # password: "<user>-secret"


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    """A broker with SASL_PLAINTEXT and SASL_SSL listeners and a SCRAM user per mechanism, made
    with AlterUserScramCredentials on its PLAINTEXT listener."""
    directory = tmp_path_factory.mktemp("go-sasl")
    with sasl_broker(directory / "data", certs=make_certificates(directory / "certs")) as broker:
        for mechanism, user in SCRAM_USERS.items():
            response = create_scram_user(broker, user, f"{user}-secret", mechanism)
            assert [(result.user, result.error_code) for result in response.results] == [(user, 0)]
        yield broker


def test_franz_go_kgo_scram_tests_pass(kgo_tests: tuple[Path, Path], scram_broker: SaslBroker) -> None:
    """kgo's own SCRAM tests, which the whole-package run skips (no SASL listener there): a
    SCRAM-SHA-256 login on SASL_PLAINTEXT, and an unknown user refused."""
    binary, source = kgo_tests
    result = subprocess.run(
        [str(binary), "-test.v", "-test.count=1", "-test.run=^(TestSCRAMAuth|TestSCRAMAuthBadCredentials)$"],
        cwd=source, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "KGO_SEEDS": scram_broker.bootstrap, "KGO_TEST_SCRAM_SEEDS": scram_broker.sasl_bootstrap,
             "KGO_TEST_SCRAM": "carol:carol-secret:256", "KGO_LOG_LEVEL": "none"},
    )
    results = _kgo_results(result.stdout)
    assert result.returncode == 0 and results == {"TestSCRAMAuth": "PASS", "TestSCRAMAuthBadCredentials": "PASS"}, (
        f"{results}\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")


def test_franz_go_over_sasl_ssl_scram(go_scenarios: Path, scram_broker: SaslBroker) -> None:
    """franz-go over SASL_SSL with each SCRAM mechanism (kgo's own SCRAM tests dial without TLS
    and only ping): produce, consume in a group, commit; then a wrong password is refused with
    Kafka's SASL_AUTHENTICATION_FAILED."""
    assert scram_broker.certs is not None
    for mechanism, user in SCRAM_USERS.items():
        output = _run([str(go_scenarios), "franz-go", "sasl-ssl-scram", scram_broker.sasl_ssl_bootstrap], GO_DIR,
                      timeout=150, env={"STROM_GO_SCRAM": f"{mechanism}:{user}:{user}-secret",
                                        "STROM_GO_TLS_CA": str(scram_broker.certs.ca)})
        outcome = json.loads(output.strip().splitlines()[-1])
        assert outcome == {"client": "franz-go", "scenario": "sasl-ssl-scram", "offsets": [0, 1, 2, 3, 4],
                           "values": [f"record-{i}" for i in range(5)], "committed": 5,
                           "wrong_password_error": "SASL_AUTHENTICATION_FAILED"}, mechanism
