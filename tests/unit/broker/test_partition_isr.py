"""The leader side of replication on one Partition: Kafka's ISR state machine (a committed
ISR, one pending expansion or shrink at a time, applied only from the controller's answer),
the high watermark over the maximal ISR and caught-up followers, acks=-1's errors.

Real logs on a temp dir; the followers are played by their fetches (``Partition.read``
with a ``replica_id``), the controller by a recorder of AlterPartition proposals whose
answers the test gives, and time by a clock the test moves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from strom.broker.partition import Partition
from strom.broker.partition_state import (
    CommittedPartitionState,
    PartitionState,
    PendingExpandIsr,
    PendingShrinkIsr,
)
from strom.broker.purgatory import DelayedOperationPurgatory
from strom.cluster.zk_data import LeaderAndIsr
from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition
from strom.storage.errors import StorageError
from strom.storage.log_results import FetchIsolation
from tests.support.storage import Clock, batch, open_log

LEADER, F2, F3 = 1, 2, 3
LAG_MS = 10_000
EPOCH = 4
PARTITION_EPOCH = 7


class Controller:
    """Records each proposal; the test answers it (``commit`` or ``refuse``)."""

    def __init__(self) -> None:
        self.proposals: list[tuple[TopicPartition, LeaderAndIsr, asyncio.Future[LeaderAndIsr | ErrorCode]]] = []

    def submit(self, topic_partition: TopicPartition, leader_and_isr: LeaderAndIsr
               ) -> asyncio.Future[LeaderAndIsr | ErrorCode]:
        future: asyncio.Future[LeaderAndIsr | ErrorCode] = asyncio.get_running_loop().create_future()
        self.proposals.append((topic_partition, leader_and_isr, future))
        return future

    @property
    def last(self) -> LeaderAndIsr:
        return self.proposals[-1][1]

    async def commit(self, isr: tuple[int, ...] | None = None, *, leader_epoch: int | None = None) -> None:
        _, sent, future = self.proposals[-1]
        future.set_result(LeaderAndIsr(sent.leader, sent.leader_epoch if leader_epoch is None else leader_epoch,
                                       sent.isr if isr is None else isr, sent.partition_epoch + 1))
        await asyncio.sleep(0)  # the partition's done-callback runs

    async def refuse(self, error: ErrorCode) -> None:
        self.proposals[-1][2].set_result(error)
        await asyncio.sleep(0)


class Leader:
    """A partition led by broker 1 with followers 2 and 3."""

    def __init__(self, directory: Path, *, isr: tuple[int, ...] = (LEADER, F2), min_isr: int = 1,
                 alive: Callable[[int], bool] | None = None, records_before: int = 0) -> None:
        self.clock = Clock(1_000_000)
        self.controller = Controller()
        self.purgatory = DelayedOperationPurgatory("high watermark")
        log = open_log(directory, min_insync_replicas=min_isr)
        if records_before:  # below the HW's reach: the HW stays at 0
            log.hw_follows_leo = False
            log.append(batch(records_before), leader_epoch=EPOCH - 1)
        self.partition = Partition("t", 0, log, LEADER, self.purgatory, replica_lag_time_max_ms=LAG_MS,
                                   alter_partition=self.controller, is_broker_alive=alive, clock_ms=self.clock)
        self.partition.make_leader(EPOCH, (LEADER, F2, F3), frozenset(isr), PARTITION_EPOCH)

    def append(self, count: int = 1, acks: int = 1) -> int:
        return self.partition.append_as_leader(batch(count), acks).last_offset

    def fetch(self, replica_id: int, offset: int) -> None:
        self.partition.read(offset, 1 << 20, FetchIsolation.LOG_END, replica_id)

    @property
    def hw(self) -> int:
        return self.partition.high_watermark

    @property
    def leo(self) -> int:
        return self.partition.log.log_end_offset


def state(partition: Partition) -> PartitionState:
    """The partition's ISR state, read afresh (not narrowed by an earlier isinstance)."""
    return partition.partition_state


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]


