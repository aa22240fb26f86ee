"""Client quotas against a real broker process (issue 20): Kafka's own kafka-configs tool
(``kafka.admin.ConfigCommand`` of Kafka 3.9, AlterClientQuotas/DescribeClientQuotas) alters
and describes them and they survive a restart; a confluent-kafka producer offering twice its
``producer_byte_rate`` is held to it and told so (``throttle_cb``); a consumer over its
``consumer_byte_rate`` gets a Fetch answered at once with no records and ``throttle_time_ms``,
and its connection is then not read for that long (KIP-219).

One broker for the module, with ``quota.window.num=2`` (1 s samples): Kafka's 11 would let
a new client burst for 10 s at the quota before the first throttle, and the steady state
would take as long to reach; with 2 the throttle starts within a second or two and the rate
swings over 2 s periods (a sample's expiry frees its share at once), so the producer's rate
is measured over whole periods.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from tests.support import reference_broker
from tests.support.broker_harness import batch, produce_request, records_of
from tests.support.broker_process import BrokerProcess
from tests.support.fetch_requests import fetch
from tests.support.quota_requests import alter_request, describe_request, described
from tests.support.reference_broker import WireClient

QUOTA = 200 * 1024  # producer_byte_rate: low enough that a loaded machine still offers twice it
PERIOD_S = 2  # quota.window.num x quota.window.size.seconds
WARM_UP_S = 2.0
MEASURE_S = 3 * PERIOD_S
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("quotas") / "data", {"quota.window.num": "2"}).start()
    try:
        yield process
    finally:
        process.stop()


@functools.cache
def _kafka39_jars() -> Path:
    return reference_broker.install("39")  # ./scripts/test installs them; cached outside the tree


def _kafka_configs(bootstrap: str, *args: str) -> str:
    """Kafka 3.9's ``kafka-configs.sh`` (its ConfigCommand class, run as the script does)."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    assert java, "kafka-configs needs a JDK (set JAVA_HOME)"
    result = subprocess.run(
        [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{_kafka39_jars()}/*",
         "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, *args],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_kafka_configs_alters_and_describes_quotas_that_survive_a_restart(broker: BrokerProcess) -> None:
    altered = _kafka_configs(broker.bootstrap, "--alter", "--add-config",
                             "producer_byte_rate=1048576,consumer_byte_rate=2048,request_percentage=200",
                             "--entity-type", "users", "--entity-name", "alice",
                             "--entity-type", "clients", "--entity-default")
    assert "Completed updating config for user alice." in altered
    with WireClient(broker.bootstrap, client_id="quota-admin") as client:
        answer = client.call(describe_request([("user", 0, "alice")]), version=1)
    assert described(answer) == {(("user", "alice"), ("client-id", None)): {
        "producer_byte_rate": 1048576.0, "consumer_byte_rate": 2048.0, "request_percentage": 200.0}}
    broker.stop()
    broker.start()
    shown = _kafka_configs(broker.bootstrap, "--describe", "--entity-type", "users", "--entity-name", "alice",
                           "--entity-type", "clients", "--entity-default")
    assert ("Quota configs for user-principal 'alice', the default client-id are consumer_byte_rate=2048.0, "
            "producer_byte_rate=1048576.0, request_percentage=200.0") in shown


def test_a_producer_offering_twice_its_quota_is_held_to_it(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    with WireClient(broker.bootstrap) as client:
        answer = client.call(alter_request([([("client-id", "quota-producer")], {"producer_byte_rate": QUOTA})]), 1)
        assert [entry.error_code for entry in answer.entries] == [0]  # type: ignore[attr-defined]
        _create_topic(client, "quota-produce")
    throttles: list[float] = []
    acked: list[tuple[float, int]] = []

    def delivered(error: object, message: object) -> None:
        if error is None:
            acked.append((time.monotonic(), len(message.value())))  # type: ignore[attr-defined]

    # Small batches, so the rate is not judged on a few large requests.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "quota-producer", "acks": 1,
                         "batch.size": 16384, "linger.ms": 5,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    value = b"q" * 4096
    start = time.monotonic()
    end = start + WARM_UP_S + MEASURE_S
    sent = 0
    while (now := time.monotonic()) < end:
        due = int((now - start) * 2 * QUOTA / len(value))  # twice the quota, paced
        for _ in range(due - sent):
            producer.produce("quota-produce", value, on_delivery=delivered)
        sent = max(sent, due)
        producer.poll(0.01)
    producer.poll(0.1)
    producer.purge()
    producer.flush(TIMEOUT_S)
    offered = sent * len(value) / (end - start)
    rate = sum(size for at, size in acked if start + WARM_UP_S <= at < end) / MEASURE_S
    assert offered >= 1.9 * QUOTA
    assert abs(rate - QUOTA) <= 0.1 * QUOTA, f"{rate / QUOTA:.2f} x the quota"
    assert throttles and max(throttles) > 0


def test_a_consumer_over_its_quota_gets_no_records_and_a_muted_connection(broker: BrokerProcess) -> None:
    rate = 10_000  # consumer_byte_rate: a Fetch reads at most 10 KB (the rate over one whole window)
    with WireClient(broker.bootstrap) as client:
        _create_topic(client, "quota-fetch")
        for _ in range(20):  # 2 KB batches: the cap can cut between them
            client.call(produce_request("quota-fetch", 0, batch([b"f" * 2000])), 9)
        client.call(alter_request([([("client-id", "quota-consumer")], {"consumer_byte_rate": rate})]), 1)
    with WireClient(broker.bootstrap, client_id="quota-consumer", timeout=TIMEOUT_S) as consumer:
        first = consumer.call(fetch([("quota-fetch", 0, 0)]), 12)
        records = records_of(first.responses[0].partitions[0].records)  # type: ignore[attr-defined]
        assert first.throttle_time_ms == 0 and 0 < len(records) <= 5  # type: ignore[attr-defined]
        second = consumer.call(fetch([("quota-fetch", 0, len(records))]), 12)
        received = time.monotonic()
        throttle_ms: int = second.throttle_time_ms  # type: ignore[attr-defined]
        assert throttle_ms > 0
        assert second.responses == ()  # type: ignore[attr-defined]
        consumer.call(ApiVersionsRequest(), 3)  # read only once the mute is over
        assert time.monotonic() - received >= throttle_ms / 2000


def _create_topic(client: WireClient, name: str) -> None:
    answer = client.call(CreateTopicsRequest(topics=(CreatableTopic(name=name, num_partitions=1,
                                                                     replication_factor=1),), timeout_ms=5000), 7)
    assert [topic.error_code for topic in answer.topics] == [0]  # type: ignore[attr-defined]
