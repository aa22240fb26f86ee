"""Apache Kafka's Java client (kafka-clients 3.9 and 4.x) against a real ``strom serve``.

tests/compat/java/StromScenarios.java runs one scenario per invocation and prints what the
client observed as one JSON line; the assertions are here, beside the other clients'. The
jars come from Maven Central through tests/compat/java/fetch, and the program is compiled
with javac once per test session and client version (tests/support/java_client.py). Where
a second opinion is cheap, what the Java client wrote is read back with librdkafka or over
the wire with Strom's codec.

Kafka is the reference: every scenario also runs, with the same assertions, against Apache
Kafka 3.9 (the session's ``kafka39``), so what is asserted of Strom is what Kafka answers.
Where Kafka answers otherwise, the assertion names both (and FINDINGS.md says why).
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from strom.protocol.compression import CompressionType
from strom.protocol.messages.fetch_response import FetchResponse
from strom.protocol.records.header import BatchHeader, iter_batches
from tests.compat.matrix import BASE_TIME, FIVE_MIB, _big_value, _read_all
from tests.support import reference_broker
from tests.support.broker_process import BrokerProcess
from tests.support.fetch_requests import fetch, partitions_of
from tests.support.java_client import LINES, RUN_TIMEOUT, JavaClient, compile_java_client
from tests.support.reference_broker import ReferenceBroker, WireClient

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
FETCH_VERSION = 12
# Apache Kafka 3.9 (ZooKeeper mode), started once per session for the tests that take it;
# the name marks them "reference" and "slow" (tests/conftest.py).
kafka39 = reference_broker.kafka39


@pytest.fixture(scope="session", params=sorted(LINES), ids=[f"kafka-clients-{name}" for name in sorted(LINES)])
def java_client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    return compile_java_client(request.param, tmp_path_factory.mktemp("java"))


def test_java_program_refuses_a_bad_command_line(java_client: JavaClient) -> None:
    for args, message in [
        (("no-such-scenario", "127.0.0.1:9"), "unknown scenario 'no-such-scenario'"),
        (("codecs", "127.0.0.1:9", "topic", "many", "gzip"), "COUNT must be a whole number, got 'many'"),
        (("codecs", "127.0.0.1:9", "topic", "10"), "missing argument CODEC"),
        (("admin",), "usage: StromScenarios SCENARIO HOST:PORT"),
    ]:
        result = subprocess.run(java_client.command(*args), capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 2
        assert result.stdout == ""
        (line,) = result.stderr.strip().splitlines()  # one clear line, no stack trace
        assert line.startswith(f"StromScenarios: {message}")


@dataclass(frozen=True)
class Target:
    """The broker a scenario runs against: a fresh ``strom serve``, or the session's Kafka 3.9
    (shared by every scenario, so names carry a prefix of their own)."""

    bootstrap: str
    node_id: int
    prefix: str
    strom: BrokerProcess | None  # for the restart and the cross-checks with librdkafka

    def name(self, suffix: str) -> str:
        return f"{self.prefix}{suffix}"

    def create(self, topic: str, partitions: int) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _on_strom(broker: BrokerProcess) -> Target:
    return Target(broker.bootstrap, node_id=1, prefix="", strom=broker)


def _on_kafka(kafka: ReferenceBroker, client: JavaClient, scenario: str) -> Target:
    return Target(kafka.bootstrap, node_id=0, prefix=f"c{client.line}-{scenario}-", strom=None)


# --- the scenarios: each runs the Java client, then asserts what Kafka answers -------------

def _admin(client: JavaClient, target: Target) -> None:
    prefix = target.name("jadm")
    outcome = client.run("admin", target.bootstrap, prefix)
    assert outcome["dryRunListed"] is False  # validateOnly creates nothing
    assert outcome["listed"] is True
    assert outcome["createAgain"] == "TopicExistsException"
    assert outcome["replicationFactor3"] == "InvalidReplicationFactorException"
    assert outcome["describeMissing"] == "UnknownTopicOrPartitionException"
    node = target.node_id
    # Without an authorizer Kafka answers every operation a topic (8) and the cluster (7) support.
    assert outcome["topic"] == {
        "name": f"{prefix}-orders", "internal": False, "topicIdSet": True,
        "partitions": [[0, node, 1, 1], [1, node, 1, 1], [2, node, 1, 1]],
        "authorizedOperations": ["ALTER", "ALTER_CONFIGS", "CREATE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS",
                                 "READ", "WRITE"],
    }
    host, port = target.bootstrap.rsplit(":", 1)
    cluster = outcome["cluster"]
    assert cluster["nodes"] == [[node, host, int(port)]]
    assert cluster["controller"] == node
    assert len(cluster["clusterId"]) == 22  # a base64 UUID, as Kafka's
    assert cluster["authorizedOperations"] == ["ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE",
                                               "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"]
    assert outcome["retentionMs"] == ["3600000", "DYNAMIC_TOPIC_CONFIG"]
    assert outcome["cleanupPolicy"] == ["delete", "DEFAULT_CONFIG"]
    assert outcome["partitionsAfterGrow"] == 5
    assert outcome["listedAfterDelete"] is False
    assert outcome["deleteAgain"] == "UnknownTopicOrPartitionException"
    topics = AdminClient({"bootstrap.servers": target.bootstrap}).list_topics(timeout=10).topics
    assert not {f"{prefix}-orders", f"{prefix}-dry", f"{prefix}-replicated"} & set(topics)


def _batch_headers(bootstrap: str, topic: str, partition: int) -> list[BatchHeader]:
    """The record batches' headers at the start of a partition, fetched over the wire."""
    request = fetch([(topic, partition, 0)], version=FETCH_VERSION, max_bytes=4 << 20, partition_max_bytes=4 << 20)
    with WireClient(bootstrap, client_id="wire-check") as wire:
        response = wire.call(request, FETCH_VERSION)
    assert isinstance(response, FetchResponse)
    records = partitions_of(response)[(topic, partition)].records
    return [header for _, header in iter_batches(records)]


