"""KafkaZkClient against a real ZooKeeper (Debian's 3.8): registration, election, fencing,
conditional partition-state updates, producer id blocks, topic admin, and a 3-node ensemble
losing its leader."""

from __future__ import annotations

import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError
from kazoo.protocol.states import ZnodeStat

from strom.cluster import zk_data, zk_multi_read
from strom.cluster.zk_client import (
    BrokerRegistrationError,
    ControllerMovedError,
    InvalidPartitionsError,
    KafkaZkClient,
    TopicExistsError,
    UnknownTopicError,
    ZooKeeperError,
)
from strom.cluster.zk_data import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
)
from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from tests.support.zookeeper import zk_connect as zk_connect
from tests.support.zookeeper import zookeeper as zookeeper
from tests.support.zookeeper import zookeeper_ensemble as zookeeper_ensemble

pytestmark = pytest.mark.zookeeper

ClientFactory = Callable[..., KafkaZkClient]


@pytest.fixture
def make_client(zk_connect: str) -> Iterator[ClientFactory]:
    """Connected clients on the test's chroot (session 2 s unless told), closed at the end."""
    clients: list[KafkaZkClient] = []

    def make(session_timeout_ms: int = 2000) -> KafkaZkClient:
        client = KafkaZkClient(zk_connect, session_timeout_ms=session_timeout_ms, connection_timeout_ms=30_000)
        client.connect()
        client.create_top_level_paths()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def broker(broker_id: int, port: int = 9092) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint("127.0.0.1", port),))


def state(leader: int, leader_epoch: int, isr: tuple[int, ...], controller_epoch: int) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, leader_epoch, isr), controller_epoch)


# ---------------------------------------------------------------------------- start-up

def test_chroot_and_persistent_paths_are_created(make_client: ClientFactory, zookeeper: ZooKeeperEnsemble,
                                                 zk_connect: str) -> None:
    make_client()
    bare = KazooClient(zookeeper.connect_string)
    bare.start(timeout=30)
    try:
        chroot = zk_connect[zk_connect.index("/"):]
        for path in zk_data.PERSISTENT_PATHS:
            assert bare.exists(chroot + path) is not None, path
    finally:
        bare.stop()
        bare.close()


def test_cluster_id_is_created_once_and_read_back(make_client: ClientFactory) -> None:
    first, second = make_client(), make_client()
    assert first.get_or_create_cluster_id("aaaaaaaaaaaaaaaaaaaaaA") == "aaaaaaaaaaaaaaaaaaaaaA"
    assert second.get_or_create_cluster_id("bbbbbbbbbbbbbbbbbbbbbB") == "aaaaaaaaaaaaaaaaaaaaaA"
    assert second.kazoo.get(zk_data.CLUSTER_ID)[0] == b'{"version":"1","id":"aaaaaaaaaaaaaaaaaaaaaA"}'


# ---------------------------------------------------------------------------- registration

def test_registration_by_the_same_session_is_idempotent(make_client: ClientFactory) -> None:
    client = make_client()
    epoch = client.register_broker(broker(1), timestamp_ms=1)
    assert client.register_broker(broker(1), timestamp_ms=1) == epoch
    assert client.get_all_brokers() == {1: BrokerInfo(1, broker(1).endpoints, None, epoch)}
    assert client.kazoo.exists(zk_data.broker_id_path(1)).ephemeralOwner == client.session_id


def test_a_second_live_broker_with_the_same_id_fails_clearly_then_registers_once_the_first_is_gone(
        make_client: ClientFactory) -> None:
    first, second = make_client(), make_client()
    first_epoch = first.register_broker(broker(1))
    with pytest.raises(BrokerRegistrationError, match=r"broker id 1 is already registered .* broker.id=1"):
        second.register_broker(broker(1, port=9093))
    assert second.get_broker(1) == BrokerInfo(1, broker(1).endpoints, None, first_epoch)
    first.close()
    second_epoch = second.register_broker(broker(1, port=9093))
    assert second_epoch > first_epoch
    assert second.get_broker(1) == BrokerInfo(1, broker(1, port=9093).endpoints, None, second_epoch)


