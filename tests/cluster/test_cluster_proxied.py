"""A cluster whose every broker-to-broker and broker-to-ZooKeeper link crosses a TCP proxy
the test controls (``StromCluster(proxied=True)``): it works as an unproxied one for clients
on the CLIENT listener, its control traffic really crosses the proxies, and cutting one
broker from ZooKeeper expires its session until the link heals."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from tests.support.cluster import StromCluster
from tests.support.netproxy import DOWNSTREAM, UPSTREAM, TcpProxy
from tests.support.zookeeper import zookeeper as zookeeper

pytestmark = pytest.mark.zookeeper

BROKERS = (1, 2, 3)


def _forwarded(proxies: list[TcpProxy], direction: str) -> int:
    return sum(proxy.stats().forwarded[direction] for proxy in proxies)


def _brokers_seen(cluster: StromCluster, via: int) -> list[int]:
    return sorted(b.node_id for b in cluster.metadata(via=via).brokers)


def _registered(cluster: StromCluster) -> dict[int, int]:
    """Broker id -> broker epoch (its registration's czxid), as ZooKeeper holds them."""
    cluster.zk.sync()
    return {broker_id: info.epoch for broker_id, info in cluster.zk.get_all_brokers().items()}


def _produce_and_consume(cluster: StromCluster, topic: str, count: int) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    bootstrap = cluster.brokers[1].bootstrap  # CLIENT: the only listener clients know
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client fails its futures
    admin.create_topics([NewTopic(topic, 3, 1)], operation_timeout=60)[topic].result(60)
    cluster.wait_until(lambda: all(leader > 0 for leader in cluster.leaders(topic).values()), what=f"{topic}'s leaders")
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, value=f"{topic}-{i}".encode())
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 90
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        value = None if message is None or message.error() else message.value()
        if value is not None:
            seen.add(value)
    consumer.close()
    assert seen == {f"{topic}-{i}".encode() for i in range(count)}