def _codecs(client: JavaClient, target: Target) -> None:
    prefix = target.name("jcodec")
    for codec in CODECS:
        target.create(f"{prefix}-{codec}", 2)
    outcomes = client.run("codecs", target.bootstrap, prefix, "2000", *CODECS)
    assert list(outcomes) == CODECS
    for codec, outcome in outcomes.items():
        assert outcome["codec"] == codec
        assert outcome["sent"] == outcome["received"] == outcome["distinctPositions"] == 2000, codec
        assert outcome["allMatch"] is True, codec
        assert outcome["ackedContiguous"] is True, codec  # offsets 0..n-1 per partition: nothing twice
        assert outcome["partitions"] == 2, codec
        if codec == "none":
            assert outcome["compressionRate"] == 1.0
        else:  # the values repeat a phrase: every codec shrinks them several times
            assert outcome["compressionRate"] < 0.5, codec
        for partition in (0, 1):
            headers = _batch_headers(target.bootstrap, f"{prefix}-{codec}", partition)
            assert headers, codec
            assert {header.compression for header in headers} == {CompressionType[codec.upper()]}
            # Idempotent: a producer id and sequence numbers on every batch.
            assert all(header.producer_id >= 0 and header.base_sequence >= 0 for header in headers), codec


def _cooperative(client: JavaClient, target: Target) -> None:
    topic, group = target.name("jcoop"), target.name("jworkers")
    target.create(topic, 4)
    client.run("send", target.bootstrap, topic, "4", "e", "400")
    outcome = client.run("cooperative", target.bootstrap, topic, group, "400")
    moved = outcome["assignedWhileBoth"]["b"]
    kept = outcome["assignedWhileBoth"]["a"]
    assert len(moved) == len(kept) == 2 and sorted(moved + kept) == [0, 1, 2, 3]
    # Cooperative: a gives up only the two partitions that move, never all four, and when b
    # leaves a is handed exactly those two without giving anything up.
    assert outcome["events"] == [
        ["a", "assigned", [0, 1, 2, 3]],
        ["a", "revoked", moved],
        ["b", "assigned", moved],
        ["b", "revoked", moved],  # b's close
        ["a", "assigned", moved],
        ["a", "revoked", [0, 1, 2, 3]],  # a's close
    ]
    assert outcome["describedWhileBoth"] == {"assignor": "cooperative-sticky",
                                             "members": {"member-a": kept, "member-b": moved}}
    assert outcome["describedAfterLeave"] == {"assignor": "cooperative-sticky",
                                              "members": {"member-a": [0, 1, 2, 3]}}
    seen = outcome["seen"]
    positions = [(partition, offset) for _, partition, offset, _ in seen]
    assert len(positions) == len(set(positions)) == 840  # nothing repeated across the hand-overs
    expected = [f"e{i}" for i in range(400)] + [f"mid{i}" for i in range(400)] + [f"late{i}" for i in range(40)]
    assert sorted(value for *_, value in seen) == sorted(expected)
    # While both were members, each read exactly the partitions it owned; after b left, a read all.
    readers = Counter((who, value.rstrip("0123456789")) for who, _, _, value in seen)
    assert readers["a", "mid"] == readers["b", "mid"] == 200
    assert readers["a", "late"] == 40 and readers["b", "late"] == 0
    assert {partition for who, partition, _, value in seen if value.startswith("mid") and who == "b"} == set(moved)