_CRASHING_BROKER = """
import sys, time
from strom.cluster.zk_client import KafkaZkClient
from strom.cluster.zk_data import BrokerInfo, EndPoint
client = KafkaZkClient(sys.argv[1], session_timeout_ms=2000)
client.connect()
client.create_top_level_paths()
print(client.register_broker(BrokerInfo(7, (EndPoint("127.0.0.1", 9092),))), flush=True)
time.sleep(600)
"""


def test_a_restarted_broker_waits_out_the_node_its_crashed_session_left(
        make_client: ClientFactory, zk_connect: str) -> None:
    crashed = subprocess.Popen([sys.executable, "-c", _CRASHING_BROKER, zk_connect], stdout=subprocess.PIPE, text=True)
    try:
        assert crashed.stdout is not None
        old_epoch = int(crashed.stdout.readline())
    finally:
        crashed.kill()  # SIGKILL: the session is never closed, its ephemeral lingers until it expires
        crashed.wait()
    restarted = make_client()
    assert restarted.get_broker(7) is not None  # still the crashed run's node
    new_epoch = restarted.register_broker(BrokerInfo(7, (EndPoint("127.0.0.1", 9092),)))
    assert new_epoch > old_epoch
    assert restarted.kazoo.exists(zk_data.broker_id_path(7)).ephemeralOwner == restarted.session_id


def test_watches_hand_on_the_current_state_and_every_change(make_client: ClientFactory) -> None:
    watcher, other = make_client(), make_client()
    children: queue.Queue[list[str]] = queue.Queue()
    data: queue.Queue[tuple[int | None, bool]] = queue.Queue()  # (controller id, a stat came with it)

    def on_children(names: list[str]) -> None:
        children.put(sorted(names))

    def on_controller(value: bytes | None, stat: ZnodeStat | None) -> None:
        data.put((None if value is None else zk_data.decode_controller(value), stat is not None))

    watcher.watch_children(zk_data.BROKER_IDS, on_children)
    watcher.watch_data(zk_data.CONTROLLER, on_controller)
    assert children.get(timeout=30) == [] and data.get(timeout=30) == (None, False)
    other.register_broker(broker(4))
    assert children.get(timeout=30) == ["4"]
    _, epoch_zk_version = other.register_controller_and_increment_epoch(4)
    assert data.get(timeout=30) == (4, True)
    other.delete_controller(epoch_zk_version)
    assert data.get(timeout=30) == (None, False)


# ---------------------------------------------------------------------------- controller

def test_two_brokers_race_for_controller_exactly_one_wins_and_the_epoch_goes_up(make_client: ClientFactory) -> None:
    clients = {1: make_client(), 2: make_client()}
    for round_number in (1, 2):
        barrier = threading.Barrier(2)

        def elect(broker_id: int, barrier: threading.Barrier = barrier) -> tuple[int, int] | Exception:
            barrier.wait()
            try:
                return clients[broker_id].register_controller_and_increment_epoch(broker_id)
            except ControllerMovedError as error:
                return error

        with ThreadPoolExecutor(2) as pool:
            outcomes = dict(zip(clients, pool.map(elect, clients), strict=True))
        winners = [b for b, outcome in outcomes.items() if isinstance(outcome, tuple)]
        assert len(winners) == 1, outcomes
        winner = winners[0]
        assert clients[1].get_controller_id() == winner
        assert outcomes[winner] == clients[1].get_controller_epoch()
        assert outcomes[winner][0] == round_number
        clients[winner].delete_controller(outcomes[winner][1])
        assert clients[1].get_controller_id() is None


