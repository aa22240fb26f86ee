"""kcat (Debian's, librdkafka 2.0.2): scenarios 2, 3+4, 5, 6, 7 and 8 of the matrix (see matrix.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable

import confluent_kafka
import pytest

from tests.compat.matrix import (
    BASE_TIME,
    FIVE_MIB,
    SIX_MIB,
    _big_value,
    _create,
    _produce,
    _read_all,
)
from tests.support.broker_process import BrokerProcess


def _kcat(*args: str, data: str | None = None) -> str:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed: ./scripts/test installs it with apt"
    result = subprocess.run([kcat, *args], input=data, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kcat_group_commit_restart_resume(broker: BrokerProcess) -> None:
    _create(broker, "kc-orders", 2)
    _produce(broker, "kc-orders", [f"a{i}" for i in range(30)], 2)
    group = ["-b", broker.bootstrap, "-G", "kc-billing", "-e", "-f", "%s\n", "-X", "auto.offset.reset=earliest",
             "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", "kc-orders"]
    first = _kcat(*group).split()
    assert sorted(first) == sorted(f"a{i}" for i in range(30))
    broker.restart()
    _produce(broker, "kc-orders", [f"b{i}" for i in range(10)], 2)
    second = _kcat(*group).split()
    assert sorted(second) == sorted(f"b{i}" for i in range(10))  # resumed from the commit made on close
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kc-billing"})
    committed = consumer.committed([confluent_kafka.TopicPartition("kc-orders", p) for p in (0, 1)], timeout=10)
    consumer.close()
    assert sum(tp.offset for tp in committed) == 40



class _KcatMember:
    """A ``kcat -G`` process: its records from stdout, its assignment from the rebalance lines on stderr."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str) -> None:
        kcat = shutil.which("kcat")
        assert kcat is not None
        self.process = subprocess.Popen(
            [kcat, "-b", broker.bootstrap, "-G", group, "-u", "-f", "%p %o %s\n", "-X", "auto.offset.reset=earliest",
             "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", topic],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.records: list[tuple[int, int, str]] = []
        self.assigned: set[int] = set()
        threading.Thread(target=self._read_records, daemon=True).start()
        threading.Thread(target=self._read_rebalances, daemon=True).start()

    def _read_records(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            partition, offset, value = line.split()
            self.records.append((int(partition), int(offset), value))

    def _read_rebalances(self) -> None:  # "% Group g rebalanced (memberid …): assigned: t [0], t [1]"
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if "rebalanced" in line:
                partitions = {int(p) for p in re.findall(r"\[(\d+)\]", line)}
                self.assigned = partitions if "assigned:" in line else self.assigned - partitions

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(15)


def test_kcat_two_group_members_rebalance_and_see_every_record_once(broker: BrokerProcess) -> None:
    _create(broker, "kc-events", 4)
    first = [f"e{i}" for i in range(80)]
    second = [f"f{i}" for i in range(80)]
    _produce(broker, "kc-events", first, 4)
    members: list[_KcatMember] = []

    def wait_for(condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline, [(len(m.records), m.assigned) for m in members]
            time.sleep(0.05)

    try:
        members.append(_KcatMember(broker, "kc-workers", "kc-events"))
        wait_for(lambda: len(members[0].records) >= 30)
        members.append(_KcatMember(broker, "kc-workers", "kc-events"))
        wait_for(lambda: len(members[0].assigned) == 2 and len(members[1].assigned) == 2)
        assigned = [set(m.assigned) for m in members]
        _produce(broker, "kc-events", second, 4)
        wait_for(lambda: sum(len(m.records) for m in members) >= len(first) + len(second))
        time.sleep(0.5)  # a record read twice would arrive here
    finally:
        for member in members:
            member.stop()
    seen = [(who, *record) for who, member in enumerate(members) for record in member.records]
    positions = [(p, o) for _, p, o, _ in seen]
    assert len(positions) == len(set(positions)) == len(first) + len(second)
    assert sorted(v for *_, v in seen) == sorted(first + second)
    assert assigned[0].isdisjoint(assigned[1])
    assert {0, 1} == {who for who, _, _, value in seen if value.startswith("f")}

@pytest.mark.parametrize("codec", ["none", "snappy", "lz4", "zstd"])
def test_kcat_produces_every_codec_idempotently(broker: BrokerProcess, codec: str) -> None:
    _create(broker, f"kc-{codec}", 2)
    lines = [f"k{i}:" + f"value {i} " * (i % 20 + 1) for i in range(300)]
    _kcat("-b", broker.bootstrap, "-P", "-t", f"kc-{codec}", "-K", ":", "-z", codec,
          "-X", "enable.idempotence=true", data="\n".join(lines) + "\n")
    records = _read_all(broker, f"kc-{codec}", 2)
    assert len(records) == len(lines)
    assert sorted(f"{key!r}:{value!r}" for _, _, key, value in records) == sorted(
        f"{line.split(':')[0].encode()!r}:{line.split(':')[1].encode()!r}" for line in lines)


def test_kcat_headers_and_null_keys_and_values(broker: BrokerProcess) -> None:
    _create(broker, "kc-edge", 1)
    _kcat("-b", broker.bootstrap, "-P", "-t", "kc-edge", "-K", ":", "-Z", data="tombstone:\n:no key\n")
    _kcat("-b", broker.bootstrap, "-P", "-t", "kc-edge", "-H", "h1=v1", "-H", "h2=", "-H", "h1=again",
          data="headers\n")
    records = _read_all(broker, "kc-edge", 1)
    assert [(key, value) for _, _, key, value in records] == [(b"tombstone", None), (None, b"no key"), (None, b"headers")]
    consumed = _kcat("-b", broker.bootstrap, "-C", "-t", "kc-edge", "-o", "beginning", "-e", "-Z",
                     "-f", "%k|%s|%h\n")
    assert consumed.splitlines() == ["tombstone|NULL|", "NULL|no key|", "NULL|headers|h1=v1,h2=,h1=again"]


def test_kcat_starts_at_a_timestamp(broker: BrokerProcess) -> None:
    _create(broker, "kc-timed", 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("kc-timed", value=b"%d" % i, timestamp=BASE_TIME + i * 1000)
    assert producer.flush(10) == 0
    consumed = _kcat("-b", broker.bootstrap, "-C", "-t", "kc-timed", "-o", f"s@{BASE_TIME + 4500}", "-e",
                     "-f", "%o %s %T\n")
    assert consumed.splitlines() == [f"{i} {i} {BASE_TIME + i * 1000}" for i in range(5, 10)]


def test_kcat_five_mib_message_with_raised_limits(broker: BrokerProcess) -> None:
    _create(broker, "kc-big", 1, {"max.message.bytes": str(SIX_MIB)})
    value = _big_value().hex()[:FIVE_MIB]
    _kcat("-b", broker.bootstrap, "-P", "-t", "kc-big", "-X", f"message.max.bytes={SIX_MIB + 1024}",
          data=value + "\n")
    consumed = _kcat("-b", broker.bootstrap, "-C", "-t", "kc-big", "-o", "beginning", "-e", "-f", "%s",
                     "-X", f"fetch.message.max.bytes={SIX_MIB * 2}", "-X", f"fetch.max.bytes={SIX_MIB * 2}",
                     "-X", f"receive.message.max.bytes={SIX_MIB * 3}")
    assert consumed == value


# --- kafkajs ----------------------------------------------------------------------------
