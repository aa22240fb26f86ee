"""The group coordinator in cluster mode: it answers only for the groups of the offsets
partitions this broker leads, loading a partition when elected and unloading it when it
resigns. Real logs, a real ReplicaManager; leadership is driven through the coordinator's
leadership listener, as the ReplicaManager calls it after a LeaderAndIsr/StopReplica."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path

from strom.broker.admin_manager import AdminManager
from strom.broker.group.coordinator import GroupCoordinator
from strom.broker.group.group_config import GroupConfig
from strom.broker.group.group_metadata import GroupState, JoinResult, OffsetAndMetadata
from strom.broker.group.group_metadata_manager import GroupMetadataManager
from strom.broker.group.offsets_topic import OFFSETS_TOPIC, partition_for
from strom.broker.metadata_cache import MetadataCache
from strom.broker.replica_manager import ReplicaManager
from strom.protocol.error_codes import ErrorCode
from strom.storage.log_manager import LogManager

PARTITIONS = 3
CONFIG = GroupConfig(
    offsets_topic_num_partitions=PARTITIONS,
    group_initial_rebalance_delay_ms=0,
    group_min_session_timeout_ms=10,
    group_max_session_timeout_ms=60000,
)
PROTOCOLS = [("range", b"r")]
TIMEOUT = 30.0


def groups_on(partition: int, count: int = 1) -> list[str]:
    """``count`` group ids whose offsets partition is ``partition``."""
    names = (f"group-{i}" for i in itertools.count())
    return list(itertools.islice((n for n in names if partition_for(n, PARTITIONS) == partition), count))


def run(
    data_dir: Path, scenario: Callable[[GroupCoordinator], Awaitable[None]],
    before_start: Callable[[GroupCoordinator], None] | None = None,
) -> None:
    log_manager = LogManager(str(data_dir), hw_follows_leo=False)
    log_manager.startup()
    replica_manager = ReplicaManager(log_manager, local_broker_id=1)
    replica_manager.startup()
    metadata = MetadataCache()
    admin_manager = AdminManager(metadata, replica_manager, log_manager)
    admin_manager.load()
    if metadata.get(OFFSETS_TOPIC) is None:  # in a cluster the controller's doing; here the local one's
        admin_manager.create_topic(OFFSETS_TOPIC, PARTITIONS, {"cleanup.policy": "compact"})
    manager = GroupMetadataManager(CONFIG, metadata, admin_manager, replica_manager, cluster_mode=True)
    coordinator = GroupCoordinator(CONFIG, manager)
    coordinator.load()  # nothing: in a cluster, partitions load as they are won
    if before_start is not None:
        before_start(coordinator)

    async def main() -> None:
        coordinator.start()
        try:
            await asyncio.wait_for(scenario(coordinator), TIMEOUT)
        finally:
            await coordinator.shutdown()

    try:
        asyncio.run(main())
    finally:
        log_manager.close()


async def elect(coordinator: GroupCoordinator, *partitions: int) -> None:
    """Win ``partitions`` and wait until they are loaded."""
    coordinator.on_leadership_change([(OFFSETS_TOPIC, p) for p in partitions], [])
    await coordinator.manager.wait_for_loads()
    assert all(p in coordinator.manager.owned_partitions for p in partitions)


def resign(coordinator: GroupCoordinator, *partitions: int) -> None:
    coordinator.on_leadership_change([], [(OFFSETS_TOPIC, p) for p in partitions])


def join(coordinator: GroupCoordinator, group: str, member_id: str = "") -> Awaitable[JoinResult]:
    return coordinator.join_group(
        group, member_id, None, "client", "/127.0.0.1", 5000, 10000, "consumer", PROTOCOLS,
        require_known_member_id=True,
    )


async def join_new(coordinator: GroupCoordinator, group: str) -> JoinResult:
    first = await join(coordinator, group)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    return await join(coordinator, group, first.member_id)


async def every_api_answers(coordinator: GroupCoordinator, group: str, expected: ErrorCode) -> None:
    offsets = {("t", 0): OffsetAndMetadata(1, -1, "", 10)}
    assert (await join(coordinator, group)).error_code == expected
    assert (await coordinator.sync_group(group, 1, "m", None, None, None, {})).error_code == expected
    assert coordinator.heartbeat(group, "m", None, 1) == expected
    assert coordinator.leave_group(group, [("m", None)]) == (expected, [])
    assert await coordinator.commit_offsets(group, "", None, -1, offsets) == {("t", 0): expected}
    assert coordinator.fetch_offsets(group, None) == (expected, {})
    assert coordinator.describe_group(group) == (expected, None)
    assert coordinator.delete_groups([group]) == {group: expected}
    assert coordinator.delete_offsets(group, [("t", 0)]) == (expected, {})


def test_no_group_is_served_before_this_broker_leads_its_partition(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        (group,) = groups_on(0)
        await every_api_answers(coordinator, group, ErrorCode.NOT_COORDINATOR)
        assert coordinator.list_groups() == []
        await elect(coordinator, 0)
        assert await coordinator.commit_offsets(group, "", None, -1, {("t", 0): OffsetAndMetadata(1, -1, "", 10)}) == {
            ("t", 0): ErrorCode.NONE}
        (other,) = groups_on(1)
        await every_api_answers(coordinator, other, ErrorCode.NOT_COORDINATOR)

    run(tmp_path, scenario)


def test_groups_load_in_progress_until_the_partition_is_read(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        (group,) = groups_on(2)
        coordinator.on_leadership_change([(OFFSETS_TOPIC, 2)], [])
        await every_api_answers(coordinator, group, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        assert not coordinator.manager.loaded
        await coordinator.manager.wait_for_loads()
        assert coordinator.manager.loaded
        assert coordinator.fetch_offsets(group, None) == (ErrorCode.NONE, {})

    run(tmp_path, scenario)


def test_offsets_and_members_committed_before_a_resignation_come_back_on_reelection(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        await elect(coordinator, 0, 1)
        group, simple = groups_on(1, 2)
        joined = await join_new(coordinator, group)
        synced = await coordinator.sync_group(group, 1, joined.member_id, None, None, None, {joined.member_id: b"A"})
        assert synced.error_code == ErrorCode.NONE
        committed = {("t", 0): OffsetAndMetadata(42, 3, "meta", 10), ("t", 1): OffsetAndMetadata(7, -1, "", 11)}
        assert set((await coordinator.commit_offsets(group, joined.member_id, None, 1, committed)).values()) == {ErrorCode.NONE}
        assert await coordinator.commit_offsets(simple, "", None, -1, {("u", 0): OffsetAndMetadata(5, -1, "", 12)}) == {
            ("u", 0): ErrorCode.NONE}
        (survivor,) = groups_on(0)
        assert await coordinator.commit_offsets(survivor, "", None, -1, committed) == dict.fromkeys(committed, ErrorCode.NONE)

        resign(coordinator, 1)
        assert group not in coordinator.groups and simple not in coordinator.groups
        await every_api_answers(coordinator, group, ErrorCode.NOT_COORDINATOR)
        assert [g.group_id for g in coordinator.list_groups()] == [survivor]  # partition 0 is still ours
        assert coordinator.fetch_offsets(survivor, None) == (ErrorCode.NONE, committed)

        await elect(coordinator, 1)
        assert coordinator.fetch_offsets(group, None) == (ErrorCode.NONE, committed)
        assert coordinator.fetch_offsets(simple, None) == (ErrorCode.NONE, {("u", 0): OffsetAndMetadata(5, -1, "", 12)})
        reloaded = coordinator.groups[group]
        assert reloaded.state is GroupState.STABLE and reloaded.generation_id == 1
        assert reloaded.members[joined.member_id].assignment == b"A"
        assert coordinator.heartbeat(group, joined.member_id, None, 1) == ErrorCode.NONE
        assert sorted(g.group_id for g in coordinator.list_groups()) == sorted([group, simple, survivor])

    run(tmp_path, scenario)


def test_members_waiting_in_join_or_sync_get_not_coordinator_when_the_partition_is_lost(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        await elect(coordinator, 2)
        syncing, joining = groups_on(2, 2)
        # Two members; the follower's SyncGroup waits for the leader's.
        pending = [await join(coordinator, syncing) for _ in range(2)]
        first, second = await asyncio.gather(*(join(coordinator, syncing, p.member_id) for p in pending))
        follower = first if first.member_id != first.leader_id else second
        follower_sync = asyncio.ensure_future(
            coordinator.sync_group(syncing, 1, follower.member_id, None, None, None, {}))
        # One member joined, a second announced (MEMBER_ID_REQUIRED): the first's JoinGroup waits.
        announced = await join(coordinator, joining)
        waiting = await join(coordinator, joining)
        waiting_join = asyncio.ensure_future(join(coordinator, joining, waiting.member_id))
        while not (coordinator.groups[syncing].members[follower.member_id].is_awaiting_sync
                   and coordinator.groups[joining].members.get(waiting.member_id) is not None):
            await asyncio.sleep(0)
        assert not follower_sync.done() and not waiting_join.done()

        resign(coordinator, 2)
        assert (await follower_sync).error_code == ErrorCode.NOT_COORDINATOR
        assert (await waiting_join).error_code == ErrorCode.NOT_COORDINATOR
        assert coordinator.groups == {}
        assert (await join(coordinator, joining, announced.member_id)).error_code == ErrorCode.NOT_COORDINATOR

    run(tmp_path, scenario)


def test_a_resignation_during_the_load_leaves_nothing_and_a_new_election_loads_again(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        (group,) = groups_on(0)
        await elect(coordinator, 0)
        offsets = {("t", 3): OffsetAndMetadata(9, -1, "", 10)}
        assert await coordinator.commit_offsets(group, "", None, -1, offsets) == {("t", 3): ErrorCode.NONE}
        resign(coordinator, 0)
        coordinator.on_leadership_change([(OFFSETS_TOPIC, 0)], [])
        resign(coordinator, 0)  # before the load could finish
        await coordinator.manager.wait_for_loads()
        assert coordinator.groups == {} and not coordinator.manager.owned_partitions
        assert coordinator.fetch_offsets(group, None) == (ErrorCode.NOT_COORDINATOR, {})
        await elect(coordinator, 0)
        assert coordinator.fetch_offsets(group, None) == (ErrorCode.NONE, offsets)

    run(tmp_path, scenario)


def test_a_long_partition_loads_while_the_event_loop_keeps_serving(tmp_path: Path) -> None:
    commits, per_batch = 4000, 200

    async def scenario(coordinator: GroupCoordinator) -> None:
        (group,) = groups_on(1)
        (elsewhere,) = groups_on(0)
        await elect(coordinator, 0, 1)
        for start in range(0, commits, per_batch):
            batch = {("t", p): OffsetAndMetadata(p, -1, "", 10) for p in range(start, start + per_batch)}
            assert set((await coordinator.commit_offsets(group, "", None, -1, batch)).values()) == {ErrorCode.NONE}
        resign(coordinator, 1)
        coordinator.on_leadership_change([(OFFSETS_TOPIC, 1)], [])
        seen_loading: list[bool] = []

        async def other_request() -> None:
            # Served while partition 1 is read: another partition's group answers at once.
            seen_loading.append(1 in coordinator.manager.loading_partitions)
            assert coordinator.fetch_offsets(elsewhere, None) == (ErrorCode.NONE, {})

        await asyncio.gather(other_request(), coordinator.manager.wait_for_loads())
        assert seen_loading == [True]
        error, fetched = coordinator.fetch_offsets(group, None)
        assert error == ErrorCode.NONE and len(fetched) == commits
        assert all(fetched[("t", p)] == OffsetAndMetadata(p, -1, "", 10) for p in range(commits))

    run(tmp_path, scenario)


def test_loaded_members_sessions_run_again(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        (group,) = groups_on(2)
        await elect(coordinator, 2)
        first = await join(coordinator, group)
        joined = await coordinator.join_group(
            group, first.member_id, None, "client", "/127.0.0.1", 5000, 300, "consumer", PROTOCOLS,
            require_known_member_id=True,
        )
        await coordinator.sync_group(group, 1, joined.member_id, None, None, None, {})
        resign(coordinator, 2)
        await elect(coordinator, 2)
        reloaded = coordinator.groups[group]
        assert joined.member_id in reloaded.members
        # No heartbeat: the member's session (300 ms) ends and it leaves the reloaded group.
        while reloaded.members:
            await asyncio.sleep(0.05)
        assert reloaded.state is GroupState.EMPTY

    run(tmp_path, scenario)


def test_a_partition_won_before_the_event_loop_runs_loads_at_once_and_its_sessions_start_with_it(
        tmp_path: Path) -> None:
    (group,) = groups_on(1)
    member_id = ""

    async def first(coordinator: GroupCoordinator) -> None:
        nonlocal member_id
        await elect(coordinator, 1)
        pending = await join(coordinator, group)
        joined = await coordinator.join_group(
            group, pending.member_id, None, "client", "/127.0.0.1", 5000, 300, "consumer", PROTOCOLS,
            require_known_member_id=True,
        )
        assert (await coordinator.sync_group(group, 1, joined.member_id, None, None, None, {})).error_code == 0
        member_id = joined.member_id

    def won_before_start(coordinator: GroupCoordinator) -> None:
        coordinator.on_leadership_change([(OFFSETS_TOPIC, 1)], [])  # no event loop: loaded right here
        assert coordinator.manager.owned_partitions == {1} and not coordinator.manager.loading_partitions
        assert member_id in coordinator.groups[group].members

    async def then(coordinator: GroupCoordinator) -> None:
        reloaded = coordinator.groups[group]
        while reloaded.members:  # its session (300 ms) runs from start(): no heartbeat, it goes
            await asyncio.sleep(0.05)
        assert reloaded.state is GroupState.EMPTY

    run(tmp_path, first)
    run(tmp_path, then, before_start=won_before_start)