def test_a_zombie_controller_cannot_write_anything(make_client: ClientFactory) -> None:
    zombie, successor = make_client(), make_client()
    epoch, epoch_zk_version = zombie.register_controller_and_increment_epoch(1)
    zombie.create_topic("t", TopicAssignment(zk_data.new_kafka_uuid(), {0: (1,), 1: (2,)}), {})
    assert zombie.create_partition_states("t", {0: state(1, 0, (1,), epoch)}, epoch_zk_version) == {}
    zombie.mark_topic_for_deletion("t")
    # The zombie's /controller vanishes (its session paused past the timeout, say): B is elected.
    successor.kazoo.delete(zk_data.CONTROLLER)
    new_epoch, _ = successor.register_controller_and_increment_epoch(2)
    assert new_epoch == epoch + 1
    before = snapshot(successor)

    stale_writes: list[Callable[[], object]] = [
        lambda: zombie.update_leader_and_isr({("t", 0): LeaderAndIsr(NO_ONE, 1, ())}, epoch, epoch_zk_version),
        lambda: zombie.create_partition_states("t", {1: state(2, 0, (2,), epoch)}, epoch_zk_version),
        lambda: zombie.set_topic_assignment("t", TopicAssignment(zk_data.ZERO_TOPIC_ID, {0: (3,)}), epoch_zk_version),
        lambda: zombie.delete_topic_znodes("t", epoch_zk_version),
        lambda: zombie.delete_topic_deletion_flags(["t"], epoch_zk_version),
        lambda: zombie.delete_controller(epoch_zk_version),
    ]
    for write in stale_writes:
        with pytest.raises(ControllerMovedError):
            write()
    assert snapshot(successor) == before
    assert successor.get_controller_id() == 2


NO_ONE = zk_data.NO_LEADER


def test_a_stale_controller_node_is_deleted_only_by_the_broker_it_names(make_client: ClientFactory) -> None:
    """A broker named by /controller that is not acting as controller (it resigned while
    ZooKeeper was away) deletes the node so that an election can happen."""
    old, other = make_client(), make_client()
    epoch, _ = old.register_controller_and_increment_epoch(1)
    assert not other.delete_stale_controller(2)
    assert other.get_controller_id() == 1
    assert other.delete_stale_controller(1)
    assert other.get_controller_id() is None
    assert not other.delete_stale_controller(1)  # gone already
    assert other.register_controller_and_increment_epoch(2)[0] == epoch + 1


def snapshot(client: KafkaZkClient, root: str = "/") -> dict[str, tuple[bytes, int]]:
    """Every znode under ``root`` with its data and version."""
    nodes = {}
    for child in client.kazoo.get_children(root):
        path = f"{root.rstrip('/')}/{child}"
        data, stat = client.kazoo.get(path)
        nodes[path] = (data, stat.version)
        nodes.update(snapshot(client, path))
    return nodes


def test_a_stale_partition_epoch_fails_only_its_own_partition(make_client: ClientFactory) -> None:
    controller = make_client()
    epoch, epoch_zk_version = controller.register_controller_and_increment_epoch(1)
    controller.create_topic("t", TopicAssignment(zk_data.new_kafka_uuid(), {0: (1, 2), 1: (2, 1)}), {})
    created = controller.create_partition_states(
        "t", {0: state(1, 0, (1, 2), epoch), 1: state(2, 0, (2, 1), epoch)}, epoch_zk_version)
    assert created == {}
    updated, failed = controller.update_leader_and_isr(
        {("t", 0): LeaderAndIsr(2, 1, (2,), partition_epoch=0), ("t", 1): LeaderAndIsr(1, 1, (1,), partition_epoch=3)},
        epoch, epoch_zk_version)
    assert updated == {("t", 0): LeaderAndIsr(2, 1, (2,), partition_epoch=1)}
    assert set(failed) == {("t", 1)} and isinstance(failed[("t", 1)], BadVersionError)
    assert controller.get_partition_states([("t", 0), ("t", 1), ("t", 2)]) == {
        ("t", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 1, (2,), 1), epoch),
        ("t", 1): LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (2, 1), 0), epoch),
    }
    # Creating a state that exists (with other contents) fails for that partition only.
    assert set(controller.create_partition_states("t", {1: state(1, 5, (1,), epoch)}, epoch_zk_version)) == {1}


# ---------------------------------------------------------------------------- producer ids

def test_producer_id_blocks_claimed_concurrently_never_overlap(make_client: ClientFactory) -> None:
    clients = [make_client() for _ in range(4)]

    def claim(broker_id: int) -> list[tuple[int, int]]:
        return [clients[broker_id].claim_producer_id_block(broker_id) for _ in range(25)]

    with ThreadPoolExecutor(len(clients)) as pool:
        blocks = sorted(block for claimed in pool.map(claim, range(len(clients))) for block in claimed)
    assert blocks == [(start, start + 999) for start in range(0, 100_000, 1000)]
    data = clients[0].kazoo.get(zk_data.PRODUCER_ID_BLOCK)[0]
    assert zk_data.decode_producer_id_block(data).block_end == 99_999  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- topics

