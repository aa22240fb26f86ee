"""Kafka's ZooKeeper-mode leader elections, table by table.

The leader choices start with Kafka's PartitionLeaderElectionAlgorithmsTest cases; the state
tables follow Kafka's Election and ZkReplicaStateMachine.doRemoveReplicasFromIsr: first live
in-sync replica in assignment order, unclean only when enabled, leader epoch + 1, partition
epoch untouched (the writer sets it), an ISR that never becomes empty.
"""

from __future__ import annotations

import pytest

from strom.cluster.leader_election import (
    ElectionResult,
    controlled_shutdown_leader,
    elect_for_controlled_shutdown,
    elect_offline,
    elect_preferred,
    initial_leader_and_isr,
    offline_partition_leader,
    preferred_replica_leader,
    remove_replica_from_isr,
)
from strom.cluster.zk_data import NO_LEADER, LeaderAndIsr

# (assignment, isr, live, unclean) -> leader. Kafka's PartitionLeaderElectionAlgorithmsTest
# cases first, under their names, then ones of ours.
OFFLINE_CASES = [
    ((2, 4), (2, 4), {4}, False, 4),           # testOfflinePartitionLeaderElection
    ((2, 4), (2,), {4}, False, None),          # ...LastIsrOfflineUncleanLeaderElectionDisabled
    ((2, 4), (2,), {4}, True, 4),              # ...LastIsrOfflineUncleanLeaderElectionEnabled
    ((1, 2, 3), (1, 2, 3), {1, 2, 3}, False, 1),
    ((1, 2, 3), (3, 2), {1, 2, 3}, False, 2),  # assignment order, not ISR order
    ((1, 2, 3), (1, 2, 3), set(), True, None),  # nobody live: not even unclean helps
    ((1, 2, 3), (), {2, 3}, False, None),
    ((1, 2, 3), (), {3, 2}, True, 2),
]


@pytest.mark.parametrize(("assignment", "isr", "live", "unclean", "leader"), OFFLINE_CASES)
def test_offline_partition_leader(assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int],
                                  unclean: bool, leader: int | None) -> None:
    assert offline_partition_leader(assignment, isr, live, unclean) == leader


@pytest.mark.parametrize(("assignment", "isr", "live", "leader"), [
    ((2, 4), (2, 4), {2, 4}, 2),   # testPreferredReplicaPartitionLeaderElection
    ((2, 4), (2,), set(), None),   # ...PreferredReplicaInIsrNotLive
    ((2, 4), (4,), {2, 4}, None),  # ...PreferredReplicaNotInIsrLive
    ((2, 4), (), set(), None),     # ...PreferredReplicaNotInIsrNotLive
    ((), (), {1}, None),
])
def test_preferred_replica_leader(assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int],
                                  leader: int | None) -> None:
    assert preferred_replica_leader(assignment, isr, live) == leader


@pytest.mark.parametrize(("assignment", "isr", "up", "shutting_down", "leader"), [
    ((2, 4), (2, 4), {2, 4}, {2}, 4),          # testControlledShutdownPartitionLeaderElection
    ((2, 4), (2,), {2, 4}, {2}, None),         # ...LastIsrShuttingDown
    ((2, 4), (2, 4), {2, 4}, {2, 4}, None),    # ...AllIsrSimultaneouslyShutdown
    ((2, 4), (2, 4), {2, 4}, set(), 2),
    ((2, 4), (2, 4), {2}, {2}, None),          # the other in-sync broker is already gone
    ((1, 2, 3), (3, 1), {1, 2, 3}, {1}, 3),    # 2 is up but out of sync
])
def test_controlled_shutdown_leader(assignment: tuple[int, ...], isr: tuple[int, ...], up: set[int],
                                    shutting_down: set[int], leader: int | None) -> None:
    assert controlled_shutdown_leader(assignment, isr, up, shutting_down) == leader


def state(leader: int, epoch: int, isr: tuple[int, ...], partition_epoch: int = 7) -> LeaderAndIsr:
    return LeaderAndIsr(leader=leader, leader_epoch=epoch, isr=isr, partition_epoch=partition_epoch)


@pytest.mark.parametrize(("current", "assignment", "live", "unclean", "expected"), [
    # clean: the next in-sync replica leads, dead ISR members leave the ISR
    (state(1, 4, (1, 2, 3)), (1, 2, 3), {2, 3}, False,
     ElectionResult(state(2, 5, (2, 3)), (2, 3))),
    # the controller took over: a live leader keeps leading in a new epoch
    (state(1, 4, (1, 2)), (1, 2, 3), {1, 2, 3}, False,
     ElectionResult(state(1, 5, (1, 2)), (1, 2, 3))),
    # no live in-sync replica, unclean disabled: nothing to write
    (state(1, 4, (1,)), (1, 2), {2}, False, ElectionResult(None, (2,))),
    # unclean: the first live replica leads alone
    (state(1, 4, (1,)), (1, 2, 3), {3, 2}, True,
     ElectionResult(state(2, 5, (2,)), (2, 3))),
    # a dead leader of a single-replica partition (RF 1): offline until it returns
    (state(1, 0, (1,)), (1,), {2, 3}, False, ElectionResult(None, ())),
    # the broker came back: it leads again, next epoch
    (state(NO_LEADER, 1, (1,)), (1,), {1, 2}, False,
     ElectionResult(state(1, 2, (1,)), (1,))),
    # no state in ZooKeeper: nothing to elect from
    (None, (1, 2), {1, 2}, True, ElectionResult(None, (1, 2))),
])
def test_elect_offline(current: LeaderAndIsr | None, assignment: tuple[int, ...], live: set[int],
                       unclean: bool, expected: ElectionResult) -> None:
    assert elect_offline(current, assignment, live, unclean) == expected


