"""Offset commits and group metadata on a replicated ``__consumer_offsets``: answered only
once the high watermark covers them (offsets.commit.required.acks=-1), with Kafka 3.9's
mapping of a failed or timed-out append to what the group client sees.

Real logs, a real ReplicaManager and Partition made leader with a follower by LeaderAndIsr;
the follower is a real Fetch with ``replica_id`` read through the ReplicaManager (its
input, not a double of the thing under test).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from strom.broker.admin_manager import AdminManager
from strom.broker.fetch_session import FetchTarget
from strom.broker.group.coordinator import GroupCoordinator
from strom.broker.group.group_config import GroupConfig
from strom.broker.group.group_metadata import GroupState, JoinResult, OffsetAndMetadata
from strom.broker.group.group_metadata_manager import (
    GroupMetadataManager,
    commit_append_error,
    group_append_error,
)
from strom.broker.group.offsets_topic import OFFSETS_TOPIC, partition_for
from strom.broker.metadata_cache import MetadataCache
from strom.broker.partition import Partition
from strom.broker.replica_manager import LeaderAndIsrPartition, ReplicaManager
from strom.protocol.error_codes import ErrorCode
from strom.storage.log_manager import LogManager
from strom.storage.log_results import FetchIsolation

PARTITIONS = 1
LEADER, FOLLOWER = 1, 2
CONFIG = GroupConfig(
    offsets_topic_num_partitions=PARTITIONS,
    group_initial_rebalance_delay_ms=0,
    group_min_session_timeout_ms=10,
    group_max_session_timeout_ms=60000,
    offsets_commit_timeout_ms=30000,
)
TIMEOUT = 60.0
OFFSETS = {("t", 0): OffsetAndMetadata(7, -1, "", 10)}


class Cluster:
    """The coordinator's broker leading the offsets partition, and its follower's fetches."""

    def __init__(self, coordinator: GroupCoordinator, replica_manager: ReplicaManager) -> None:
        self.coordinator = coordinator
        self.replica_manager = replica_manager

    @property
    def partition(self) -> Partition:
        partition = self.replica_manager.get_partition(OFFSETS_TOPIC, 0)
        assert partition is not None
        return partition

    async def follower_fetches(self) -> None:
        """The follower fetches from its log end, which it takes to be the leader's: the
        leader learns the follower has everything and moves the high watermark."""
        log_end = self.partition.log.log_end_offset
        target = FetchTarget(OFFSETS_TOPIC, uuid.UUID(int=0), 0, log_end, 1 << 20)
        await self.replica_manager.fetch_messages([target], max_bytes=1 << 20, min_bytes=0, max_wait_ms=0,
                                                  isolation=FetchIsolation.LOG_END, replica_id=FOLLOWER)

    async def appended(self, log_end_before: int) -> None:
        """Until the leader's log has grown past ``log_end_before``."""
        while self.partition.log.log_end_offset <= log_end_before:
            await asyncio.sleep(0.01)


def run(tmp_path: Path, scenario: Callable[[Cluster], Awaitable[None]], *, config: GroupConfig = CONFIG,
        isr: tuple[int, ...] = (LEADER, FOLLOWER), min_insync_replicas: int = 1) -> None:
    log_manager = LogManager(str(tmp_path), hw_follows_leo=False)
    log_manager.startup()
    # The partition's log is made by the LeaderAndIsr below, as in a cluster (the topic's
    # configs first, as a broker reads them from ZooKeeper before its first log).
    log_manager.set_topic_config(OFFSETS_TOPIC, {"cleanup.policy": "compact",
                                                 "min.insync.replicas": str(min_insync_replicas)})
    replica_manager = ReplicaManager(log_manager, local_broker_id=LEADER)
    metadata = MetadataCache()
    admin_manager = AdminManager(metadata, replica_manager, log_manager)
    manager = GroupMetadataManager(config, metadata, admin_manager, replica_manager, cluster_mode=True)
    coordinator = GroupCoordinator(config, manager)
    replica_manager.leadership_listeners.append(coordinator.on_leadership_change)
    cluster = Cluster(coordinator, replica_manager)

    async def main() -> None:
        coordinator.start()
        try:
            error, errors = replica_manager.become_leader_or_follower(1, [
                LeaderAndIsrPartition(OFFSETS_TOPIC, 0, LEADER, 1, isr, (LEADER, FOLLOWER))])
            assert error == ErrorCode.NONE and errors == {(OFFSETS_TOPIC, 0): ErrorCode.NONE}
            await manager.wait_for_loads()
            await asyncio.wait_for(scenario(cluster), TIMEOUT)
        finally:
            await coordinator.shutdown()

    try:
        asyncio.run(main())
    finally:
        log_manager.close()


