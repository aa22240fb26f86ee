"""``/metrics`` of a real ``strom serve`` (one per module) scraped as Prometheus does, and
parsed with prometheus_client's own parser; traffic from confluent-kafka."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.support.broker_process import BrokerProcess

RECORD_BYTES = 100


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    url = f"http://127.0.0.1:{_free_port()}"
    process = BrokerProcess(Path(tmp_path_factory.mktemp("metrics")) / "data",
                            {"metrics.listener": url}).start()
    try:
        yield process, url
    finally:
        process.stop()


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample: (name, labels) → value."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for n in range(count):
        producer.produce(topic, value=b"v" * RECORD_BYTES, key=b"k%d" % n, partition=0)
    assert producer.flush(30) == 0


def test_produce_counts_records_and_bytes_in_per_topic(broker: tuple[BrokerProcess, str]) -> None:
    process, url = broker
    create_topic(process.bootstrap, "traffic")
    before = scrape(url)
    produce(process.bootstrap, "traffic", 25)
    after = scrape(url)
    rose = {name: value(after, name, topic="traffic") - value(before, name, topic="traffic")
            for name in ("kafka_server_brokertopicmetrics_messagesin_total",
                         "kafka_server_brokertopicmetrics_bytesin_total",
                         "kafka_server_brokertopicmetrics_totalproducerequests_total",
                         "kafka_server_brokertopicmetrics_failedproducerequests_total")}
    assert rose["kafka_server_brokertopicmetrics_messagesin_total"] == 25
    assert rose["kafka_server_brokertopicmetrics_bytesin_total"] >= 25 * RECORD_BYTES
    assert rose["kafka_server_brokertopicmetrics_totalproducerequests_total"] >= 1
    assert rose["kafka_server_brokertopicmetrics_failedproducerequests_total"] == 0
    produced = sum(v for (name, labels), v in after.items()
                   if name == "kafka_network_requestmetrics_requests_total" and ("request", "Produce") in labels)
    timed = value(after, "kafka_network_requestmetrics_totaltimems_count", request="Produce")
    assert produced >= 1 and timed == produced
    assert value(after, "kafka_log_log_size", topic="traffic", partition="0") >= 25 * RECORD_BYTES


def test_an_error_is_counted_under_its_name(broker: tuple[BrokerProcess, str]) -> None:
    process, url = broker
    create_topic(process.bootstrap, "twice")
    before = scrape(url)
    with pytest.raises(Exception, match="already exists"):
        create_topic(process.bootstrap, "twice")
    after = scrape(url)
    name, labels = "kafka_network_requestmetrics_errors_total", {"request": "CreateTopics", "error": "TOPIC_ALREADY_EXISTS"}
    assert value(after, name, **labels) - value(before, name, **labels) == 1


def test_consumer_lag_is_high_watermark_minus_committed(broker: tuple[BrokerProcess, str]) -> None:
    process, url = broker
    create_topic(process.bootstrap, "lagging", partitions=2)
    produce(process.bootstrap, "lagging", 10)
    consumer = Consumer({"bootstrap.servers": process.bootstrap, "group.id": "laggards",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[KafkaTopicPartition("lagging", 0, 4), KafkaTopicPartition("lagging", 1, 0)],
                        asynchronous=False)
        _, high = consumer.get_watermark_offsets(KafkaTopicPartition("lagging", 0), timeout=30)
    finally:
        consumer.close()
    samples = scrape(url)
    assert high == 10
    assert value(samples, "kafka_consumergroup_lag", consumergroup="laggards", topic="lagging", partition="0") == high - 4
    assert value(samples, "kafka_consumergroup_current_offset", consumergroup="laggards", topic="lagging",
                 partition="0") == 4
    assert ("kafka_consumergroup_lag", frozenset({("consumergroup", "laggards"), ("topic", "lagging"),
                                                  ("partition", "1")})) in samples
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup="laggards", topic="lagging") == high - 4


def test_a_single_node_is_the_controller_with_every_partition_in_sync(broker: tuple[BrokerProcess, str]) -> None:
    process, url = broker
    create_topic(process.bootstrap, "gauges", partitions=3)
    samples = scrape(url)
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    partitions = value(samples, "kafka_server_replicamanager_partitioncount")
    assert partitions >= 3 and value(samples, "kafka_server_replicamanager_leadercount") == partitions
    assert ("kafka_log_log_size", frozenset({("topic", "gauges"), ("partition", "2")})) in samples
    assert value(samples, "kafka_log_logcleanermanager_max_dirty_percent") >= 0


def test_open_connections_are_counted_per_listener(broker: tuple[BrokerProcess, str]) -> None:
    process, url = broker
    host, port = process.bootstrap.rsplit(":", 1)
    name = "kafka_server_socket_server_metrics_connection_count"
    with socket.create_connection((host, int(port)), timeout=30), socket.create_connection((host, int(port)),
                                                                                            timeout=30):
        deadline = time.monotonic() + 30  # the broker's loop accepts them soon; generous on a loaded machine
        while (open_now := value(scrape(url), name, listener="PLAINTEXT")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert open_now >= 2


def test_only_get_metrics_is_served(broker: tuple[BrokerProcess, str]) -> None:
    _, url = broker
    with pytest.raises(urllib.error.HTTPError, match="404"):
        urllib.request.urlopen(f"{url}/other", timeout=30)
    with pytest.raises(urllib.error.HTTPError, match="405"):
        urllib.request.urlopen(urllib.request.Request(f"{url}/metrics", data=b"x", method="POST"), timeout=30)
