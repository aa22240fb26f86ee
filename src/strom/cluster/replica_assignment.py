"""Where a new topic's (or a grown topic's) replicas go: Kafka's ``AdminUtils.assignReplicasToBrokers``.

The controller decides placement once, writes it to ``/brokers/topics/<t>`` and never moves
it (reassignment is not part of this cluster mode). The algorithm is Kafka's, step for step,
so a Strom cluster spreads a topic exactly as a Kafka cluster with the same brokers would:

* rack-unaware (no broker has a rack): the first replica of partition ``p`` goes on broker
  ``(start + p) mod n`` of the broker list; the followers follow it at a shift that is
  ``1 + (shift + j) mod (n - 1)`` places further on, and ``shift`` grows by one every ``n``
  partitions, so the same follower sequences do not repeat round after round. ``start`` and
  the initial ``shift`` are random (two draws), unless the caller fixes them (tests, and
  partition addition, which continues from the existing partition 0's first replica);
* rack-aware (every broker has a rack): the same round robin over a list that alternates
  racks, skipping a broker whose rack (or itself) already holds a replica of the partition
  while some rack (or broker) holds none.

Errors are Kafka's, code and words: a replication factor above the number of brokers is
``INVALID_REPLICATION_FACTOR`` "Replication factor: 3 larger than available brokers: 1.".
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException

_RANDOM = random.Random()


class ReplicaAssignmentError(KafkaException):
    """A placement that cannot be made; ``error_code`` is what CreateTopics/CreatePartitions answer."""


class BrokerPlacement(Protocol):
    """What placement needs of a broker: its id and rack (``BrokerInfo`` has both)."""

    @property
    def id(self) -> int: ...

    @property
    def rack(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """A broker as placement sees it (Kafka's ``BrokerMetadata``)."""

    id: int
    rack: str | None = None


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerPlacement],
    num_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Partition id -> replica ids (preference order), for ``num_partitions`` partitions.

    ``brokers`` are used in the order given (Kafka's CreateTopics passes the live brokers;
    its partition addition sorts them by id). ``fixed_start_index >= 0`` fixes both the
    start index and the initial follower shift, as Kafka's parameter of that name does;
    otherwise both are drawn from ``rng``. Partition ids start at ``start_partition_id``
    (0 when negative).
    """
    if num_partitions <= 0:
        raise ReplicaAssignmentError("Number of partitions must be larger than 0.",
                                     ErrorCode.INVALID_PARTITIONS)
    if replication_factor <= 0:
        raise ReplicaAssignmentError("Replication factor must be larger than 0.",
                                     ErrorCode.INVALID_REPLICATION_FACTOR)
    if replication_factor > len(brokers):
        raise ReplicaAssignmentError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
            ErrorCode.INVALID_REPLICATION_FACTOR)
    draw = rng if rng is not None else _RANDOM
    if all(broker.rack is None for broker in brokers):
        return _rack_unaware([broker.id for broker in brokers], num_partitions, replication_factor,
                             fixed_start_index, start_partition_id, draw)
    if any(broker.rack is None for broker in brokers):
        # Kafka's AdminOperationException: not an API error, so UNKNOWN_SERVER_ERROR on the wire.
        raise ReplicaAssignmentError(
            "Not all brokers have rack information for replica rack aware assignment.")
    racks = {broker.id: broker.rack for broker in brokers if broker.rack is not None}
    return _rack_aware(racks, num_partitions, replication_factor, fixed_start_index,
                       start_partition_id, draw)


def assign_new_partitions(
    topic: str,
    existing: Mapping[int, Sequence[int]],
    brokers: Sequence[BrokerPlacement],
    num_partitions: int,
    *,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Replicas for the partitions a topic grows by, up to ``num_partitions`` in all.

    Kafka's ``AdminZkClient.createNewPartitionsAssignment``: the brokers sorted by id, the
    replication factor of partition 0, and a fixed start at the index of the first broker
    whose id is at least partition 0's first replica, so the new partitions continue the
    round robin the topic was created with (when the broker list has not changed).
    """
    partition_zero = existing.get(0)
    if partition_zero is None:
        assignment = {p: list(r) for p, r in sorted(existing.items())}
        raise ReplicaAssignmentError(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is missing. "
            f"Assignment: {assignment}")
    to_add = num_partitions - len(existing)
    if to_add <= 0:
        raise ReplicaAssignmentError(
            f"The number of partitions for a topic can only be increased. Topic {topic} currently has "
            f"{len(existing)} partitions, {num_partitions} would not be an increase.",
            ErrorCode.INVALID_PARTITIONS)
    ordered = sorted(brokers, key=lambda broker: broker.id)
    first_replica = partition_zero[0]
    start_index = next((i for i, broker in enumerate(ordered) if broker.id >= first_replica), 0)
    return assign_replicas_to_brokers(ordered, to_add, len(partition_zero),
                                      fixed_start_index=start_index,
                                      start_partition_id=len(existing), rng=rng)


def rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one rack at a time (racks in name order, brokers by id within a rack).

    rack1: 0, 1, 2; rack2: 3, 4, 5; rack3: 6, 7, 8 gives 0, 3, 6, 1, 4, 7, 2, 5, 8, so a plain
    round robin over the result puts consecutive replicas on different racks.
    """
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(racks):
        result.extend(queue[depth] for queue in queues if depth < len(queue))
        depth += 1
    return result


def _replica_index(first_replica_index: int, shift: int, replica: int, broker_count: int) -> int:
    return (first_replica_index + 1 + (shift + replica) % (broker_count - 1)) % broker_count


def _start(fixed_start_index: int, broker_count: int, rng: random.Random) -> tuple[int, int]:
    """Start index and initial follower shift: both fixed, or two random draws (Kafka's order)."""
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    start_index = rng.randrange(broker_count)
    return start_index, rng.randrange(broker_count)


def _rack_unaware(broker_ids: list[int], num_partitions: int, replication_factor: int,
                  fixed_start_index: int, start_partition_id: int,
                  rng: random.Random) -> dict[int, tuple[int, ...]]:
    count = len(broker_ids)
    start_index, shift = _start(fixed_start_index, count, rng)
    assignment: dict[int, tuple[int, ...]] = {}
    partition = max(0, start_partition_id)
    for _ in range(num_partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start_index) % count
        followers = (broker_ids[_replica_index(first, shift, j, count)]
                     for j in range(replication_factor - 1))
        assignment[partition] = (broker_ids[first], *followers)
        partition += 1
    return assignment


def _rack_aware(racks: Mapping[int, str], num_partitions: int, replication_factor: int,
                fixed_start_index: int, start_partition_id: int,
                rng: random.Random) -> dict[int, tuple[int, ...]]:
    rack_count = len(set(racks.values()))
    arranged = rack_alternated_broker_list(racks)
    count = len(arranged)
    start_index, shift = _start(fixed_start_index, count, rng)
    assignment: dict[int, tuple[int, ...]] = {}
    partition = max(0, start_partition_id)
    for _ in range(num_partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start_index) % count
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * rack_count, k, count)]
                rack = racks[broker]
                k += 1
                # Skip a broker whose rack already has a replica while some rack has none,
                # or that has a replica itself while some broker has none.
                if ((rack not in racks_used or len(racks_used) == rack_count)
                        and (broker not in brokers_used or len(brokers_used) == count)):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        assignment[partition] = tuple(replicas)
        partition += 1
    return assignment
