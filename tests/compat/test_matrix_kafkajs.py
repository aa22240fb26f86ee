"""kafkajs (Node.js, tests/compat/js/scenarios.js): scenarios 2 to 9 of the matrix (see matrix.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from confluent_kafka.admin import AdminClient

from tests.compat.matrix import BASE_TIME, FIVE_MIB, JS, _create, _produce, _read_all
from tests.support.broker_process import BrokerProcess


def _kafkajs(scenario: str, broker: BrokerProcess, topic: str, *args: str) -> Any:
    node = shutil.which("node")
    assert node is not None, "node is not installed: ./scripts/test installs it"
    assert (JS / "node_modules" / "kafkajs").is_dir(), "run ./scripts/test: it installs kafkajs with npm"
    result = subprocess.run(
        [node, str(JS / "scenarios.js"), scenario, broker.bootstrap, topic, *args],
        capture_output=True, text=True, timeout=90, check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_kafkajs_idempotent_producer(broker: BrokerProcess) -> None:
    _create(broker, "kjs-idem", 2)
    _kafkajs("idempotent", broker, "kjs-idem")
    records = _read_all(broker, "kjs-idem", 2)
    assert {key: value for _, _, key, value in records} == {
        b"k%d" % i: b"v%d " % i * (i % 20 + 1) for i in range(200)}
    assert len(records) == 200


def test_kafkajs_group_commit_restart_resume(broker: BrokerProcess) -> None:
    _create(broker, "kjs-orders", 2)
    _produce(broker, "kjs-orders", [f"a{i}" for i in range(30)], 2)
    first = _kafkajs("group", broker, "kjs-orders", "kjs-billing", "30")["values"]
    assert sorted(first) == sorted(f"a{i}" for i in range(30))
    broker.restart()
    _produce(broker, "kjs-orders", [f"b{i}" for i in range(10)], 2)
    second = _kafkajs("group", broker, "kjs-orders", "kjs-billing", "10")["values"]
    assert sorted(second) == sorted(f"b{i}" for i in range(10))  # nothing lost, nothing twice


def test_kafkajs_two_consumers_rebalance_and_see_every_record_once(broker: BrokerProcess) -> None:
    _create(broker, "kjs-events", 4)
    first = [f"e{i}" for i in range(80)]
    _produce(broker, "kjs-events", first, 4)
    outcome = _kafkajs("two", broker, "kjs-events", "kjs-workers", "160")
    seen = outcome["seen"]
    positions = [(r["partition"], r["offset"]) for r in seen]
    assert len(positions) == len(set(positions)) == 160
    assert sorted(r["value"] for r in seen) == sorted(first + [f"f{i}" for i in range(80)])
    assert set(outcome["assigned"][0]).isdisjoint(outcome["assigned"][1])
    assert {0, 1} == {r["who"] for r in seen if r["value"].startswith("f")}


def test_kafkajs_headers_and_null_keys_and_values(broker: BrokerProcess) -> None:
    _create(broker, "kjs-edge", 1)
    tombstone, keyless, with_headers = _kafkajs("edge", broker, "kjs-edge")["records"]
    assert tombstone == {"key": "tombstone", "value": None, "headers": {}}
    assert keyless == {"key": None, "value": "no key", "headers": {}}
    assert with_headers == {"key": None, "value": "headers", "headers": {"h1": ["v1", "again"], "h2": ""}}
    assert [(key, value) for _, _, key, value in _read_all(broker, "kjs-edge", 1)] == [
        (b"tombstone", None), (None, b"no key"), (None, b"headers")]


def test_kafkajs_five_mib_message_with_raised_limits(broker: BrokerProcess) -> None:
    outcome = _kafkajs("big", broker, "kjs-big")
    assert outcome == {"sentLength": FIVE_MIB, "receivedLength": FIVE_MIB, "same": True}


def test_kafkajs_deletes_a_topic(broker: BrokerProcess) -> None:
    outcome = _kafkajs("remove", broker, "kjs-doomed")
    assert outcome == {"before": True, "after": False}
    assert "kjs-doomed" not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics


def test_kafkajs_offsets_by_timestamp_and_seek(broker: BrokerProcess) -> None:
    _create(broker, "kjs-timed", 1)
    outcome = _kafkajs("times", broker, "kjs-timed", str(BASE_TIME))
    assert outcome["found"] == [{"partition": 0, "offset": "5"}]
    assert outcome["future"] == [{"partition": 0, "offset": "10"}]  # kafkajs maps Kafka's -1 to the high watermark
    assert outcome["watermarks"] == [{"partition": 0, "offset": "10", "high": "10", "low": "0"}]
    assert outcome["afterSeek"] == [[i, str(i), BASE_TIME + i * 1000] for i in range(7, 10)]