def _commit_and_resume(client: JavaClient, target: Target) -> None:
    """Commit, then a new consumer resumes there; on Strom the broker restarts in between."""
    topic, group = target.name("jorders"), target.name("jbilling")
    target.create(topic, 2)
    client.run("send", target.bootstrap, topic, "2", "a", "30")
    first = client.run("commit", target.bootstrap, topic, group, "30")
    assert first["committedBefore"] == {"0": None, "1": None}
    assert sorted(value for *_, value in first["records"]) == sorted(f"a{i}" for i in range(30))
    assert first["committedAfter"] == {"0": 15, "1": 15}
    assert first["positionsAtEnd"] is True

    if target.strom is not None:
        target.strom.restart()  # same port, same data directory
    client.run("send", target.bootstrap, topic, "2", "b", "10")
    second = client.run("commit", target.bootstrap, topic, group, "10")
    assert second["committedBefore"] == {"0": 15, "1": 15}  # the commit survived the restart
    assert sorted(value for *_, value in second["records"]) == sorted(f"b{i}" for i in range(10))
    for partition in (0, 1):  # resumed at the committed offset: nothing lost, nothing twice
        offsets = [offset for p, offset, _ in second["records"] if p == partition]
        assert offsets == list(range(15, 20))
    assert second["committedAfter"] == {"0": 20, "1": 20}
    assert second["positionsAtEnd"] is True
    reader = confluent_kafka.Consumer({"bootstrap.servers": target.bootstrap, "group.id": group})
    stored = reader.committed([confluent_kafka.TopicPartition(topic, p) for p in (0, 1)], timeout=10)
    reader.close()
    assert [tp.offset for tp in stored] == [20, 20]  # librdkafka reads the same commits


NEW_PROTOCOL_REFUSED = (
    "The cluster does not support the new CONSUMER group protocol. Set group.protocol=classic on the"
    " consumer configs to revert to the CLASSIC protocol until the cluster is upgraded.")


def _new_consumer_protocol(client: JavaClient, target: Target) -> None:
    """KIP-848's group.protocol=consumer needs ConsumerGroupHeartbeat (API 68): Strom does not
    list it in ApiVersions; Kafka 3.9 in ZooKeeper mode lists v0 and answers it with
    UNSUPPORTED_VERSION. Either way the client fails poll() with UnsupportedVersionException
    within the scenario's 60 s (in about a second) rather than retrying forever. Only the
    3.9 client's message tells the two apart (FINDINGS.md)."""
    topic, group = target.name("jnew"), target.name("jnew-group")
    target.create(topic, 1)
    outcome = client.run("kip848", target.bootstrap, topic, group)
    assert outcome["error"] == "org.apache.kafka.common.errors.UnsupportedVersionException"
    if client.line == "4":
        assert outcome["message"] == NEW_PROTOCOL_REFUSED
    elif target.strom is not None:  # the client's own words: API 68 is not in ApiVersions
        assert outcome["message"] == "The node does not support CONSUMER_GROUP_HEARTBEAT"
    else:  # UNSUPPORTED_VERSION's message, from the error code in Kafka 3.9's answer
        assert outcome["message"] == "The version of API is not supported."
    groups = AdminClient({"bootstrap.servers": target.bootstrap}).list_consumer_groups().result(10)
    assert group not in {listed.group_id for listed in groups.valid}  # no group made on the way


