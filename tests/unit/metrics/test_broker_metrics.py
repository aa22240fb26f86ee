"""The request-path metrics without a network: record counts from real record sets, error
codes found in nested responses, the listener's parsing and its one-line errors."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from strom.broker.broker import Broker
from strom.broker.config import BrokerConfig, ConfigError
from strom.metrics.broker_metrics import BrokerMetrics, count_records
from strom.metrics.exposition import Family
from strom.metrics.listener import MetricsListener, parse_metrics_listener
from strom.protocol.headers import Request, decode_request, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from strom.protocol.messages.create_topics_response import (
    CreatableTopicResult,
    CreateTopicsResponse,
)
from strom.protocol.records.legacy import build_message_set
from strom.protocol.records.v2_builder import build_record_batch


def test_records_are_counted_from_each_batch_header() -> None:
    one = build_record_batch([(b"k", b"v" * n, (), None) for n in range(7)])
    two = build_record_batch([(None, b"x", (), None)] * 3)
    assert count_records(one) == 7
    assert count_records(one + two) == 10
    assert count_records(build_message_set([(b"k", b"v", None)] * 4, magic=1)) == 4
    assert count_records(b"") == 0


def _request(message: Message, version: int) -> Request:
    return decode_request(encode_request(message, version, 7, "test")[4:])  # the frame, its size prefix off


def _parsed(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def _samples(metrics: BrokerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.exposition().decode()
    registry = CollectorRegistry()  # the same families through prometheus_client's own writer
    registry.register(metrics)
    assert _parsed(text) == _parsed(generate_latest(registry).decode())
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_every_error_code_of_a_response_is_counted_under_its_name() -> None:
    metrics = BrokerMetrics()
    request = _request(CreateTopicsRequest(topics=(CreatableTopic(name="a"), CreatableTopic(name="b"))), 5)
    response = CreateTopicsResponse(topics=(CreatableTopicResult(name="a", error_code=36),
                                            CreatableTopicResult(name="b", error_code=0)))

    async def handler() -> Message | None:
        return response

    assert asyncio.run(metrics.observe(handler(), request)) is response
    samples = _samples(metrics)
    errors = "kafka_network_requestmetrics_errors_total"
    assert samples[(errors, (("error", "TOPIC_ALREADY_EXISTS"), ("request", "CreateTopics")))] == 1
    assert samples[(errors, (("error", "NONE"), ("request", "CreateTopics")))] == 1
    assert samples[("kafka_network_requestmetrics_requests_total", (("request", "CreateTopics"), ("version", "5")))] == 1
    assert samples[("kafka_network_requestmetrics_totaltimems_count", (("request", "CreateTopics"),))] == 1


@pytest.mark.parametrize(("value", "expected"), [
    ("", None), ("http://127.0.0.1:9644", MetricsListener("127.0.0.1", 9644)),
    ("http://:9644", MetricsListener("", 9644)), ("HTTP://[::1]:0/", MetricsListener("::1", 0)),
])
def test_the_listener_is_parsed(value: str, expected: MetricsListener | None) -> None:
    assert parse_metrics_listener(value) == expected


@pytest.mark.parametrize("value", ["127.0.0.1:9644", "https://127.0.0.1:9644", "http://127.0.0.1", "http://h:99999",
                                   "http://h:9644/metrics", "http://user@h:1"])
def test_a_bad_listener_is_one_config_error_line(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^metrics\.listener .* must be http://host:port") as caught:
        BrokerConfig.from_properties({"metrics.listener": value})
    assert "\n" not in str(caught.value)


def test_a_port_in_use_is_one_config_error_line(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties({"log.dirs": str(tmp_path / "a"), "metrics.listener": "http://127.0.0.1:0"})
    first = Broker(config)
    assert first.metrics_server is not None
    taken = f"http://127.0.0.1:{first.metrics_server.port}"
    try:
        with pytest.raises(ConfigError, match=r"^cannot listen on metrics\.listener http://127\.0\.0\.1:"):
            Broker(BrokerConfig.from_properties({"log.dirs": str(tmp_path / "b"), "metrics.listener": taken}))
    finally:
        first.metrics_server.sock.close()


def test_metrics_are_off_unless_a_listener_is_set(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig.from_properties({"log.dirs": str(tmp_path)}))
    assert broker.metrics is None and broker.metrics_server is None


def test_the_gauges_text_is_what_prometheus_client_would_write() -> None:
    """``Family.render`` (the scrape's fast path) against prometheus_client's own writer."""
    lag = Family("kafka_consumergroup_lag", "lag", labels=["consumergroup", "topic", "partition"])
    lag.add_metric(['a "quoted" \\ group\nwith a newline', "t", "0"], 5)
    lag.add_metric(["plain", "t", "1"], 0.25)
    families = [lag, Family("kafka_server_replicamanager_partitioncount", "partitions", value=3)]
    out: list[str] = []
    for family in families:
        family.render(out)
    registry = CollectorRegistry()

    class Fixed(Collector):
        def collect(self) -> Iterator[Metric]:
            return (family.metric() for family in families)

    registry.register(Fixed())

    assert _parsed("".join(out)) == _parsed(generate_latest(registry).decode())
    assert _parsed("".join(out))[0][1]["consumergroup"] == 'a "quoted" \\ group\nwith a newline'


def test_a_broker_without_metrics_never_imports_prometheus_client(tmp_path: Path) -> None:
    """Off (the default), the broker answers requests without loading prometheus_client."""
    script = (
        "import asyncio, sys\n"
        "from strom.broker.broker import Broker\n"
        "from strom.broker.config import BrokerConfig\n"
        "from strom.protocol.headers import encode_request\n"
        "from strom.protocol.messages.metadata_request import MetadataRequest\n"
        f"broker = Broker(BrokerConfig.from_properties({{'log.dirs': {str(tmp_path)!r}}}))\n"
        "broker.startup()\n"
        "answer = asyncio.run(broker.handle(encode_request(MetadataRequest(topics=None), 9, 1, 'c')[4:]))\n"
        "assert answer, answer\n"
        "print('prometheus_client' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "False"