def test_topic_creation_configs_and_deletion(make_client: ClientFactory) -> None:
    admin, controller = make_client(), make_client()
    topic_id = zk_data.new_kafka_uuid()
    admin.create_topic("orders", TopicAssignment(topic_id, {0: (1,), 1: (2,)}), {"cleanup.policy": "compact"})
    with pytest.raises(TopicExistsError):
        admin.create_topic("orders", TopicAssignment(zk_data.new_kafka_uuid(), {0: (2,)}), {})
    assert controller.get_all_topics() == {"orders"}
    assert controller.get_topic_assignments(["orders", "missing"]) == {
        "orders": TopicAssignment(topic_id, {0: (1,), 1: (2,)})}
    assert controller.get_topic_config("orders") == {"cleanup.policy": "compact"}
    assert controller.get_config_changes() == []  # creation announces nothing; the controller watches topics

    admin.set_topic_config("orders", {"retention.ms": "1000"})
    admin.set_topic_config("orders", {"retention.ms": "2000"})
    changes = controller.get_config_changes()
    assert [entity for _, entity in changes] == ["topics/orders", "topics/orders"]
    assert controller.get_config_changes(after=changes[0][0]) == changes[1:]
    assert controller.get_topic_config("orders") == {"retention.ms": "2000"}
    with pytest.raises(UnknownTopicError):
        admin.set_topic_config("missing", {})

    assert controller.purge_config_changes(older_than_ms=3_600_000) == 0  # younger than an hour
    newest = max(controller.kazoo.exists(f"{zk_data.CONFIG_CHANGES}/{child}").ctime
                 for child in controller.kazoo.get_children(zk_data.CONFIG_CHANGES))
    while time.time() * 1000 <= newest:
        time.sleep(0.001)
    assert controller.purge_config_changes(older_than_ms=0) == 2
    assert controller.get_config_changes() == []

    admin.add_partitions("orders", TopicAssignment(topic_id, {0: (1,), 1: (2,), 2: (1,)}))
    assert controller.get_topic_assignments(["orders"])["orders"].partitions == {0: (1,), 1: (2,), 2: (1,)}
    with pytest.raises(InvalidPartitionsError):
        admin.add_partitions("orders", TopicAssignment(topic_id, {0: (1,), 1: (2,)}))
    assignment, version = admin.get_topic_assignment_with_version("orders")
    assert assignment is not None
    assert not admin.set_topic_assignment_if_version("orders", assignment, version + 1)
    assert admin.set_topic_assignment_if_version("orders", assignment, version)

    admin.mark_topic_for_deletion("orders")
    admin.mark_topic_for_deletion("orders")
    assert controller.get_topic_deletions() == {"orders"}
    with pytest.raises(TopicExistsError, match="marked for deletion"):
        admin.create_topic("orders", TopicAssignment(topic_id, {0: (1,)}), {})
    _, epoch_zk_version = controller.register_controller_and_increment_epoch(1)
    controller.create_partition_states("orders", {0: state(1, 0, (1,), 1), 1: state(2, 0, (2,), 1)}, epoch_zk_version)
    # Beyond Kafka's usual layout (partitions/<p>/state): deletion still removes it all.
    controller.kazoo.create(zk_data.partition_path("orders", 1) + "/unexpected/deeper", b"", makepath=True)
    controller.delete_topic_znodes("orders", epoch_zk_version)
    assert controller.kazoo.exists(zk_data.topic_path("orders")) is None
    controller.delete_topic_deletion_flags(["orders"], epoch_zk_version)
    assert controller.get_all_topics() == set() and controller.get_topic_deletions() == set()
    assert controller.get_topic_config("orders") == {}


# ---------------------------------------------------------------------------- ensemble

