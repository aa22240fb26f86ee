"""The group coordinator's transactional offsets, driven directly: a marker resolves only the
groups of the offsets partitions it landed on, a group holding nothing but pending offsets
is not removed by the offsets expiration (Kafka's ``hasOffsets``), and in cluster mode a
marker that lands while its partition loads still resolves the loaded groups."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from strom.broker.admin_manager import AdminManager
from strom.broker.group.coordinator import GroupCoordinator
from strom.broker.group.group_config import GroupConfig
from strom.broker.group.group_metadata import OffsetAndMetadata
from strom.broker.group.group_metadata_manager import GroupMetadataManager
from strom.broker.group.offsets_topic import OFFSETS_TOPIC, partition_for
from strom.broker.metadata_cache import MetadataCache
from strom.broker.replica_manager import ReplicaManager
from strom.protocol.error_codes import ErrorCode
from strom.storage.log_manager import LogManager

PARTITIONS = 3
CONFIG = GroupConfig(offsets_topic_num_partitions=PARTITIONS, group_initial_rebalance_delay_ms=0)
PID, EPOCH = 1000, 0
TP = ("in", 0)


def run(data_dir: Path, scenario: Callable[[GroupCoordinator], Awaitable[None]], *, cluster_mode: bool = False) -> None:
    log_manager = LogManager(str(data_dir), hw_follows_leo=False)
    log_manager.startup()
    replica_manager = ReplicaManager(log_manager, local_broker_id=0)
    replica_manager.startup()
    metadata = MetadataCache()
    admin_manager = AdminManager(metadata, replica_manager, log_manager)
    admin_manager.load()
    if cluster_mode:  # the controller creates the offsets topic in a cluster; the local admin here
        admin_manager.create_topic(OFFSETS_TOPIC, PARTITIONS, {"cleanup.policy": "compact"})
    manager = GroupMetadataManager(CONFIG, metadata, admin_manager, replica_manager, cluster_mode=cluster_mode)
    coordinator = GroupCoordinator(CONFIG, manager)
    coordinator.load()

    async def main() -> None:
        coordinator.start()
        try:
            await scenario(coordinator)
        finally:
            await coordinator.shutdown()

    try:
        asyncio.run(main())
    finally:
        log_manager.close()


def _groups_on_two_partitions() -> tuple[str, str]:
    by_partition: dict[int, str] = {}
    for n in range(100):
        by_partition.setdefault(partition_for(f"group-{n}", PARTITIONS), f"group-{n}")
    return by_partition[0], by_partition[1]


async def _commit(coordinator: GroupCoordinator, group: str, offset: int) -> None:
    offsets = {TP: OffsetAndMetadata(offset, -1, "", 1)}
    assert await coordinator.commit_transactional_offsets(group, PID, EPOCH, "", None, -1, offsets) == {
        TP: ErrorCode.NONE}


def _fetch(coordinator: GroupCoordinator, group: str) -> tuple[int | None, bool]:
    """(the committed offset, whether one is pending)."""
    _, fetched = coordinator.fetch_offsets(group, [TP])
    offset = fetched[TP]
    return (None if offset is None else offset.offset), bool(coordinator.unstable_offsets(group, [TP]))


def test_a_marker_resolves_only_the_groups_of_its_partitions(tmp_path: Path) -> None:
    first, second = _groups_on_two_partitions()

    async def scenario(coordinator: GroupCoordinator) -> None:
        await _commit(coordinator, first, 10)
        await _commit(coordinator, second, 20)
        assert _fetch(coordinator, first) == _fetch(coordinator, second) == (None, True)
        coordinator.on_transaction_completed(PID, [partition_for(first, PARTITIONS)], True)
        assert (_fetch(coordinator, first), _fetch(coordinator, second)) == ((10, False), (None, True))
        coordinator.on_transaction_completed(PID + 1, [1], True)  # another producer's marker
        assert _fetch(coordinator, second) == (None, True)
        coordinator.on_transaction_completed(PID, [1], False)
        assert _fetch(coordinator, second) == (None, False)
        assert coordinator.manager.producer_groups == {}

    run(tmp_path, scenario)


def test_a_group_with_only_pending_offsets_outlives_the_expiration(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        await _commit(coordinator, "g", 10)
        far_future = 10 * CONFIG.offsets_retention_ms + 10**13
        coordinator.expire_offsets(far_future)
        assert "g" in coordinator.groups
        coordinator.on_transaction_completed(PID, [partition_for("g", PARTITIONS)], True)
        assert _fetch(coordinator, "g") == (10, False)

    run(tmp_path, scenario)


def test_a_marker_while_the_partition_loads_resolves_the_loaded_groups(tmp_path: Path) -> None:
    """The load reads the log in a worker thread; a marker appended after its read ended is
    only known by ``on_transaction_completed``, which must reach the groups once installed."""
    group, _ = _groups_on_two_partitions()  # on offsets partition 0

    async def scenario(coordinator: GroupCoordinator) -> None:
        coordinator.on_leadership_change([(OFFSETS_TOPIC, 0)], [])
        await coordinator.manager.wait_for_loads()
        await _commit(coordinator, group, 10)
        coordinator.on_leadership_change([], [(OFFSETS_TOPIC, 0)])
        coordinator.on_leadership_change([(OFFSETS_TOPIC, 0)], [])  # leader again: loading
        assert 0 in coordinator.manager.loading_partitions
        coordinator.on_transaction_completed(PID, [0], True)
        await coordinator.manager.wait_for_loads()
        assert _fetch(coordinator, group) == (10, False)
        # unloading forgets which groups a producer has pending offsets in
        await _commit(coordinator, group, 11)
        assert coordinator.manager.producer_groups == {PID: {group}}
        coordinator.on_leadership_change([], [(OFFSETS_TOPIC, 0)])
        assert coordinator.manager.producer_groups == {}

    run(tmp_path, scenario, cluster_mode=True)