def join(coordinator: GroupCoordinator, member_id: str = "") -> Awaitable[JoinResult]:
    return coordinator.join_group("g", member_id, None, "client", "/127.0.0.1", 5000, 10000, "consumer",
                                  [("range", b"r")], require_known_member_id=True)


async def join_new(coordinator: GroupCoordinator) -> JoinResult:
    first = await join(coordinator)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    return await join(coordinator, first.member_id)


def test_a_commit_is_answered_and_applied_once_the_follower_has_it(tmp_path: Path) -> None:
    assert partition_for("g", PARTITIONS) == 0

    async def scenario(cluster: Cluster) -> None:
        coordinator = cluster.coordinator
        before = cluster.partition.log.log_end_offset
        commit = asyncio.create_task(coordinator.commit_offsets("g", "", None, -1, OFFSETS))
        await cluster.appended(before)
        await asyncio.sleep(0.05)  # nothing else would complete it: the follower has not fetched
        assert not commit.done()
        assert cluster.partition.high_watermark == before
        assert coordinator.fetch_offsets("g", None) == (ErrorCode.NONE, {})  # not committed yet
        await cluster.follower_fetches()
        assert await commit == dict.fromkeys(OFFSETS, ErrorCode.NONE)
        assert coordinator.fetch_offsets("g", None) == (ErrorCode.NONE, OFFSETS)

    run(tmp_path, scenario)