def test_a_session_and_its_ephemeral_survive_the_loss_of_the_zookeeper_leader(
        zookeeper_ensemble: Callable[[int], ZooKeeperEnsemble]) -> None:
    ensemble = zookeeper_ensemble(3)
    client = KafkaZkClient(ensemble.connect_string + "/strom", session_timeout_ms=6000, connection_timeout_ms=30_000)
    states: list[str] = []
    client.add_state_listener(states.append)
    client.connect()
    try:
        client.create_top_level_paths()
        epoch = client.register_broker(broker(1))
        session = client.session_id
        leader = ensemble.leader()
        assert leader is not None
        ensemble.kill(leader)
        ensemble.wait_ready()
        assert ensemble.leader() not in (None, leader)
        assert client.get_broker(1) == BrokerInfo(1, broker(1).endpoints, None, epoch)
        assert client.session_id == session
        assert "LOST" not in states
        ensemble.restart(leader)
        assert sorted(ensemble.mode(i) or "" for i in ensemble.nodes) == ["follower", "follower", "leader"]
    finally:
        client.close()


def test_calls_fail_within_the_retry_timeout_while_zookeeper_is_down_and_the_session_outlives_a_short_outage(
        zookeeper_ensemble: Callable[[int], ZooKeeperEnsemble]) -> None:
    server = zookeeper_ensemble(1)
    client = KafkaZkClient(server.connect_string, session_timeout_ms=20_000, connection_timeout_ms=30_000,
                           retry_timeout_ms=1000)
    disconnected = threading.Event()
    client.add_state_listener(lambda state: disconnected.set() if state == "SUSPENDED" else None)
    client.connect()
    try:
        client.create_top_level_paths()
        epoch = client.register_broker(broker(1))
        session = client.session_id
        server.stop_node(1)
        assert disconnected.wait(30)
        with pytest.raises(ZooKeeperError, match="unavailable for 1 s"):
            client.get_broker(1)
        # A fenced write whose request kazoo queued while reconnecting (the connection lost
        # just after the connected check, here forced) is waited on for a bounded time, not
        # for ever: a controller thread stuck there kept a stopping broker from exiting.
        client.answer_timeout_s = 1.0
        client._connected.set()
        outcome: list[BaseException | None] = []

        def write() -> None:
            try:
                client.delete_controller(0)
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)
        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(30)
        assert not writer.is_alive(), "a fenced write waited on ZooKeeper for ever"
        assert isinstance(outcome[0], ZooKeeperError) and "outcome unknown" in str(outcome[0])
        client._connected.clear()
        server.restart(1)
        client.retry_timeout_s = 60.0  # reconnecting takes a moment (kazoo backs off up to 1 s)
        assert client.get_broker(1) == BrokerInfo(1, broker(1).endpoints, None, epoch)
        assert client.session_id == session
    finally:
        client.close()
    with pytest.raises(ZooKeeperError, match="closed"):
        client.get_broker(1)


def test_standalone_server_status_pause_and_restart(zookeeper_ensemble: Callable[[int], ZooKeeperEnsemble]) -> None:
    ensemble = zookeeper_ensemble(1)
    assert ensemble.mode(1) == "standalone" and ensemble.leader() == 1
    ensemble.pause(1)
    assert ensemble.mode(1, timeout=2) is None  # SIGSTOPped: connections are accepted, nothing answers
    ensemble.resume(1)
    ensemble.wait_ready()
    ensemble.restart(1)
    assert ensemble.mode(1) == "standalone"


def test_a_port_taken_before_the_server_binds_it_is_replaced(tmp_path: Path) -> None:
    ensemble = ZooKeeperEnsemble(tmp_path, size=1)
    taken = ensemble.nodes[1].client_port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            ensemble.start()
            assert ensemble.nodes[1].client_port != taken
            assert ensemble.mode(1) == "standalone"
        finally:
            ensemble.stop()


def test_multi_read_answers_each_path_across_requests(make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    client = make_client()
    monkeypatch.setattr(zk_multi_read, "MULTI_READ_PATHS", 3)  # 7 paths: three requests
    for index in (0, 2, 3, 6):
        client.kazoo.create(f"/many/{index}", str(index).encode(), makepath=True)
    found = zk_multi_read.read_many(client.kazoo, {index: f"/many/{index}" for index in range(7)})
    assert {index: data for index, (data, _) in found.items()} == {0: b"0", 2: b"2", 3: b"3", 6: b"6"}
    assert all(stat.version == 0 for _, stat in found.values())
