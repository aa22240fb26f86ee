"""Offset commits, plain and transactional, on a replicated ``__consumer_offsets``: pending
from their append (RequireStable sees them unstable) until the follower has them, and a
transactional commit whose replication times out is dropped from the pending ones again
(Kafka's ``failPendingTxnOffsetCommit``).

Real logs, a real ReplicaManager and Partition made leader with a follower by LeaderAndIsr;
the follower is a real Fetch with ``replica_id`` through the ReplicaManager.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from strom.broker.admin_manager import AdminManager
from strom.broker.fetch_session import FetchTarget
from strom.broker.group.coordinator import GroupCoordinator
from strom.broker.group.group_config import GroupConfig
from strom.broker.group.group_metadata import OffsetAndMetadata
from strom.broker.group.group_metadata_manager import GroupMetadataManager
from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.broker.metadata_cache import MetadataCache
from strom.broker.partition import Partition
from strom.broker.replica_manager import LeaderAndIsrPartition, ReplicaManager
from strom.protocol.error_codes import ErrorCode
from strom.storage.log_manager import LogManager
from strom.storage.log_results import FetchIsolation

LEADER, FOLLOWER = 1, 2
CONFIG = GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0,
                     offsets_commit_timeout_ms=30000)
TP = ("t", 0)
OFFSETS = {TP: OffsetAndMetadata(7, -1, "", 10)}
PID, EPOCH = 77, 0
TIMEOUT = 60.0

Scenario = Callable[[GroupCoordinator, Partition, Callable[[], Awaitable[None]]], Awaitable[None]]


def run(tmp_path: Path, scenario: Scenario, config: GroupConfig = CONFIG) -> None:
    log_manager = LogManager(str(tmp_path), hw_follows_leo=False)
    log_manager.startup()
    log_manager.set_topic_config(OFFSETS_TOPIC, {"cleanup.policy": "compact"})
    replica_manager = ReplicaManager(log_manager, local_broker_id=LEADER)
    metadata = MetadataCache()
    admin_manager = AdminManager(metadata, replica_manager, log_manager)
    manager = GroupMetadataManager(config, metadata, admin_manager, replica_manager, cluster_mode=True)
    coordinator = GroupCoordinator(config, manager)
    replica_manager.leadership_listeners.append(coordinator.on_leadership_change)

    async def follower_fetches() -> None:
        """The follower fetches from the leader's log end: the high watermark moves there."""
        partition = replica_manager.get_partition(OFFSETS_TOPIC, 0)
        assert partition is not None
        target = FetchTarget(OFFSETS_TOPIC, uuid.UUID(int=0), 0, partition.log.log_end_offset, 1 << 20)
        await replica_manager.fetch_messages([target], max_bytes=1 << 20, min_bytes=0, max_wait_ms=0,
                                             isolation=FetchIsolation.LOG_END, replica_id=FOLLOWER)

    async def main() -> None:
        coordinator.start()
        try:
            error, _ = replica_manager.become_leader_or_follower(1, [
                LeaderAndIsrPartition(OFFSETS_TOPIC, 0, LEADER, 1, (LEADER, FOLLOWER), (LEADER, FOLLOWER))])
            assert error == ErrorCode.NONE
            await manager.wait_for_loads()
            partition = replica_manager.get_partition(OFFSETS_TOPIC, 0)
            assert partition is not None
            await asyncio.wait_for(scenario(coordinator, partition, follower_fetches), TIMEOUT)
        finally:
            await coordinator.shutdown()

    try:
        asyncio.run(main())
    finally:
        log_manager.close()


async def _appended(partition: Partition, log_end_before: int) -> None:
    while partition.log.log_end_offset <= log_end_before:
        await asyncio.sleep(0.01)


def test_commits_are_unstable_until_replicated_and_txn_ones_until_their_marker(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator, partition: Partition,
                       follower_fetches: Callable[[], Awaitable[None]]) -> None:
        before = partition.log.log_end_offset
        plain = asyncio.create_task(coordinator.commit_offsets("g", "", None, -1, OFFSETS))
        await _appended(partition, before)
        assert coordinator.unstable_offsets("g", [TP, ("t", 1)]) == {TP}  # appended, not replicated
        await follower_fetches()
        assert await plain == {TP: ErrorCode.NONE}
        assert coordinator.unstable_offsets("g", [TP]) == set()

        before = partition.log.log_end_offset
        txn = asyncio.create_task(coordinator.commit_transactional_offsets("g", PID, EPOCH, "", None, -1, OFFSETS))
        await _appended(partition, before)
        assert coordinator.unstable_offsets("g", [TP]) == {TP}
        await follower_fetches()
        assert await txn == {TP: ErrorCode.NONE}
        assert coordinator.unstable_offsets("g", [TP]) == {TP}  # replicated, still in its transaction
        coordinator.on_transaction_completed(PID, [0], False)
        assert coordinator.unstable_offsets("g", [TP]) == set()

    run(tmp_path, scenario)


def test_a_txn_commit_not_replicated_in_time_is_no_longer_pending(tmp_path: Path) -> None:
    config = GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0,
                         offsets_commit_timeout_ms=200)

    async def scenario(coordinator: GroupCoordinator, partition: Partition,
                       follower_fetches: Callable[[], Awaitable[None]]) -> None:
        errors = await coordinator.commit_transactional_offsets("g", PID, EPOCH, "", None, -1, OFFSETS)
        assert errors == {TP: ErrorCode.REQUEST_TIMED_OUT}
        assert coordinator.unstable_offsets("g", [TP]) == set()
        assert coordinator.groups["g"].pending_txn_offsets == {}

    run(tmp_path, scenario, config)
