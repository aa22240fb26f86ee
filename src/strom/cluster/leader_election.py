"""Who leads a partition next: Kafka's ZooKeeper-mode leader elections, as pure functions.

Kafka's ``PartitionLeaderElectionAlgorithms`` and ``Election`` (core/.../controller), one
function per reason a partition needs a leader:

* new partition: the first live replica in assignment order leads; the ISR is every live
  replica (leader epoch 0);
* offline (its leader died, or the controller just took over): the first replica in
  assignment order that is live *and* in the ISR; with ``unclean.leader.election.enable`` the
  first live replica otherwise. New ISR: the old ISR filtered to live brokers, or just the
  new leader after an unclean election;
* preferred: the first replica of the assignment, if it is live and in the ISR; the ISR is
  kept;
* controlled shutdown: the first replica in assignment order that is live, in the ISR and
  not shutting down; the new ISR drops every shutting-down broker.

Each election bumps the leader epoch by one and keeps the partition epoch, which is the
state znode's version: the writer checks it and replaces it with the new version. "Live"
is the controller's view: registered in ``/brokers/ids`` and not shutting down.

When no replica qualifies, the election returns no state and Kafka writes nothing for it.
A partition whose leader's broker went away is then taken offline by the *replica* state
machine (``removeReplicasFromIsr``): leader -1, leader epoch + 1, and the dead broker left
out of the ISR unless it is the last member, which stays (the ISR is never empty, so the
broker that has every committed record is known when it comes back). That is
``remove_replica_from_isr`` below.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence, Set
from dataclasses import dataclass

from strom.cluster.zk_data import NO_LEADER, LeaderAndIsr


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """A partition's new leadership, or ``None`` when nobody qualifies.

    ``recipients`` are the brokers Kafka sends the resulting LeaderAndIsr to (its
    ``ElectionResult.liveReplicas``): the live replicas for an offline election, the whole
    assignment for a preferred one, the live and shutting-down replicas for a controlled
    shutdown.
    """

    leader_and_isr: LeaderAndIsr | None
    recipients: tuple[int, ...]


def new_leader_and_isr(current: LeaderAndIsr, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
    """Kafka's ``LeaderAndIsr.newLeaderAndIsr``: a new leader and ISR in the next leader epoch."""
    return dataclasses.replace(current, leader=leader, leader_epoch=current.leader_epoch + 1,
                               isr=tuple(isr))


def initial_leader_and_isr(assignment: Sequence[int], live: Set[int]) -> LeaderAndIsr | None:
    """A new partition's first state: first live replica leads, every live replica in the ISR.

    ``None`` when no replica is live (Kafka leaves such a partition in NewPartition and
    logs "No assigned replica is alive").
    """
    live_replicas = tuple(replica for replica in assignment if replica in live)
    if not live_replicas:
        return None
    return LeaderAndIsr(leader=live_replicas[0], leader_epoch=0, isr=live_replicas)


def offline_partition_leader(assignment: Sequence[int], isr: Sequence[int], live: Set[int],
                             unclean_leader_election_enabled: bool) -> int | None:
    """The first live in-sync replica in assignment order; any live one if unclean is allowed."""
    for replica in assignment:
        if replica in live and replica in isr:
            return replica
    if unclean_leader_election_enabled:
        return next((replica for replica in assignment if replica in live), None)
    return None


def preferred_replica_leader(assignment: Sequence[int], isr: Sequence[int], live: Set[int]) -> int | None:
    """The preferred (first assigned) replica, if it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Sequence[int],
                               live_or_shutting_down: Set[int], shutting_down: Set[int]) -> int | None:
    """The first replica in assignment order that is up, in the ISR and not shutting down."""
    for replica in assignment:
        if replica in live_or_shutting_down and replica in isr and replica not in shutting_down:
            return replica
    return None


def elect_offline(current: LeaderAndIsr | None, assignment: Sequence[int], live: Set[int],
                  unclean_leader_election_enabled: bool) -> ElectionResult:
    """Election for a partition with no live leader (``OfflinePartitionLeaderElectionStrategy``).

    ``current`` is the partition's state as read from ZooKeeper; without one there is
    nothing to elect from (Kafka returns no leader too).
    """
    live_replicas = tuple(replica for replica in assignment if replica in live)
    if current is None:
        return ElectionResult(None, live_replicas)
    leader = offline_partition_leader(assignment, current.isr, live,
                                      unclean_leader_election_enabled)
    if leader is None:
        return ElectionResult(None, live_replicas)
    if leader in current.isr:
        isr: Sequence[int] = [replica for replica in current.isr if replica in live]
    else:  # unclean: only the new leader is known to have what it has
        isr = [leader]
    return ElectionResult(new_leader_and_isr(current, leader, isr), live_replicas)


def elect_preferred(current: LeaderAndIsr, assignment: Sequence[int], live: Set[int]) -> ElectionResult:
    """Move leadership back to the preferred replica, keeping the ISR."""
    leader = preferred_replica_leader(assignment, current.isr, live)
    state = None if leader is None else new_leader_and_isr(current, leader, current.isr)
    return ElectionResult(state, tuple(assignment))


def elect_for_controlled_shutdown(current: LeaderAndIsr, assignment: Sequence[int],
                                  live_or_shutting_down: Set[int],
                                  shutting_down: Set[int]) -> ElectionResult:
    """Move leadership off brokers that are shutting down; they also leave the ISR."""
    recipients = tuple(replica for replica in assignment if replica in live_or_shutting_down)
    leader = controlled_shutdown_leader(assignment, current.isr, live_or_shutting_down, shutting_down)
    if leader is None:
        return ElectionResult(None, recipients)
    isr = [replica for replica in current.isr if replica not in shutting_down]
    return ElectionResult(new_leader_and_isr(current, leader, isr), recipients)


def remove_replica_from_isr(current: LeaderAndIsr, replica: int) -> LeaderAndIsr | None:
    """The state after ``replica`` goes offline (Kafka's ``doRemoveReplicasFromIsr``).

    ``None`` when the replica is not in the ISR: Kafka writes nothing then. Otherwise the
    replica leaves the ISR unless it is its last member, the leader becomes -1 if it was
    the leader, and the leader epoch goes up by one either way.
    """
    if replica not in current.isr:
        return None
    leader = NO_LEADER if current.leader == replica else current.leader
    isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica)
    return new_leader_and_isr(current, leader, isr)
