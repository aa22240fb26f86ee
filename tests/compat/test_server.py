"""The server's life: clean shutdown on SIGTERM and SIGINT, idle connections closed."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import confluent_kafka
import pytest

from tests.compat.broker_process import BrokerProcess


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
