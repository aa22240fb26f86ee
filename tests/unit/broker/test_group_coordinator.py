"""The classic group state machine, driven directly on an event loop with short timeouts,
over a real log directory (so stored offsets and group metadata reload)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from strom.broker.admin_manager import AdminManager
from strom.broker.group.coordinator import GroupCoordinator
from strom.broker.group.group_config import GroupConfig
from strom.broker.group.group_metadata import GroupState, JoinResult, OffsetAndMetadata
from strom.broker.group.group_metadata_manager import GroupMetadataManager
from strom.broker.metadata_cache import MetadataCache
from strom.broker.replica_manager import ReplicaManager
from strom.protocol.error_codes import ErrorCode
from strom.storage.log_manager import LogManager

CONFIG = GroupConfig(
    offsets_topic_num_partitions=3,
    group_initial_rebalance_delay_ms=0,
    group_min_session_timeout_ms=10,
    group_max_session_timeout_ms=60000,
)
SESSION_MS = 2000
PROTOCOLS = [("range", b"r"), ("roundrobin", b"rr")]


def run(data_dir: Path, scenario: Callable[[GroupCoordinator], Awaitable[None]], config: GroupConfig = CONFIG) -> None:
    log_manager = LogManager(str(data_dir), hw_follows_leo=False)
    log_manager.startup()
    replica_manager = ReplicaManager(log_manager, local_broker_id=0)
    replica_manager.startup()
    metadata = MetadataCache()
    admin_manager = AdminManager(metadata, replica_manager, log_manager)
    admin_manager.load()
    coordinator = GroupCoordinator(config, GroupMetadataManager(config, metadata, admin_manager, replica_manager))
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


def join(
    coordinator: GroupCoordinator, member_id: str = "", *, group: str = "g", instance: str | None = None,
    protocols: list[tuple[str, bytes]] = PROTOCOLS, session_ms: int = SESSION_MS, rebalance_ms: int = 500,
) -> Awaitable[JoinResult]:
    return coordinator.join_group(
        group, member_id, instance, "client", "/127.0.0.1", rebalance_ms, session_ms, "consumer", protocols,
        require_known_member_id=True,
    )


async def join_new(coordinator: GroupCoordinator, **kwargs: object) -> JoinResult:
    first = await join(coordinator, **kwargs)  # type: ignore[arg-type]
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
    return await join(coordinator, first.member_id, **kwargs)  # type: ignore[arg-type]


def test_single_member_joins_syncs_and_heartbeats(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        joined = await join_new(coordinator)
        assert (joined.error_code, joined.generation_id, joined.protocol_name) == (0, 1, "range")
        assert joined.leader_id == joined.member_id
        assert [m[0] for m in joined.members] == [joined.member_id]
        synced = await coordinator.sync_group("g", 1, joined.member_id, None, "consumer", "range", {joined.member_id: b"A"})
        assert (synced.error_code, synced.assignment) == (0, b"A")
        assert coordinator.groups["g"].state is GroupState.STABLE
        assert coordinator.heartbeat("g", joined.member_id, None, 1) == ErrorCode.NONE
        assert coordinator.heartbeat("g", joined.member_id, None, 0) == ErrorCode.ILLEGAL_GENERATION
        assert coordinator.heartbeat("g", "nobody", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
        assert coordinator.heartbeat("other", "x", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID

    run(tmp_path, scenario)


def test_second_member_triggers_rebalance_and_vote(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        first = await join_new(coordinator)
        await coordinator.sync_group("g", 1, first.member_id, None, None, None, {first.member_id: b"all"})
        pending = await join(coordinator)
        second_join = asyncio.ensure_future(join(coordinator, pending.member_id, protocols=[("roundrobin", b"x")]))
        await asyncio.sleep(0.01)
        assert coordinator.heartbeat("g", first.member_id, None, 1) == ErrorCode.REBALANCE_IN_PROGRESS
        first_again = await join(coordinator, first.member_id)
        second = await second_join
        assert first_again.generation_id == second.generation_id == 2
        assert first_again.protocol_name == "roundrobin"  # the only protocol both support
        assert len(first_again.members) == 2 and second.members == ()
        bad = await join(coordinator, protocols=[("sticky", b"")])
        assert bad.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert (await join(coordinator, session_ms=1)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert (await join(coordinator, "ghost")).error_code == ErrorCode.UNKNOWN_MEMBER_ID

    run(tmp_path, scenario)


def test_sync_waits_for_leader_and_rebalance_fails_pending_sync(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        pending_a, pending_b = await join(coordinator), await join(coordinator)
        a, b = await asyncio.gather(join(coordinator, pending_a.member_id), join(coordinator, pending_b.member_id))
        leader, follower = (a, b) if a.member_id == a.leader_id else (b, a)
        follower_sync = asyncio.ensure_future(coordinator.sync_group("g", 1, follower.member_id, None, None, None, {}))
        await asyncio.sleep(0.01)
        assert not follower_sync.done()
        await coordinator.sync_group("g", 1, leader.member_id, None, None, None, {follower.member_id: b"F", leader.member_id: b"L"})
        assert (await follower_sync).assignment == b"F"
        error, errors = coordinator.leave_group("g", [(follower.member_id, None), ("ghost", None)])
        assert (error, errors) == (ErrorCode.NONE, [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID])
        assert coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
        again = await join(coordinator, leader.member_id)
        assert again.generation_id == 2 and len(again.members) == 1

    run(tmp_path, scenario)


def test_session_expiry_removes_member(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        coordinator.ensure_offsets_topic()  # its creation blocks the loop; not within the session
        joined = await join_new(coordinator, session_ms=200)
        await coordinator.sync_group("g", 1, joined.member_id, None, None, None, {})
        for _ in range(6):  # heartbeats keep it
            await asyncio.sleep(0.05)
            assert coordinator.heartbeat("g", joined.member_id, None, 1) == ErrorCode.NONE
        await asyncio.sleep(0.6)
        group = coordinator.groups["g"]
        assert group.members == {} and group.state is GroupState.EMPTY and group.generation_id == 2
        assert coordinator.heartbeat("g", joined.member_id, None, 1) == ErrorCode.UNKNOWN_MEMBER_ID

    run(tmp_path, scenario)


def test_static_member_rejoin_replaces_id_without_rebalance(tmp_path: Path) -> None:
    async def scenario(coordinator: GroupCoordinator) -> None:
        first = await join(coordinator, instance="i-1")
        assert first.error_code == 0 and first.generation_id == 1  # static: no MEMBER_ID_REQUIRED
        await coordinator.sync_group("g", 1, first.member_id, "i-1", None, None, {first.member_id: b"mine"})
        rejoined = await join(coordinator, instance="i-1")
        assert rejoined.error_code == 0 and rejoined.member_id != first.member_id
        assert rejoined.generation_id == 1 and coordinator.groups["g"].state is GroupState.STABLE
        assert coordinator.heartbeat("g", first.member_id, "i-1", 1) == ErrorCode.FENCED_INSTANCE_ID
        synced = await coordinator.sync_group("g", 1, rejoined.member_id, "i-1", None, None, {})
        assert synced.assignment == b"mine"
        changed = asyncio.ensure_future(join(coordinator, instance="i-1", protocols=[("roundrobin", b"")]))
        assert (await changed).generation_id == 2  # a new selected protocol does rebalance
        assert coordinator.leave_group("g", [(first.member_id, "i-1")]) == (ErrorCode.NONE, [ErrorCode.FENCED_INSTANCE_ID])

    run(tmp_path, scenario)


def test_initial_delay_gathers_members_into_one_generation(tmp_path: Path) -> None:
    config = GroupConfig(
        offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=100,
        group_min_session_timeout_ms=10, group_max_session_timeout_ms=60000,
    )

    async def scenario(coordinator: GroupCoordinator) -> None:
        pending = [await join(coordinator) for _ in range(3)]
        first = asyncio.ensure_future(join(coordinator, pending[0].member_id, rebalance_ms=2000))
        await asyncio.sleep(0.05)
        rest = [asyncio.ensure_future(join(coordinator, p.member_id, rebalance_ms=2000)) for p in pending[1:]]
        results = [await first] + [await r for r in rest]
        assert {r.generation_id for r in results} == {1}
        assert sum(1 for r in results if r.members) == 1

    run(tmp_path, scenario, config)


def test_offsets_and_group_survive_reload_and_delete_is_durable(tmp_path: Path) -> None:
    async def commit(coordinator: GroupCoordinator) -> None:
        simple = await coordinator.commit_offsets("simple", "", None, -1, {("t", 0): OffsetAndMetadata(5, 1, "m", 10)})
        assert simple == {("t", 0): ErrorCode.NONE}
        joined = await join_new(coordinator)
        await coordinator.sync_group("g", 1, joined.member_id, None, None, None, {joined.member_id: b"a"})
        offsets = {("t", 0): OffsetAndMetadata(7, -1, "", 10), ("t", 1): OffsetAndMetadata(3, -1, "x" * 5000, 10)}
        result = await coordinator.commit_offsets("g", joined.member_id, None, 1, offsets)
        assert result == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE}
        assert (await coordinator.commit_offsets("g", joined.member_id, None, 9, offsets))[("t", 0)] == ErrorCode.ILLEGAL_GENERATION
        assert (await coordinator.commit_offsets("g", "", None, -1, offsets))[("t", 0)] == ErrorCode.UNKNOWN_MEMBER_ID
        assert coordinator.delete_groups(["g"]) == {"g": ErrorCode.NON_EMPTY_GROUP}

    async def reloaded(coordinator: GroupCoordinator) -> None:
        group = coordinator.groups["g"]
        assert group.state is GroupState.STABLE and group.generation_id == 1
        (member,) = group.members.values()
        assert member.assignment == b"a"
        error, fetched = coordinator.fetch_offsets("g", [("t", 0), ("t", 1)])
        assert error == ErrorCode.NONE
        assert fetched[("t", 0)] is not None and fetched[("t", 0)].offset == 7 and fetched[("t", 1)] is None
        assert coordinator.fetch_offsets("simple", None)[1][("t", 0)] == OffsetAndMetadata(5, 1, "m", 10)
        assert coordinator.delete_groups(["simple", "nope"]) == {"simple": ErrorCode.NONE, "nope": ErrorCode.GROUP_ID_NOT_FOUND}

    async def after_delete(coordinator: GroupCoordinator) -> None:
        assert "simple" not in coordinator.groups
        assert coordinator.fetch_offsets("simple", None) == (ErrorCode.NONE, {})

    run(tmp_path, commit)
    run(tmp_path, reloaded)
    run(tmp_path, after_delete)


def test_offsets_expire_after_retention_and_the_empty_group_goes(tmp_path: Path) -> None:
    retention = CONFIG.offsets_retention_ms

    async def expire(coordinator: GroupCoordinator) -> None:
        committed = {("t", 0): OffsetAndMetadata(5, -1, "", 1_000), ("t", 1): OffsetAndMetadata(6, -1, "", 2_000)}
        assert set((await coordinator.commit_offsets("simple", "", None, -1, committed)).values()) == {ErrorCode.NONE}
        # A group without membership: each offset expires retention after its commit.
        assert coordinator.expire_offsets(1_000 + retention - 1) == 0
        assert coordinator.expire_offsets(1_000 + retention) == 1
        assert coordinator.fetch_offsets("simple", None)[1] == {("t", 1): committed[("t", 1)]}
        assert coordinator.expire_offsets(2_000 + retention) == 1
        assert "simple" not in coordinator.groups or coordinator.groups["simple"].state is GroupState.DEAD

    async def reloaded(coordinator: GroupCoordinator) -> None:
        # The expiry was written to __consumer_offsets: nothing comes back.
        assert coordinator.fetch_offsets("simple", None) == (ErrorCode.NONE, {})

    run(tmp_path, expire)
    run(tmp_path, reloaded)
