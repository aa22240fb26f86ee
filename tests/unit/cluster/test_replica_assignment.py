"""Replica placement against Kafka's own test cases.

Every expected figure here is copied from Apache Kafka's tests (AdminTest.testReplicaAssignment,
AddPartitionsTest.testReplicaPlacement*, AdminRackAwareTest), not computed by Strom's code;
the distribution checks follow Kafka's RackAwareTest.checkReplicaDistribution.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from strom.cluster.replica_assignment import (
    BrokerMetadata,
    ReplicaAssignmentError,
    assign_new_partitions,
    assign_replicas_to_brokers,
    rack_alternated_broker_list,
)
from strom.protocol.error_codes import ErrorCode

FIVE_BROKERS = [BrokerMetadata(i) for i in range(5)]


def test_kafka_admin_test_replica_assignment() -> None:
    # AdminTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixedStartIndex 0.
    expected = {
        0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
        5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2),
    }
    assert assign_replicas_to_brokers(FIVE_BROKERS, 10, 3, fixed_start_index=0) == expected


@pytest.mark.parametrize(("replication_factor", "message"), [
    (0, "Replication factor must be larger than 0."),
    (-1, "Replication factor must be larger than 0."),
    (6, "Replication factor: 6 larger than available brokers: 5."),
])
def test_a_replication_factor_outside_1_to_brokers_is_refused_as_kafka(
        replication_factor: int, message: str) -> None:
    with pytest.raises(ReplicaAssignmentError) as raised:
        assign_replicas_to_brokers(FIVE_BROKERS, 10, replication_factor)
    assert raised.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert raised.value.message == message


def test_the_message_kafka_gives_for_three_replicas_on_one_broker() -> None:
    with pytest.raises(ReplicaAssignmentError) as raised:
        assign_replicas_to_brokers([BrokerMetadata(1)], 1, 3)
    assert raised.value.message == "Replication factor: 3 larger than available brokers: 1."


def test_no_partitions_is_invalid_partitions() -> None:
    with pytest.raises(ReplicaAssignmentError) as raised:
        assign_replicas_to_brokers(FIVE_BROKERS, 0, 1)
    assert raised.value.error_code == ErrorCode.INVALID_PARTITIONS
    assert raised.value.message == "Number of partitions must be larger than 0."


class _Draws(random.Random):
    """A random source that answers ``randrange`` with the given values, in order."""

    def __init__(self, *values: int) -> None:
        super().__init__(0)
        self.values = list(values)
        self.bounds: list[int] = []

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        self.bounds.append(start if stop is None else stop)
        return self.values.pop(0)


def test_start_index_and_shift_are_two_draws_over_the_broker_count() -> None:
    draws = _Draws(0, 0)
    assert assign_replicas_to_brokers(FIVE_BROKERS, 10, 3, rng=draws) == \
        assign_replicas_to_brokers(FIVE_BROKERS, 10, 3, fixed_start_index=0)
    assert draws.bounds == [5, 5] and draws.values == []


def test_the_first_draw_picks_the_first_replica_of_partition_zero() -> None:
    assignment = assign_replicas_to_brokers(FIVE_BROKERS, 5, 1, rng=_Draws(3, 0))
    assert [assignment[p][0] for p in range(5)] == [3, 4, 0, 1, 2]


@pytest.mark.parametrize("seed", range(20))
def test_random_starts_spread_leaders_and_replicas_evenly(seed: int) -> None:
    # RackAwareTest.checkReplicaDistribution for a rack-unaware cluster: with partitions a
    # multiple of brokers, every broker leads and holds the same number of partitions.
    assignment = assign_replicas_to_brokers(FIVE_BROKERS, 10, 3, rng=random.Random(seed))
    assert sorted(assignment) == list(range(10))
    assert all(len(set(replicas)) == 3 for replicas in assignment.values())
    assert Counter(replicas[0] for replicas in assignment.values()) == {b: 2 for b in range(5)}
    assert Counter(b for replicas in assignment.values() for b in replicas) == {b: 6 for b in range(5)}


def test_kafka_add_partitions_test_replica_placement_all_servers() -> None:
    # AddPartitionsTest.testReplicaPlacementAllServers: 4 brokers, {0: [2, 3, 0, 1]} grown to 7.
    brokers = [BrokerMetadata(i) for i in (3, 1, 0, 2)]  # the order given does not matter: sorted by id
    added = assign_new_partitions("new-topic3", {0: (2, 3, 0, 1)}, brokers, 7)
    assert sorted(added) == [1, 2, 3, 4, 5, 6]
    assert {p: r[0] for p, r in added.items()} == {1: 3, 2: 0, 3: 1, 4: 2, 5: 3, 6: 0}
    assert all(set(r) == {0, 1, 2, 3} for r in added.values())


def test_kafka_add_partitions_test_replica_placement_partial_servers() -> None:
    # AddPartitionsTest.testReplicaPlacementPartialServers: {0: [1, 2]} grown to 3 on brokers 0-3.
    added = assign_new_partitions("new-topic2", {0: (1, 2)}, [BrokerMetadata(i) for i in range(4)], 3)
    assert {p: (r[0], set(r)) for p, r in added.items()} == {1: (2, {0, 2}), 2: (3, {1, 3})}


def test_adding_partitions_needs_partition_zero() -> None:
    # AddPartitionsTest.testMissingPartition0.
    with pytest.raises(ReplicaAssignmentError) as raised:
        assign_new_partitions("new-topic5", {1: (0, 1)}, FIVE_BROKERS, 2)
    assert raised.value.message.startswith(
        "Unexpected existing replica assignment for topic 'new-topic5', partition id 0 is missing")


@pytest.mark.parametrize("count", [1, 2])
def test_partitions_can_only_be_added(count: int) -> None:
    with pytest.raises(ReplicaAssignmentError) as raised:
        assign_new_partitions("t", {0: (0,), 1: (1,)}, FIVE_BROKERS, count)
    assert raised.value.error_code == ErrorCode.INVALID_PARTITIONS
    assert raised.value.message == (
        f"The number of partitions for a topic can only be increased. Topic t currently has 2 "
        f"partitions, {count} would not be an increase.")


RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_kafka_rack_alternated_broker_list_and_assignment() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    assert rack_alternated_broker_list(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]
    brokers = [BrokerMetadata(b, r) for b, r in RACKS.items()]
    assert assign_replicas_to_brokers(brokers, 7, 3, fixed_start_index=0, start_partition_id=0) == {
        0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2), 4: (4, 2, 0), 5: (2, 0, 3), 6: (0, 4, 2)}


@pytest.mark.parametrize("seed", range(10))
def test_more_replicas_than_racks_covers_every_rack(seed: int) -> None:
    # AdminRackAwareTest.testMoreReplicasThanRacks.
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    brokers = [BrokerMetadata(b, r) for b, r in racks.items()]
    assignment = assign_replicas_to_brokers(brokers, 6, 5, rng=random.Random(seed))
    assert all(len(r) == 5 and len({racks[b] for b in r}) == 3 for r in assignment.values())


def test_single_rack_gives_each_broker_one_leader() -> None:
    # AdminRackAwareTest.testSingleRack.
    brokers = [BrokerMetadata(b, "rack1") for b in range(6)]
    assignment = assign_replicas_to_brokers(brokers, 6, 3, rng=random.Random(7))
    assert Counter(r[0] for r in assignment.values()) == {b: 1 for b in range(6)}


def test_racks_on_some_brokers_only_is_refused() -> None:
    with pytest.raises(ReplicaAssignmentError) as raised:
        assign_replicas_to_brokers([BrokerMetadata(0, "a"), BrokerMetadata(1)], 1, 1)
    assert raised.value.message == "Not all brokers have rack information for replica rack aware assignment."