def test_a_proxied_cluster_serves_clients_and_a_broker_cut_from_zookeeper_leaves_and_comes_back(
        tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> None:
    connect = f"{zookeeper.connect_string}/proxied-{uuid.uuid4().hex[:8]}"
    with StromCluster(tmp_path, connect, proxied=True) as cluster:
        # Every advertised endpoint is registered: CLIENT, then FROM_P at the proxy link(P, B).
        for broker_id in BROKERS:
            info = cluster.zk.get_broker(broker_id)
            assert info is not None
            endpoints = {e.listener_name: (e.host, e.port, e.security_protocol) for e in info.endpoints}
            assert endpoints == {
                "CLIENT": ("127.0.0.1", int(cluster.brokers[broker_id].bootstrap.rsplit(":", 1)[1]), "PLAINTEXT"),
                **{f"FROM_{p}": ("127.0.0.1", cluster.link(p, broker_id).port, "PLAINTEXT") for p in BROKERS}}
        # Clients see CLIENT endpoints only, from any broker.
        clients = sorted((b, int(cluster.brokers[b].bootstrap.rsplit(":", 1)[1])) for b in BROKERS)
        for via in BROKERS:
            assert sorted((b.node_id, b.port) for b in cluster.metadata(via=via).brokers) == clients
        _produce_and_consume(cluster, "through-proxies", 300)
        # The controller's requests (UpdateMetadata, LeaderAndIsr) crossed link(controller, B), for
        # every broker B, itself included, and each broker's ZooKeeper session crosses its zk link.
        controller = cluster.controller_id()
        for broker_id in BROKERS:
            assert cluster.link(controller, broker_id).stats().forwarded[UPSTREAM] > 0
            assert _forwarded(cluster.zk_links(broker_id), UPSTREAM) > 0

        epochs = _registered(cluster)
        assert sorted(epochs) == list(BROKERS)
        cluster.cut_zookeeper(2)
        at_cut = _forwarded(cluster.zk_links(2), UPSTREAM)
        # The session expires (6 s): broker 2's registration goes, and the controller (a new one
        # if it was broker 2) tells the others.
        cluster.wait_until(lambda: 2 not in _registered(cluster), what="broker 2's session to expire")
        live = [b for b in BROKERS if b != 2]
        for via in live:
            cluster.wait_until(lambda via=via: _brokers_seen(cluster, via) == live,  # type: ignore[misc]
                               what=f"broker {via}'s metadata without broker 2")
        stats = [proxy.stats() for proxy in cluster.zk_links(2)]
        assert sum(s.withheld[UPSTREAM] for s in stats) > 0  # broker 2 kept trying: pings and reconnects held
        assert _forwarded(cluster.zk_links(2), UPSTREAM) == at_cut  # and nothing of it reached ZooKeeper

        cluster.heal_zookeeper(2)
        # A new session, a new registration (a new broker epoch), and the controller says so to everyone.
        cluster.wait_until(lambda: _registered(cluster).get(2, -1) > epochs[2], what="broker 2 to register again")
        for via in BROKERS:
            cluster.wait_until(lambda via=via: _brokers_seen(cluster, via) == list(BROKERS),  # type: ignore[misc]
                               what=f"broker {via}'s metadata with broker 2 back")
        assert _forwarded(cluster.zk_links(2), UPSTREAM) > at_cut
        assert _forwarded(cluster.zk_links(2), DOWNSTREAM) > 0
        _produce_and_consume(cluster, "after-healing", 100)


def _knows(cluster: StromCluster, via: int, topic: str) -> bool:
    return any(t.name == topic and t.error_code == 0 for t in cluster.metadata(via=via).topics)


def _create(cluster: StromCluster, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": cluster.brokers[cluster.controller_id()].bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=60)[topic].result(60)


def test_a_cut_between_two_brokers_holds_or_refuses_the_controllers_requests_until_healed(
        tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> None:
    connect = f"{zookeeper.connect_string}/proxied-{uuid.uuid4().hex[:8]}"
    with StromCluster(tmp_path, connect, proxied=True) as cluster:
        controller = cluster.controller_id()
        target = next(b for b in BROKERS if b != controller)
        link = cluster.link(controller, target)

        # A black hole: the controller's UpdateMetadata is held on the link, so the target never
        # hears of the new topic (while the others do), and gets it, in order, once healed.
        cluster.cut(controller, target)
        held = link.stats().withheld[UPSTREAM]
        _create(cluster, "held")
        cluster.wait_until(lambda: link.stats().withheld[UPSTREAM] > held, what="the controller's request to be held")
        others = [b for b in BROKERS if b != target]
        for via in others:
            cluster.wait_until(lambda via=via: _knows(cluster, via, "held"),  # type: ignore[misc]
                               what=f"broker {via} to learn of the topic")
        assert not _knows(cluster, target, "held")  # what was sent to it is still in the proxy
        cluster.heal(controller, target)
        cluster.wait_until(lambda: _knows(cluster, target, "held"), what="the held request to arrive")

        # A drop: the controller's connection is reset and its reconnections refused until healed.
        cluster.cut(controller, target, mode="drop")
        assert link.stats().reset >= 1  # the open controller connection
        _create(cluster, "refused")
        cluster.wait_until(lambda: link.stats().refused > 0, what="the controller to reconnect and be refused")
        for via in others:
            cluster.wait_until(lambda via=via: _knows(cluster, via, "refused"),  # type: ignore[misc]
                               what=f"broker {via} to learn of the topic")
        assert not _knows(cluster, target, "refused")
        cluster.heal(controller, target)
        cluster.wait_until(lambda: _knows(cluster, target, "refused"), what="the controller to get through again")
        assert link.mode(UPSTREAM) == "pass" and link.mode(DOWNSTREAM) == "pass"

        # A restarted broker binds the same ports behind the same proxies: the controller reaches it again.
        accepted = link.stats().accepted
        cluster.restart(target)
        cluster.wait_until(lambda: link.stats().accepted > accepted, what="the controller to reconnect to the restarted broker")
        cluster.wait_until(lambda: _brokers_seen(cluster, target) == list(BROKERS) and _knows(cluster, target, "held"),
                           what="the restarted broker's metadata")