def test_the_hw_waits_for_the_isr_but_not_for_a_follower_outside_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader = Leader(tmp_path)
        leader.append(5)
        assert leader.hw == 0  # follower 2 (ISR) has not fetched yet
        leader.fetch(F2, 5)
        assert leader.hw == 5, "follower 3 is outside the ISR and never caught up: it holds nothing back"
        leader.fetch(F3, 0)
        leader.append(2)
        assert leader.hw == 5
        leader.fetch(F2, 7)
        assert leader.hw == 7
    run(scenario)


def test_a_follower_at_the_hw_and_the_epoch_start_is_proposed_and_counted_at_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader = Leader(tmp_path)
        partition, controller = leader.partition, leader.controller
        leader.append(5)
        leader.fetch(F2, 5)
        leader.fetch(F3, 3)  # below the HW: not yet
        assert controller.proposals == []
        leader.fetch(F3, 5)
        assert len(controller.proposals) == 1
        assert controller.last == LeaderAndIsr(LEADER, EPOCH, (LEADER, F2, F3), PARTITION_EPOCH)
        assert isinstance(partition.partition_state, PendingExpandIsr)
        assert partition.isr == {LEADER, F2} and partition.maximal_isr == {LEADER, F2, F3}
        # The pending member already holds the HW back (waiting for more is safe) ...
        leader.append(3)
        leader.fetch(F2, 8)
        assert leader.hw == 5
        # ... and no second change goes out while one is in flight.
        leader.clock.now += 10 * LAG_MS
        assert not partition.maybe_shrink_isr()
        await controller.commit()
        assert state(partition) == CommittedPartitionState(frozenset({LEADER, F2, F3}))
        assert partition.partition_epoch == PARTITION_EPOCH + 1
        leader.fetch(F3, 8)
        assert leader.hw == 8
    run(scenario)


def test_a_follower_below_the_leader_epoch_start_does_not_join_kafka_7128(tmp_path: Path) -> None:
    async def scenario() -> None:
        # Five records from the previous epoch: this epoch starts at 5, the HW is still 0.
        leader = Leader(tmp_path, isr=(LEADER,), records_before=5)
        assert leader.partition.leader_epoch_start_offset == 5
        leader.fetch(F2, 3)
        assert leader.controller.proposals == [], "at the HW but short of the epoch start"
        leader.fetch(F2, 5)
        assert leader.controller.last.isr == (LEADER, F2)
    run(scenario)


