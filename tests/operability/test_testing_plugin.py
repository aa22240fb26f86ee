"""strom.testing as another project sees it: a small test project run by ``pytester``.

The project has no conftest: its fixtures come from the ``pytest11`` entry point alone.
Its tests produce with confluent-kafka, kafka-python, aiokafka and ``strom.client``, and
check through the fixture's helpers (``read_all``) and by consuming; the marker's
overrides, the factory and a bad override are there too, and the README's example. The
project runs in a pytest subprocess of its own, so the entry point is what loads the
plugin: whole with brokers in a thread of the test process, in part with ``strom serve``
subprocesses.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from strom.testing import BrokerStartError, EmbeddedBroker

pytest_plugins = ["pytester"]

PROJECT = '''
import asyncio
import uuid

import pytest


def fresh(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"  # the session's broker is shared between tests


def test_confluent_kafka(strom_broker):
    from confluent_kafka import Consumer, Producer

    topic = fresh("confluent")
    strom_broker.create_topic(topic, partitions=3)
    producer = Producer({"bootstrap.servers": strom_broker.bootstrap_servers})
    for n in range(6):
        producer.produce(topic, key=b"k%d" % n, value=b"v%d" % n, partition=n % 3)
    assert producer.flush(30) == 0
    assert sorted(r.value for r in strom_broker.read_all(topic)) == [b"v%d" % n for n in range(6)]
    consumer = Consumer({"bootstrap.servers": strom_broker.bootstrap_servers, "group.id": fresh("g"),
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = []
    for _ in range(200):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
        if len(seen) == 6:
            break
    consumer.close()
    assert sorted(seen) == [b"v%d" % n for n in range(6)]


def test_kafka_python(strom_broker):
    from kafka import KafkaProducer

    topic = fresh("kafka-python")
    strom_broker.create_topic(topic)
    producer = KafkaProducer(bootstrap_servers=strom_broker.bootstrap_servers)
    for n in range(3):
        producer.send(topic, key=b"k", value=b"kp%d" % n, headers=[("h", b"%d" % n)])
    producer.flush(30)
    producer.close()
    records = strom_broker.read_all(topic)
    assert [(r.offset, r.key, r.value) for r in records] == [(n, b"k", b"kp%d" % n) for n in range(3)]
    assert [list(r.headers) for r in records] == [[("h", b"%d" % n)] for n in range(3)]


def test_aiokafka(strom_broker):
    from aiokafka import AIOKafkaProducer

    topic = fresh("aiokafka")
    strom_broker.create_topic(topic, partitions=2)

    async def produce():
        producer = AIOKafkaProducer(bootstrap_servers=strom_broker.bootstrap_servers)
        await producer.start()
        try:
            for n in range(4):
                await producer.send_and_wait(topic, b"a%d" % n, partition=1)
        finally:
            await producer.stop()

    asyncio.run(produce())
    assert [r.value for r in strom_broker.read_all(topic)] == [b"a%d" % n for n in range(4)]


def test_strom_client(strom_broker):
    from strom.client import Producer

    topic = fresh("strom")
    strom_broker.create_topic(topic, configs={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": strom_broker.bootstrap_servers})
    producer.send(topic, b"s0", key=b"k")
    producer.send(topic, b"s1", key=b"k")
    producer.flush(30)
    producer.close()
    assert [r.value for r in strom_broker.read_all(topic)] == [b"s0", b"s1"]


def test_transactions_read_committed(strom_broker):
    from confluent_kafka import Producer

    topic = fresh("txn")
    strom_broker.create_topic(topic)
    producer = Producer({"bootstrap.servers": strom_broker.bootstrap_servers, "transactional.id": fresh("t")})
    producer.init_transactions(30)
    for outcome in ("abort", "commit"):
        producer.begin_transaction()
        producer.produce(topic, value=outcome.encode())
        producer.flush(30)
        if outcome == "abort":
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    assert [r.value for r in strom_broker.read_all(topic)] == [b"commit"]


@pytest.mark.strom_broker(overrides={"auto.create.topics.enable": "false", "num.partitions": "4"})
def test_marker_overrides(strom_broker_function, strom_broker):
    from confluent_kafka.admin import AdminClient, ConfigResource

    def broker_configs(broker):
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        resource = ConfigResource("BROKER", "1")
        entries = admin.describe_configs([resource])[resource].result(30)
        return {name: entries[name].value for name in ("auto.create.topics.enable", "num.partitions")}

    assert strom_broker_function.bootstrap_servers != strom_broker.bootstrap_servers
    assert broker_configs(strom_broker_function) == {"auto.create.topics.enable": "false", "num.partitions": "4"}
    assert broker_configs(strom_broker) == {"auto.create.topics.enable": "true", "num.partitions": "3"}  # the ini's


def test_factory_starts_more(strom_broker_factory):
    first = strom_broker_factory()
    second = strom_broker_factory(overrides={"num.partitions": "2"})
    assert first.bootstrap_servers != second.bootstrap_servers
    second.create_topic("same-name")
    first.create_topic("same-name")  # each broker has a data dir of its own


def test_bad_override_is_one_line(strom_broker_factory):
    from strom.testing import BrokerStartError

    with pytest.raises(BrokerStartError) as raised:
        strom_broker_factory(overrides={"num.partitions": "many"})
    assert "num.partitions" in str(raised.value) and "\\n" not in str(raised.value)
'''

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    """The README's example test (the block after ``<!-- readme-test: strom-testing -->``)."""
    after = README.read_text().split("<!-- readme-test: strom-testing -->", 1)[1]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


