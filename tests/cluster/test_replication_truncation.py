"""Truncation on leader change (issue 18, tests 5a-5c): Kafka's KIP-101 and KIP-279 scenarios
as ``EpochDrivenReplicationProtocolAcceptanceTest`` runs them, on real brokers.

Each test makes its fault happen for certain and says so: the follower's fetches held in a
black hole (proxy counters), a high watermark checkpoint below the record that must survive,
bytes cut by a power loss (``drop_unsynced_tail``), bounces counted. What must hold after it:
no acknowledged record lost where Kafka loses none (5a), replicas byte-identical batch for
batch (their CRC sequences, read from the segment files after a clean stop) and offsets that
never go backwards (5b, 5c), every replica's log end offset equal to the records written (5c).

Leaders and ISRs are read from ZooKeeper (``zk.sync()`` first), never from Metadata alone.
``STROM_REPLICATION_TRIALS`` (default 1) repeats the randomised scenarios with new seeds.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from tests.support.cluster import StromCluster
from tests.support.netproxy import BOTH
from tests.support.power_loss import drop_unsynced_tail
from tests.support.replication import (
    assert_monotonic,
    await_state,
    checkpointed_hw,
    create_partition,
    produce_each,
    read_partition,
    replica_batches,
    stop_all,
    zk_chroot,
)
from tests.support.zookeeper import zookeeper as zookeeper

pytestmark = pytest.mark.zookeeper

TRIALS = int(os.environ.get("STROM_REPLICATION_TRIALS", "1"))


# -- 5a: KIP-101 scenario 1 ----------------------------------------------------------------
def test_a_restarted_follower_behind_on_the_high_watermark_keeps_the_record_it_then_leads_with(
        tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> None:
    """The follower has m2 but not the high watermark covering it (on disk, its checkpoint is
    below m2; in memory, the leader's answer to its fetch past m2 is a long poll still held).
    It restarts (a follower that truncated to its high watermark here would drop m2), fetches
    from its log end and is back in the ISR; its link to the leader is frozen before the
    leader's answer can bring it the high watermark; the leader dies; the follower is elected
    cleanly: m2 is there. Kafka before KIP-101 lost it."""
    overrides = {"replica.high.watermark.checkpoint.interval.ms": "600000",  # the checkpoint lags: HW < 2 on disk
                 "replica.fetch.wait.max.ms": "25000",  # a fetch at the log end is answered 25 s later
                 "replica.socket.timeout.ms": "60000",
                 "replica.lag.time.max.ms": "30000"}  # no shrink while the follower is cut off
    with StromCluster(tmp_path, zk_chroot(zookeeper), brokers=2, overrides=overrides, proxied=True) as cluster:
        leader = cluster.controller_id()  # the leader keeps the controller: no election before it dies
        follower = 3 - leader
        create_partition(cluster, "kip101", [leader, follower], **{"min.insync.replicas": "1"})
        produce_each(cluster, "kip101", [b"m1"])
        produce_each(cluster, "kip101", [b"m2"])  # acks=all: the follower has fetched past it
        before = await_state(cluster, "kip101", lambda s: sorted(s.isr) == sorted([leader, follower]), "a full ISR")
        cluster.kill(follower)
        assert checkpointed_hw(cluster, follower, "kip101") < 2  # the scenario's premise, on disk
        link = cluster.link(follower, leader)  # every fetch the follower sends the leader, both ways
        accepted = link.stats().accepted
        cluster.restart(follower)
        # The controller took the bounced follower out of the ISR (a state write) and the leader
        # put it back (another) once it fetched from offset 2: from its log end, not its high
        # watermark. The first state is brief: seen through the partition epoch (the version).
        await_state(cluster, "kip101", lambda s: s.partition_epoch >= before.partition_epoch + 2
                    and sorted(s.isr) == sorted([leader, follower]), "the follower out of the ISR and back")
        assert link.stats().accepted > accepted  # it did fetch through the proxy
        link.black_hole(BOTH)  # the held answer (with the high watermark) never reaches it
        cluster.kill(leader)
        state = await_state(cluster, "kip101", lambda s: s.leader == follower, "the follower to lead")
        assert follower in state.isr
        link.pass_through(BOTH)
        assert read_partition(cluster, "kip101") == [(0, b"m1"), (1, b"m2")]

        cluster.restart(leader)  # back as a follower of the new leader, then identical
        await_state(cluster, "kip101", lambda s: sorted(s.isr) == sorted([leader, follower]),
                     "the old leader back in the ISR")
        produce_each(cluster, "kip101", [b"m3"])
        stop_all(cluster)
        assert replica_batches(cluster, leader, "kip101") == replica_batches(cluster, follower, "kip101")
        assert [last for _, last, _ in replica_batches(cluster, follower, "kip101")] == [0, 1, 2]


# -- 5b: KIP-101 scenario 2 / KIP-279 ----------------------------------------------------------
def _power_loss(cluster: StromCluster, node_id: int) -> int:
    """SIGKILL, then the page cache lost: bytes cut from the partition's active segment."""
    cluster.kill(node_id)
    return drop_unsynced_tail(str(cluster.brokers[node_id].data_dir)).get("diverge-0", 0)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_replicas_that_both_lose_power_and_restart_in_the_other_order_do_not_diverge(
        tmp_path: Path, zookeeper: ZooKeeperEnsemble, trial: int) -> None:
    """Both replicas lose their unsynced tails, at different points of the log, and come back
    in the other order with writes between the restarts (an unclean election, as Kafka's
    logsShouldNotDivergeOnUncleanLeaderElections): the same batches, CRC for CRC, at the same
    offsets on both, offsets contiguous, a consumer's offsets increasing."""
    rng = random.Random(5_000 + trial)
    overrides = {"replica.lag.time.max.ms": "2000"}
    with StromCluster(tmp_path, zk_chroot(zookeeper), brokers=2, overrides=overrides) as cluster:
        first, second = 1, 2
        create_partition(cluster, "diverge", [first, second], **{
            "min.insync.replicas": "1", "unclean.leader.election.enable": "true",
            "segment.bytes": "1024"})  # a few batches a segment: rolled ones survive, the tail does not
        produce_each(cluster, "diverge", [b"w1-%03d-" % i + b"x" * rng.randrange(20, 120) for i in range(30)])
        cut = {second: _power_loss(cluster, second)}
        # The leader alone (acks=all waits for the ISR to drop the follower) writes more.
        # More than a segment's worth (>= 15 x 80 bytes): at least one roll, so some of it
        # survives the leader's power loss below, at offsets the follower no longer has.
        produce_each(cluster, "diverge", [b"w2-%03d-" % i + b"y" * rng.randrange(80, 120) for i in range(rng.randrange(15, 25))])
        await_state(cluster, "diverge", lambda s: s.isr == (first,), "the ISR without the dead follower")
        cut[first] = _power_loss(cluster, first)
        assert all(n > 0 for n in cut.values()), f"a power loss that lost nothing: {cut}"
        left_on_first = replica_batches(cluster, first, "diverge")

        cluster.restart(second)  # out of the ISR: elected uncleanly, with the shorter log
        await_state(cluster, "diverge", lambda s: s.leader == second, "the second replica to lead")
        produce_each(cluster, "diverge", [b"w3-%03d-" % i + b"z" * rng.randrange(20, 120) for i in range(rng.randrange(5, 15))])
        on_leader = replica_batches(cluster, second, "diverge")  # read while it runs: the page cache has it all
        assert left_on_first != on_leader[:len(left_on_first)]  # the logs did diverge at the same offsets
        cluster.restart(first)  # its tail differs from the leader's at the same offsets
        await_state(cluster, "diverge", lambda s: sorted(s.isr) == [first, second], "both replicas in sync")
        produce_each(cluster, "diverge", [b"w4-end"])
        offsets = [offset for offset, _ in read_partition(cluster, "diverge")]
        assert offsets == sorted(set(offsets)) and offsets[-1] == len(offsets) - 1 + offsets[0]
        stop_all(cluster)
        ours, theirs = replica_batches(cluster, first, "diverge"), replica_batches(cluster, second, "diverge")
        assert_monotonic(ours)
        assert ours == theirs
        assert ours[-1][1] == offsets[-1]


# -- 5c: fast leader changes (KIP-279) ---------------------------------------------------------
def test_five_fast_leader_bounces_leave_every_replica_with_every_record(
        tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> None:
    """shouldSurviveFastLeaderChange: five times, produce one record, bounce the follower, wait
    for the ISR, bounce the leader, wait for the ISR (clean bounces, SIGTERM then a start, as
    Kafka's test shuts brokers down and starts them). Every replica ends with the five records,
    the same batches at the same offsets. Each wait needs a newer partition state than the
    bounce began with (its partition epoch), so a full ISR seen before the bounce never counts."""
    rounds = 5
    bounces = 0
    both = [1, 2]
    with StromCluster(tmp_path, zk_chroot(zookeeper), brokers=2) as cluster:
        create_partition(cluster, "bounce", both, **{"min.insync.replicas": "1"})
        state = await_state(cluster, "bounce", lambda s: sorted(s.isr) == both, "a full ISR")
        for i in range(rounds):
            produce_each(cluster, "bounce", [b"r%d" % i])
            for bounced in (3 - state.leader, state.leader):  # the follower, then the leader
                epoch = state.partition_epoch
                cluster.restart(bounced)
                bounces += 1
                state = await_state(cluster, "bounce", lambda s, epoch=epoch: s.partition_epoch > epoch  # type: ignore[misc]
                                    and s.leader > 0 and sorted(s.isr) == both, f"broker {bounced} back in the ISR")
        assert bounces == 2 * rounds
        assert [value for _, value in read_partition(cluster, "bounce")] == [b"r%d" % i for i in range(rounds)]
        stop_all(cluster)
        batches = {node_id: replica_batches(cluster, node_id, "bounce") for node_id in both}
        assert batches[1][-1][1] + 1 == rounds  # the log end offset: every record, once
        assert batches[1] == batches[2]
        assert_monotonic(batches[1])
