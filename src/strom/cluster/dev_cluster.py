"""``strom dev-cluster``: ZooKeeper and N brokers on this machine, for trying cluster mode.

Starts Debian's ZooKeeper (standalone or a 3-node ensemble, ``zookeeper_server``), then
``--brokers`` ``strom serve`` processes with consecutive node ids and listener ports,
waits until every broker is registered in ZooKeeper and a controller is elected (so
``__consumer_offsets`` can be created: enough brokers are there), prints the bootstrap
string, and runs until Ctrl-C or SIGTERM. Then it stops the brokers first (SIGTERM: each
asks the controller to move its leadership away) and ZooKeeper last, so no broker sees its
session vanish under it. Everything binds to 127.0.0.1 and lives under ``--data-dir``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from strom.cluster.zookeeper_server import ZooKeeperEnsemble, ZooKeeperError

READY = "ready on "
CHROOT = "/strom"


class DevClusterError(RuntimeError):
    """The cluster did not come up; the message says why in one line."""


def run(brokers: int, zookeepers: int, data_dir: Path, base_port: int, timeout: float = 120.0) -> int:
    """Run the cluster until interrupted; the exit status."""
    data_dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    zookeeper = ZooKeeperEnsemble(data_dir / "zookeeper", size=zookeepers)
    processes: list[subprocess.Popen[str]] = []
    try:
        try:
            zookeeper.start()
        except ZooKeeperError as exc:
            raise DevClusterError(str(exc)) from None
        connect = zookeeper.connect_string + CHROOT
        for node_id in range(1, brokers + 1):
            processes.append(_start_broker(node_id, base_port + node_id - 1, connect, data_dir, brokers))
        bootstrap = ",".join(_wait_ready(p, data_dir / f"broker-{i}.log", timeout)
                             for i, p in enumerate(processes, 1))
        _wait_registered(connect, brokers, timeout)
        print(f"strom dev-cluster: {brokers} brokers, ZooKeeper {connect} ({zookeepers} node"
              f"{'s' if zookeepers > 1 else ''}); logs in {data_dir}", flush=True)
        print(f"bootstrap.servers={bootstrap}", flush=True)
        while not stop.is_set():
            if any(p.poll() is not None for p in processes):
                dead = [i for i, p in enumerate(processes, 1) if p.poll() is not None]
                print(f"strom dev-cluster: broker(s) {dead} exited; see {data_dir}/broker-N.log", file=sys.stderr)
                return 1
            stop.wait(0.5)
        return 0
    except DevClusterError as exc:
        print(f"strom dev-cluster: {exc}", file=sys.stderr)
        return 1
    finally:
        # Brokers first, one at a time, so each one's controlled shutdown finds a controller
        # that is not itself stopping; ZooKeeper last.
        for process in reversed(processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        zookeeper.stop()


def _start_broker(node_id: int, port: int, connect: str, data_dir: Path, brokers: int) -> subprocess.Popen[str]:
    overrides = {
        "zookeeper.connect": connect,
        # Kafka's 3 where there are 3 brokers or more; a smaller dev cluster could never
        # create the offsets topic (its creation waits for that many live brokers).
        "offsets.topic.replication.factor": str(min(3, brokers)),
        # The same for __transaction_state, and its min.isr (Kafka's 2) no larger than that.
        "transaction.state.log.replication.factor": str(min(3, brokers)),
        "transaction.state.log.min.isr": str(min(2, brokers)),
        "group.initial.rebalance.delay.ms": "0",
    }
    command = [sys.executable, "-m", "strom", "serve", "--node-id", str(node_id),
               "--data-dir", str(data_dir / f"broker-{node_id}"), "--listeners", f"PLAINTEXT://127.0.0.1:{port}"]
    for name, value in overrides.items():
        command += ["--override", f"{name}={value}"]
    log = open(data_dir / f"broker-{node_id}.log", "a")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)


def _wait_ready(process: subprocess.Popen[str], log: Path, timeout: float) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if READY in line:
            return line.rsplit(READY, 1)[1].strip()
        if not line and process.poll() is not None:
            break
    raise DevClusterError(f"a broker did not start; see {log}")


def _wait_registered(connect: str, brokers: int, timeout: float) -> None:
    """Every broker in /brokers/ids and a controller elected."""
    from strom.cluster.zk_client import KafkaZkClient

    client = KafkaZkClient(connect)
    client.connect()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(client.get_all_brokers()) >= brokers and client.get_controller_id() is not None:
                return
            time.sleep(0.2)
    finally:
        client.close()
    raise DevClusterError(f"fewer than {brokers} brokers registered in ZooKeeper within {timeout:.0f} s")
