"""StromCluster(proxied=True)'s wiring, without starting anything: which listener each broker
binds and advertises, which proxy each link crosses, what cut/isolate set on which proxy.
(tests/cluster/test_cluster_proxied.py runs such a cluster.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import StromCluster
from tests.support.netproxy import DOWNSTREAM, UPSTREAM

ENSEMBLE = "127.0.0.1:2181,127.0.0.1:2182,localhost:2183/chroot/x"  # nothing listens: never connected


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[StromCluster]:
    built = StromCluster(tmp_path, ENSEMBLE, brokers=3, proxied=True)
    yield built
    built.stop()  # no broker started: closes the proxies


def test_each_broker_listens_on_client_and_one_listener_per_peer_advertised_at_its_proxy(
        cluster: StromCluster) -> None:
    for b, broker in cluster.brokers.items():
        assert broker.fixed_listeners is not None
        bound = dict(entry.split("://") for entry in broker.fixed_listeners.split(","))
        assert list(bound) == ["CLIENT", "FROM_1", "FROM_2", "FROM_3"]
        advertised = dict(entry.split("://") for entry in broker.overrides["advertised.listeners"].split(","))
        assert advertised["CLIENT"] == bound["CLIENT"]  # clients are never proxied
        for p in (1, 2, 3):
            link = cluster.link(p, b)
            assert advertised[f"FROM_{p}"] == f"127.0.0.1:{link.port}"
            assert bound[f"FROM_{p}"] == f"127.0.0.1:{link.target_port}"
        assert broker.overrides["inter.broker.listener.name"] == f"FROM_{b}"
        assert broker.overrides["listener.security.protocol.map"] == (
            "CLIENT:PLAINTEXT,FROM_1:PLAINTEXT,FROM_2:PLAINTEXT,FROM_3:PLAINTEXT")
        zk = cluster.zk_links(b)
        assert [(proxy.target_host, proxy.target_port) for proxy in zk] == [
            ("127.0.0.1", 2181), ("127.0.0.1", 2182), ("localhost", 2183)]
        assert broker.overrides["zookeeper.connect"] == ",".join(f"127.0.0.1:{p.port}" for p in zk) + "/chroot/x"
    proxies = [cluster.link(p, b).port for p in (1, 2, 3) for b in (1, 2, 3)]
    proxies += [proxy.port for b in (1, 2, 3) for proxy in cluster.zk_links(b)]
    listening = [int(entry.rsplit(":", 1)[1]) for broker in cluster.brokers.values()
                 for entry in (broker.fixed_listeners or "").split(",")]
    assert len(set(proxies)) == 9 + 9 and len(set(listening)) == 3 * 4
    assert not set(proxies) & set(listening)  # a proxy never sits on a port a broker will bind


def test_cut_one_way_black_holes_what_the_source_sends_on_both_links(cluster: StromCluster) -> None:
    cluster.cut(1, 2, both_ways=False)
    assert (cluster.link(1, 2).mode(UPSTREAM), cluster.link(1, 2).mode(DOWNSTREAM)) == ("black_hole", "pass")
    assert (cluster.link(2, 1).mode(UPSTREAM), cluster.link(2, 1).mode(DOWNSTREAM)) == ("pass", "black_hole")
    cluster.heal(1, 2, both_ways=False)
    for proxy in (cluster.link(1, 2), cluster.link(2, 1)):
        assert (proxy.mode(UPSTREAM), proxy.mode(DOWNSTREAM)) == ("pass", "pass")
    with pytest.raises(ValueError, match="itself"):
        cluster.cut(2, 2)


def test_isolate_cuts_a_broker_from_every_peer_and_zookeeper_but_not_from_itself(cluster: StromCluster) -> None:
    cluster.isolate(2, mode="drop")
    cut = {(p, b) for p in (1, 2, 3) for b in (1, 2, 3) if cluster.link(p, b).mode(UPSTREAM) == "drop"}
    assert cut == {(1, 2), (2, 1), (2, 3), (3, 2)}
    assert all(proxy.mode(UPSTREAM) == "drop" for proxy in cluster.zk_links(2))
    assert all(proxy.mode(UPSTREAM) == "pass" for proxy in cluster.zk_links(1) + cluster.zk_links(3))
    cluster.rejoin(2)
    assert all(cluster.link(p, b).mode(d) == "pass" for p in (1, 2, 3) for b in (1, 2, 3) for d in (UPSTREAM, DOWNSTREAM))
    assert all(proxy.mode(DOWNSTREAM) == "pass" for proxy in cluster.zk_links(2))