def test_a_caught_up_follower_outside_the_isr_holds_the_hw_so_it_can_join(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader = Leader(tmp_path, alive=lambda broker_id: broker_id != F3)
        leader.append(4)
        leader.fetch(F2, 4)
        leader.fetch(F3, 4)  # caught up to the leader's LEO now, but not ISR-eligible (not alive)
        assert leader.controller.proposals == []
        leader.append(2)
        leader.fetch(F2, 6)
        assert leader.hw == 6, "an ineligible replica holds nothing back"

    async def eligible() -> None:
        leader = Leader(tmp_path / "eligible")
        leader.append(4)
        leader.fetch(F2, 4)
        leader.partition.alter_partition = None  # no proposals: watch the HW rule alone
        leader.fetch(F3, 2)
        leader.fetch(F3, 4)  # caught up (fetched at the leader's LEO) within the lag time
        leader.append(2)
        leader.fetch(F2, 6)
        assert leader.hw == 4, "a caught-up follower outside the ISR holds the HW back"
        leader.clock.now += LAG_MS + 1
        leader.fetch(F2, 6)
        leader.append(1)
        leader.fetch(F2, 7)
        assert leader.hw == 7, "once it has lagged for the lag time, it no longer does"
    run(scenario)
    run(eligible)


def test_a_lagging_follower_is_shrunk_only_once_the_controller_commits(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader = Leader(tmp_path)
        partition, controller = leader.partition, leader.controller
        leader.append(3)
        leader.fetch(F2, 3)
        assert leader.hw == 3
        leader.append(2)
        leader.clock.now += LAG_MS
        assert not partition.maybe_shrink_isr(), "exactly the lag time is not past it"
        leader.clock.now += 1
        waiter = asyncio.create_task(leader.purgatory.wait([("t", 0)], 30))
        await asyncio.sleep(0)
        assert partition.maybe_shrink_isr()
        assert controller.last == LeaderAndIsr(LEADER, EPOCH, (LEADER,), PARTITION_EPOCH)
        assert isinstance(partition.partition_state, PendingShrinkIsr)
        assert partition.maximal_isr == {LEADER, F2}
        partition.maybe_advance_high_watermark()
        assert leader.hw == 3, "a pending shrink still waits for the leaver"
        await controller.commit()
        assert partition.isr == {LEADER} and leader.hw == 5
        assert await waiter, "the HW's move woke the purgatory"
    run(scenario)


def test_caught_up_time_follows_kafkas_rule(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader = Leader(tmp_path)
        partition = leader.partition
        leader.append(3)
        leader.fetch(F2, 3)  # at the leader's LEO: caught up now
        start = leader.clock.now
        assert partition.followers[F2].last_caught_up_ms == start
        leader.append(2)  # LEO 5
        leader.clock.now += 1_000
        leader.fetch(F2, 3)  # behind 5, but at the LEO (3) of its previous fetch: caught up as of then
        assert partition.followers[F2].last_caught_up_ms == start
        leader.append(1)  # LEO 6
        leader.clock.now += 1_000
        leader.fetch(F2, 5)  # past the LEO (5) of its previous fetch: caught up as of that fetch
        assert partition.followers[F2].last_caught_up_ms == start + 1_000
        # A follower with the leader's LEO is never out of sync, however long ago it caught up.
        leader.fetch(F2, 6)
        leader.clock.now += 10 * LAG_MS
        assert partition.out_of_sync_replicas(leader.clock.now, LAG_MS) == frozenset()
        leader.append(1)
        assert partition.out_of_sync_replicas(leader.clock.now, LAG_MS) == {F2}
    run(scenario)


@pytest.mark.parametrize("error", [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                                   ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
def test_a_refusal_from_a_newer_state_waits_for_the_controllers_leader_and_isr(tmp_path: Path,
                                                                                error: ErrorCode) -> None:
    async def scenario() -> None:
        leader = Leader(tmp_path)
        partition, controller = leader.partition, leader.controller
        leader.append(2)
        leader.clock.now += LAG_MS + 1
        assert partition.maybe_shrink_isr()
        await controller.refuse(error)
        assert isinstance(partition.partition_state, PendingShrinkIsr), "still pending: retrying cannot help"
        assert not partition.maybe_shrink_isr() and len(controller.proposals) == 1
        partition.make_leader(EPOCH + 1, (LEADER, F2, F3), frozenset({LEADER}), PARTITION_EPOCH + 3)
        assert state(partition) == CommittedPartitionState(frozenset({LEADER}))
    run(scenario)


def test_not_attempted_returns_to_the_committed_state_and_other_errors_are_retried(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader = Leader(tmp_path)
        partition, controller = leader.partition, leader.controller
        leader.append(2)
        leader.clock.now += LAG_MS + 1
        assert partition.maybe_shrink_isr()
        await controller.refuse(ErrorCode.OPERATION_NOT_ATTEMPTED)
        assert partition.partition_state == CommittedPartitionState(frozenset({LEADER, F2}))
        assert partition.maybe_shrink_isr()  # free to propose again
        await controller.refuse(ErrorCode.UNKNOWN_SERVER_ERROR)
        assert isinstance(partition.partition_state, PendingShrinkIsr)
        deadline = asyncio.get_running_loop().time() + 30
        while len(controller.proposals) < 3:  # sent again after a backoff
            assert asyncio.get_running_loop().time() < deadline, "the proposal was never retried"
            await asyncio.sleep(0.01)
        assert controller.proposals[2][1] == controller.proposals[1][1]
        await controller.commit()
        assert partition.isr == {LEADER}
    run(scenario)


def test_an_answer_for_a_replaced_or_stale_state_is_ignored(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader = Leader(tmp_path)
        partition, controller = leader.partition, leader.controller
        leader.append(2)
        leader.clock.now += LAG_MS + 1
        assert partition.maybe_shrink_isr()
        partition.make_leader(EPOCH + 1, (LEADER, F2, F3), frozenset({LEADER, F2, F3}), PARTITION_EPOCH + 1)
        await controller.commit()
        assert partition.isr == {LEADER, F2, F3}, "LeaderAndIsr replaced the proposal; its answer is stale"
        # An answer carrying another leader epoch is not applied either.
        leader.clock.now += LAG_MS + 1
        assert partition.maybe_shrink_isr()
        await controller.commit(leader_epoch=EPOCH)
        assert isinstance(partition.partition_state, PendingShrinkIsr)
    run(scenario)


def test_acks_all_counts_the_committed_isr_before_and_the_maximal_isr_after_appending(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader = Leader(tmp_path, isr=(LEADER,), min_isr=2)
        partition, controller = leader.partition, leader.controller
        with pytest.raises(StorageError) as refused:
            leader.append(1, acks=-1)
        assert refused.value.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        leader.append(1, acks=1)
        assert leader.hw == 0, "below min.insync.replicas the HW does not move (KAFKA-15583)"
        leader.fetch(F2, 1)  # joins: proposed, not committed
        assert isinstance(partition.partition_state, PendingExpandIsr)
        with pytest.raises(StorageError) as still:
            leader.append(1, acks=-1)
        assert still.value.error_code == ErrorCode.NOT_ENOUGH_REPLICAS, "a pending expansion is not committed"
        await controller.commit()
        last = leader.append(1, acks=-1)
        assert partition.check_enough_replicas_reach_offset(last + 1) == (False, ErrorCode.NONE)
        leader.fetch(F2, leader.leo)
        assert partition.check_enough_replicas_reach_offset(last + 1) == (True, ErrorCode.NONE)
        # F2 lags: while its removal is pending the maximal ISR still has two ...
        leader.append(1, acks=1)
        leader.clock.now += LAG_MS + 1
        assert partition.maybe_shrink_isr()
        assert partition.check_enough_replicas_reach_offset(last + 1) == (True, ErrorCode.NONE)
        # ... once committed, a produce already replicated is under-replicated.
        await controller.commit()
        assert partition.check_enough_replicas_reach_offset(last + 1) == (
            True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    run(scenario)


def test_without_a_controller_to_ask_nothing_is_proposed(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader = Leader(tmp_path)
        leader.partition.alter_partition = None
        leader.append(2)
        leader.fetch(F3, 2)
        leader.clock.now += LAG_MS + 1
        assert not leader.partition.maybe_shrink_isr()
        assert leader.partition.partition_state == CommittedPartitionState(frozenset({LEADER, F2}))
    run(scenario)


def test_a_follower_keeps_no_isr_and_drops_a_pending_change(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader = Leader(tmp_path)
        partition = leader.partition
        leader.append(1)
        leader.clock.now += LAG_MS + 1
        assert partition.maybe_shrink_isr()
        partition.make_follower(F2, EPOCH + 1, (LEADER, F2, F3), frozenset({F2, F3}), PARTITION_EPOCH + 1)
        assert partition.partition_state == CommittedPartitionState(frozenset())
        assert partition.leader_epoch_start_offset is None and partition.followers == {}
        await leader.controller.commit()
        assert partition.isr == frozenset()
    run(scenario)


def test_a_follower_asking_for_the_latest_offset_gets_the_log_end_not_the_high_watermark(tmp_path: Path) -> None:
    """Kafka answers a replica's ListOffsets with isolation level None: the log end offset.
    A follower ahead of a new leader then truncates to the leader's log end, not its HW."""
    leader = Leader(tmp_path)
    leader.partition.append_as_leader(batch(3), required_acks=1)
    log = leader.partition.log
    assert log.high_watermark < log.log_end_offset == 3  # follower 2 (in the ISR) has not fetched
    assert leader.partition.fetch_offset_for_timestamp(-1, False, client=False).offset == 3
    found = leader.partition.fetch_offset_for_timestamp(-1, False, client=True)
    assert found is not None and found.offset == log.high_watermark