EXPECTED_PASSED = PROJECT.count("\ndef test_") + readme_example().count("\ndef test_")


# A subprocess broker: a client's round trip, overrides through ``strom serve``'s command
# line and a refused start; the rest of the project is the same in both modes, and each
# subprocess start costs a new interpreter on CI's busy cores.
PROCESS_MODE_TESTS = ("test_kafka_python", "test_marker_overrides", "test_bad_override_is_one_line")


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_project_with_no_conftest_gets_the_fixtures(pytester: pytest.Pytester, mode: str) -> None:
    pytester.makepyfile(test_app=PROJECT, test_readme=readme_example())
    pytester.makeini("[pytest]\nstrom_overrides =\n    num.partitions=3\n")
    selection = [] if mode == "thread" else ["-k", " or ".join(PROCESS_MODE_TESTS)]
    result = pytester.runpytest_subprocess(f"--strom-mode={mode}", "-p", "no:cacheprovider", "-q", *selection,
                                           timeout=600)
    result.assert_outcomes(passed=EXPECTED_PASSED if mode == "thread" else len(PROCESS_MODE_TESTS))


def test_an_unknown_mode_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_app="def test_uses(strom_broker):\n    pass\n")
    pytester.makeini("[pytest]\nstrom_mode = docker\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*strom_mode: 'docker' is not one of thread, process*"])


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_stop_leaves_no_thread_and_no_port(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    broker = EmbeddedBroker.start(tmp_path / "data")
    broker.create_topic("t")
    assert broker.read_all("t") == []
    broker.stop()
    broker.stop()  # a second stop is harmless
    assert set(threading.enumerate()) == before
    assert _refused(broker.port)


def test_a_bad_override_fails_the_start_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(BrokerStartError, match=r"num\.partitions") as raised:
        EmbeddedBroker.start(tmp_path / "data", overrides={"num.partitions": "many"})
    assert "\n" not in str(raised.value)


def test_strom_testing_does_not_import_pytest() -> None:
    """Strom does not depend on pytest: only pytest, loading the plugin, imports it."""
    probe = "import sys, strom.testing; print('pytest' in sys.modules)"
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert answer.stdout.strip() == "False"