@pytest.mark.parametrize(("current", "assignment", "live", "expected"), [
    (state(2, 3, (2, 1)), (1, 2), {1, 2}, ElectionResult(state(1, 4, (2, 1)), (1, 2))),
    (state(2, 3, (2,)), (1, 2), {1, 2}, ElectionResult(None, (1, 2))),
    (state(2, 3, (2, 1)), (1, 2), {2}, ElectionResult(None, (1, 2))),
])
def test_elect_preferred_keeps_the_isr(current: LeaderAndIsr, assignment: tuple[int, ...], live: set[int],
                                       expected: ElectionResult) -> None:
    assert elect_preferred(current, assignment, live) == expected


@pytest.mark.parametrize(("current", "assignment", "up", "shutting_down", "expected"), [
    (state(1, 3, (1, 2, 3)), (1, 2, 3), {1, 2, 3}, {1},
     ElectionResult(state(2, 4, (2, 3)), (1, 2, 3))),
    (state(1, 3, (1, 3)), (1, 2, 3), {1, 3}, {1, 3}, ElectionResult(None, (1, 3))),
    (state(3, 3, (3, 1, 2)), (1, 2, 3), {1, 2, 3}, {3, 1},
     ElectionResult(state(2, 4, (2,)), (1, 2, 3))),
])
def test_elect_for_controlled_shutdown_drops_shutting_down_brokers_from_the_isr(
        current: LeaderAndIsr, assignment: tuple[int, ...], up: set[int], shutting_down: set[int],
        expected: ElectionResult) -> None:
    assert elect_for_controlled_shutdown(current, assignment, up, shutting_down) == expected


@pytest.mark.parametrize(("assignment", "live", "expected"), [
    ((1, 2, 3), {1, 2, 3}, LeaderAndIsr(1, 0, (1, 2, 3))),
    ((3, 1, 2), {1, 2}, LeaderAndIsr(1, 0, (1, 2))),
    ((1, 2), {3}, None),
])
def test_initial_leader_and_isr(assignment: tuple[int, ...], live: set[int],
                                expected: LeaderAndIsr | None) -> None:
    assert initial_leader_and_isr(assignment, live) == expected


@pytest.mark.parametrize(("current", "replica", "expected"), [
    # the leader dies with others in sync: no leader until the election, ISR shrinks
    (state(1, 4, (1, 2)), 1, state(NO_LEADER, 5, (2,))),
    # a follower dies: the leader stays, ISR shrinks, epoch still bumps (ZK mode)
    (state(1, 4, (1, 2)), 2, state(1, 5, (1,))),
    # the last ISR member dies: leader -1, and it stays in the ISR
    (state(1, 0, (1,)), 1, state(NO_LEADER, 1, (1,))),
    # not in the ISR: nothing to write
    (state(1, 4, (1,)), 2, None),
])
def test_remove_replica_from_isr(current: LeaderAndIsr, replica: int, expected: LeaderAndIsr | None) -> None:
    assert remove_replica_from_isr(current, replica) == expected


def _written(state: LeaderAndIsr | None) -> tuple[int, int, tuple[int, ...]] | None:
    return None if state is None else (state.leader, state.leader_epoch, state.isr)


def test_the_states_kafka_3_9_wrote_when_a_broker_died_and_returned() -> None:
    # Observed on Apache Kafka 3.9.2 in ZooKeeper mode (two brokers, controller on broker 1,
    # topics created by their assignment znodes): the partition state znodes before and after
    # a SIGKILL of broker 2, and after it registered again.
    live_after_kill, live_after_return = {1}, {1, 2}
    # rf2 {0: [2, 1]}, led by 2 with ISR [2, 1] -> leader 1, epoch 1, ISR [1]
    rf2 = elect_offline(state(2, 0, (2, 1)), (2, 1), live_after_kill, False)
    assert _written(rf2.leader_and_isr) == (1, 1, (1,))
    # rf2b {0: [1, 2]}, led by 1 with ISR [1, 2] -> leader 1, epoch 1, ISR [1]
    assert _written(remove_replica_from_isr(state(1, 0, (1, 2)), 2)) == (1, 1, (1,))
    # rf1 {0: [2]}, led by 2 -> no election; leader -1, epoch 1, ISR [2] kept
    assert elect_offline(state(2, 0, (2,)), (2,), live_after_kill, False).leader_and_isr is None
    offline = remove_replica_from_isr(state(2, 0, (2,)), 2)
    assert _written(offline) == (NO_LEADER, 1, (2,))
    # broker 2 back -> rf1 leader 2, epoch 2, ISR [2]
    assert offline is not None
    assert _written(elect_offline(offline, (2,), live_after_return, False).leader_and_isr) == (2, 2, (2,))