def _seek_by_time(client: JavaClient, target: Target) -> None:
    topic = target.name("jtimed")
    target.create(topic, 1)
    outcome = client.run("times", target.bootstrap, topic, str(BASE_TIME))
    assert outcome["found"] == [5, BASE_TIME + 5000]  # first record at or after base + 4.5 s
    assert outcome["future"] == "null"  # no record that late: the Java client answers null
    assert (outcome["beginning"], outcome["end"]) == (0, 10)
    assert outcome["afterSeek"] == [[i, BASE_TIME + i * 1000, f"t{i}"] for i in range(5, 10)]
    assert outcome["listOffsets"] == {
        "earliest": [0, -1], "latest": [10, -1],
        "maxTimestamp": [9, BASE_TIME + 9000], "forTimestamp": [2, BASE_TIME + 2000],
    }


def _headers_and_nulls(client: JavaClient, target: Target) -> None:
    topic = target.name("jedge")
    target.create(topic, 1)
    outcome = client.run("edge", target.bootstrap, topic)
    assert outcome["records"] == [
        {"offset": 0, "key": "tombstone", "value": None, "headers": []},
        {"offset": 1, "key": None, "value": "no key", "headers": []},
        {"offset": 2, "key": None, "value": "headers", "headers": [["h1", "v1"], ["h2", None], ["h1", "again"]]},
    ]
    if target.strom is not None:
        assert [(key, value) for _, _, key, value in _read_all(target.strom, topic, 1)] == [
            (b"tombstone", None), (None, b"no key"), (None, b"headers")]


def _five_mib_record(client: JavaClient, target: Target) -> None:
    topic = target.name("jbig")
    outcome = client.run("big", target.bootstrap, topic)
    # The same record to a topic left at the default max.message.bytes: the broker refuses it.
    assert outcome == {"offset": 0, "toDefaultLimit": "RecordTooLargeException",
                       "sentLength": FIVE_MIB, "receivedLength": FIVE_MIB, "same": True}
    if target.strom is not None:
        ((_, _, _, value),) = _read_all(target.strom, topic, 1)
        assert value == _big_value()  # the same bytes as the other clients' 5 MiB record


def _abort_hanging_transaction(client: JavaClient, target: Target) -> None:
    """KIP-664's admin API (listTransactions, describeTransactions, describeProducers,
    abortTransaction) on a transaction left open: tests/compat/java/TxnAdminScenario.java,
    a program of its own beside StromScenarios."""
    topic = target.name("jtxnadmin")
    target.create(topic, 1)
    command = client.command(target.bootstrap, topic, f"{topic}-id", program="TxnAdminScenario")
    result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    assert result.returncode == 0, f"TxnAdminScenario exited {result.returncode}:\n{result.stderr[-4000:]}"
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome == {
        "before": [0, 3],  # [last stable offset, high watermark]: the open transaction holds the LSO
        "listed": "Ongoing",
        "described": ["Ongoing", 60000, True, 0, [f"{topic}-0"]],  # state, timeout, start time, epoch
        "producers": 1,
        "hanging": [True, 0, 2, 0],  # the coordinator's producer id, epoch, last sequence, txn start
        "after": [4, 4],  # the abort marker is in: nothing unstable
        "clearedStartOffset": -1,
    }


SCENARIOS: dict[str, Callable[[JavaClient, Target], None]] = {
    "abort-hanging-transaction": _abort_hanging_transaction,
    "admin": _admin,
    "idempotent-producer-every-codec": _codecs,
    "cooperative": _cooperative,
    "commit-and-resume": _commit_and_resume,
    "new-consumer-protocol": _new_consumer_protocol,
    "seek-by-time": _seek_by_time,
    "headers-and-nulls": _headers_and_nulls,
    "five-mib-record": _five_mib_record,
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_java_client_on_strom(broker: BrokerProcess, java_client: JavaClient, scenario: str) -> None:
    SCENARIOS[scenario](java_client, _on_strom(broker))


# Against Kafka the newest client stands for both: what these scenarios assert does not
# depend on the client's version, but for the new consumer protocol's message (below).
@pytest.mark.parametrize("java_client", ["4"], indirect=True, ids=["kafka-clients-4"])
@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - {"new-consumer-protocol"}))
def test_java_client_on_kafka_39_sees_the_same(kafka39: ReferenceBroker, java_client: JavaClient, scenario: str) -> None:
    SCENARIOS[scenario](java_client, _on_kafka(kafka39, java_client, scenario))


def test_java_new_consumer_protocol_on_kafka_39(kafka39: ReferenceBroker, java_client: JavaClient) -> None:
    _new_consumer_protocol(java_client, _on_kafka(kafka39, java_client, "new-consumer-protocol"))