def test_a_commit_not_replicated_in_time_is_request_timed_out_and_never_applied(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        coordinator = cluster.coordinator
        before = cluster.partition.log.log_end_offset
        assert await coordinator.commit_offsets("g", "", None, -1, OFFSETS) == dict.fromkeys(
            OFFSETS, ErrorCode.REQUEST_TIMED_OUT)
        assert cluster.partition.log.log_end_offset > before  # appended: its outcome was unknown
        await cluster.follower_fetches()
        assert cluster.partition.high_watermark == cluster.partition.log.log_end_offset
        assert coordinator.fetch_offsets("g", None) == (ErrorCode.NONE, {})  # the answer said it was not

    run(tmp_path, scenario, config=GroupConfig(**{**_fields(CONFIG), "offsets_commit_timeout_ms": 100}))


def test_a_commit_below_min_insync_replicas_is_refused_before_appending(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        before = cluster.partition.log.log_end_offset
        assert await cluster.coordinator.commit_offsets("g", "", None, -1, OFFSETS) == dict.fromkeys(
            OFFSETS, ErrorCode.COORDINATOR_NOT_AVAILABLE)  # NOT_ENOUGH_REPLICAS, as Kafka maps it
        assert cluster.partition.log.log_end_offset == before

    run(tmp_path, scenario, isr=(LEADER,), min_insync_replicas=2)


def test_sync_group_answers_once_the_assignment_is_replicated(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        coordinator = cluster.coordinator
        joined = await join_new(coordinator)
        before = cluster.partition.log.log_end_offset
        sync = asyncio.create_task(coordinator.sync_group("g", 1, joined.member_id, None, None, None,
                                                          {joined.member_id: b"A"}))
        await cluster.appended(before)
        await asyncio.sleep(0.05)
        group = coordinator.groups["g"]
        assert not sync.done()
        assert group.state == GroupState.COMPLETING_REBALANCE
        assert group.members[joined.member_id].assignment == b""  # applied only once stored
        await cluster.follower_fetches()
        synced = await sync
        assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"A")
        assert group.state == GroupState.STABLE

    run(tmp_path, scenario)


def test_sync_group_whose_assignment_times_out_is_rebalance_in_progress(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        coordinator = cluster.coordinator
        joined = await join_new(coordinator)
        synced = await coordinator.sync_group("g", 1, joined.member_id, None, None, None, {joined.member_id: b"A"})
        assert synced.error_code == ErrorCode.REBALANCE_IN_PROGRESS
        assert coordinator.groups["g"].state == GroupState.PREPARING_REBALANCE

    run(tmp_path, scenario, config=GroupConfig(**{**_fields(CONFIG), "offsets_commit_timeout_ms": 100}))


def test_acks_one_answers_after_the_leaders_append(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        assert await cluster.coordinator.commit_offsets("g", "", None, -1, OFFSETS) == dict.fromkeys(
            OFFSETS, ErrorCode.NONE)
        assert cluster.partition.high_watermark < cluster.partition.log.log_end_offset  # the follower lacks it

    run(tmp_path, scenario, config=GroupConfig(**{**_fields(CONFIG), "offsets_commit_required_acks": 1}))


def test_on_one_node_a_commit_completes_without_yielding_to_the_event_loop(tmp_path: Path) -> None:
    """No follower: the log moved the HW inside the append, so the commit's coroutine
    finishes in its first step (the single-node path waits for nothing)."""
    log_manager = LogManager(str(tmp_path), hw_follows_leo=True)
    log_manager.startup()
    replica_manager = ReplicaManager(log_manager, local_broker_id=0)
    replica_manager.startup()
    metadata = MetadataCache()
    admin_manager = AdminManager(metadata, replica_manager, log_manager)
    admin_manager.load()
    coordinator = GroupCoordinator(CONFIG, GroupMetadataManager(CONFIG, metadata, admin_manager, replica_manager))
    coordinator.load()
    try:
        commit = coordinator.commit_offsets("g", "", None, -1, OFFSETS)
        with pytest.raises(StopIteration) as finished:
            commit.send(None)
        assert finished.value.value == dict.fromkeys(OFFSETS, ErrorCode.NONE)
        assert coordinator.fetch_offsets("g", None) == (ErrorCode.NONE, OFFSETS)
    finally:
        log_manager.close()


@pytest.mark.parametrize(("append_error", "commit", "group"), [
    (ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.COORDINATOR_NOT_AVAILABLE,
     ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR),
    (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR),
    (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REBALANCE_IN_PROGRESS),
    (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE, ErrorCode.UNKNOWN_SERVER_ERROR),
    (ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE, ErrorCode.UNKNOWN_SERVER_ERROR),
    (ErrorCode.INVALID_FETCH_SIZE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE, ErrorCode.UNKNOWN_SERVER_ERROR),
    (ErrorCode.CORRUPT_MESSAGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.CORRUPT_MESSAGE),
])
def test_append_errors_map_as_kafka_3_9_group_metadata_manager(
    append_error: ErrorCode, commit: ErrorCode, group: ErrorCode
) -> None:
    """Kafka's ``storeOffsets`` and ``storeGroup`` callbacks: the same table, except a
    timeout (REQUEST_TIMED_OUT for a commit, REBALANCE_IN_PROGRESS for a group) and an
    oversized batch."""
    assert commit_append_error(append_error) == commit
    assert group_append_error(append_error) == group


def _fields(config: GroupConfig) -> dict[str, int]:
    return {name: getattr(config, name) for name in GroupConfig.__dataclass_fields__}
