"""Issue 18 test 8: a full disk (ENOSPC) under a leader, on a real file system that fills.

The leader's data dir is a small tmpfs (the test container runs as root and may mount one;
RLIMIT_FSIZE would give EFBIG, not ENOSPC). The append that meets the full disk answers
KAFKA_STORAGE_ERROR; the broker's only log dir has then failed, so it halts as Kafka's
``LogManager.handleLogDirFailure`` does when no log dir is left, and the controller moves
leadership to the in-sync follower once the halted broker's ZooKeeper session ends.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from tests.support.cluster import StromCluster
from tests.support.replication import (
    TIMEOUT,
    await_state,
    create_partition,
    read_partition,
    zk_chroot,
)
from tests.support.zookeeper import zookeeper as zookeeper

pytestmark = pytest.mark.zookeeper
class _Tmpfs:
    """A small tmpfs mounted on ``directory`` (root in the test container may mount one):
    a real file system that fills up and answers ENOSPC."""

    def __init__(self, directory: Path, size: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                       check=True, capture_output=True)
        self.directory = directory

    def free_bytes(self) -> int:
        stats = os.statvfs(self.directory)
        return stats.f_bavail * stats.f_frsize

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.directory)], check=True, capture_output=True)


def test_a_leader_whose_disk_fills_gives_up_leadership_and_loses_nothing_acknowledged(
        tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> None:
    """The leader's data dir is a 2 MiB tmpfs; a producer writes 1 KiB records until the
    disk is full. The append that hits ENOSPC is answered KAFKA_STORAGE_ERROR; the leader's
    only log dir has failed, so (as Kafka's LogManager does then) it halts and the controller
    moves leadership to the in-sync follower; every record ever acknowledged is there."""
    from confluent_kafka import KafkaError, Producer

    disk = _Tmpfs(tmp_path / "broker-1", "2m")
    try:
        with StromCluster(tmp_path, zk_chroot(zookeeper), brokers=2) as cluster:
            create_partition(cluster, "full", [1, 2], **{"min.insync.replicas": "2"})
            acked: list[bytes] = []
            errors: list[int] = []

            def delivered(error: KafkaError | None, message: Any) -> None:
                if error is None:
                    acked.append(bytes(message.value()))
                else:
                    errors.append(error.code())

            producer = Producer({"bootstrap.servers": cluster.brokers[1].bootstrap, "acks": "all",
                                 "linger.ms": 5, "retries": 0, "enable.idempotence": False,
                                 "message.timeout.ms": 60000})
            sent = 0
            while not errors and sent < 20_000:  # 20 MB: ten times the disk
                producer.produce("full", value=b"%06d" % sent + b"." * 1018, partition=0,
                                 on_delivery=delivered)
                sent += 1
                if sent % 100 == 0:
                    producer.flush(TIMEOUT)
            producer.flush(TIMEOUT)
            assert errors and errors[0] == KafkaError.KAFKA_STORAGE_ERROR, errors[:5]
            assert disk.free_bytes() < 64 * 1024  # the disk really is full
            assert len(acked) > 1000  # and held what was acknowledged before it filled
            leader = cluster.brokers[1].process
            assert leader is not None and leader.wait(TIMEOUT) == 1  # halted, no clean shutdown
            await_state(cluster, "full", lambda s: s.leader == 2, "leadership to move to broker 2")
            values = {value for _, value in read_partition(cluster, "full")}
            lost = [value[:6] for value in acked if value not in values]
            assert lost == [], f"acknowledged and lost: {lost[:10]}"
    finally:
        disk.close()
