"""The server's life: clean shutdown on SIGTERM and SIGINT, idle connections closed."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import confluent_kafka
import pytest

from strom.protocol.headers import encode_request
from strom.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from tests.support.broker_process import BrokerProcess


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_shuts_down_cleanly(tmp_path: Path, sig: int) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("kept", value=b"v")
    assert producer.flush(10) == 0
    assert broker.stop(sig) == 0
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    broker.start()
    assert "(clean shutdown)" in broker.log_path.read_text().splitlines()[-2]
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
    assert consumer.get_watermark_offsets(confluent_kafka.TopicPartition("kept", 0), timeout=10) == (0, 1)
    consumer.close()
    broker.stop()


def test_idle_connections_are_closed(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"connections.max.idle.ms": "300"}).start()
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        # The broker hangs up on the silent client; were it not to, recv would time out.
        assert sock.recv(1) == b""
    assert broker.alive()
    broker.stop()


def test_shutdown_does_not_wait_for_clients(tmp_path: Path) -> None:
    """SIGTERM ends the broker while a silent connection and a long-polling Fetch are open.

    The Fetch waits up to 60 s and the idle limit is Kafka's 10 minutes, so a broker that
    waited for either would run past ``stop``'s 20 s bound.
    """
    broker = BrokerProcess(tmp_path / "data").start()
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("waiting", value=b"v")
    assert producer.flush(10) == 0
    host, port = broker.bootstrap.rsplit(":", 1)
    fetch = FetchRequest(
        replica_id=-1, max_wait_ms=60_000, min_bytes=1 << 20, max_bytes=1 << 20,
        topics=(FetchTopic("waiting", partitions=(FetchPartition(partition=0, fetch_offset=1),)),),
    )
    with socket.create_connection((host, int(port)), timeout=30) as silent, \
            socket.create_connection((host, int(port)), timeout=30) as polling:
        polling.sendall(encode_request(fetch, 12, 1, "long-poll"))
        assert broker.stop() == 0
        assert silent.recv(1) == b""
        assert polling.recv(1) == b""


@pytest.mark.parametrize(
    ("properties", "overrides", "message"),
    [
        ("log.retention.msec=1\n", [], "unknown broker property 'log.retention.msec' (did you mean 'log.retention.ms'?)"),
        ("", ["num.partition=3"], "unknown broker property 'num.partition' (did you mean 'num.partitions'?)"),
        ("", ["log.segment.bytes=abc"], "invalid value 'abc' for log.segment.bytes: must be an integer"),
        ("log.cleanup.policy=shred\n", [], "invalid value 'shred' for log.cleanup.policy: cleanup.policy 'shred'"),
    ],
    ids=["unknown-in-file", "unknown-override", "not-a-number", "bad-policy"],
)
def test_a_bad_property_ends_serve_with_one_line(
        tmp_path: Path, properties: str, overrides: list[str], message: str) -> None:
    config = tmp_path / "server.properties"
    config.write_text(properties)
    command = [sys.executable, "-m", "strom", "serve", "--data-dir", str(tmp_path / "data"),
               "--config", str(config), "--listeners", "PLAINTEXT://127.0.0.1:0"]
    for override in overrides:
        command += ["--override", override]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"strom serve: {message}\n")
