"""A follower copying a leader: two real cluster-mode ``Broker`` objects in one event loop.

Broker 1 leads and listens on loopback (its real ``SocketServer``); broker 2 follows
through its own ``ReplicaFetcherManager``, which connects to broker 1 as any follower
would (Fetch v12 with its replica id, ListOffsets). Neither talks to ZooKeeper: the
controller's word is applied by hand, as the LeaderAndIsr and UpdateMetadata handlers
apply it (``Partition.make_leader``/``make_follower``, ``MetadataCache.update_metadata``),
and the partitions are handed to the manager as the ReplicaManager's wiring will.

Logs that must end up the same are compared byte for byte: the follower keeps the
leader's offsets, epochs, producer fields and CRCs. Every wait is on a condition, with a
generous bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from strom.broker.broker import Broker
from strom.broker.config import BrokerConfig
from strom.broker.metadata_cache import BrokerEndpoint, LiveBroker, PartitionState
from strom.broker.partition import Partition
from strom.broker.replica_fetch_state import InitialFetchState
from strom.broker.replica_fetcher_manager import (
    ReplicaFetcherManager,
    fetcher_index,
    initial_fetch_state,
)
from strom.broker.server import SocketServer
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from strom.storage.log import Log
from strom.storage.log_results import FetchIsolation
from tests.support.broker_harness import MEMORY_DIR, TEST_PROPERTIES, BrokerHarness, batch

LEADER, FOLLOWER = 1, 2
TOPIC = "replicated"
TP = (TOPIC, 0)
WAIT_S = 60.0  # generous: a loaded two-core machine
FAST = {
    "replica.fetch.backoff.ms": "20",
    "replica.fetch.wait.max.ms": "100",  # long polls end soon, so shutdown is quick
    "replica.socket.timeout.ms": "30000",
}
values = (f"value-{i}".encode() for i in itertools.count())


@dataclass
class Pair:
    leader: Broker
    follower: Broker
    leader_port: int
    manager: ReplicaFetcherManager

    @property
    def leader_log(self) -> Log:
        return self.leader.replica_manager.partitions[TP].log

    @property
    def follower_log(self) -> Log:
        return self.follower.replica_manager.partitions[TP].log

    def publish_brokers(self, *broker_ids: int) -> None:
        """UpdateMetadata on the follower: these brokers are alive (the leader at its port)."""
        live = [LiveBroker(b, (BrokerEndpoint("127.0.0.1", self.leader_port if b == LEADER else 1),))
                for b in broker_ids]
        state = PartitionState(LEADER, 0, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
        self.follower.metadata.update_metadata(LEADER, live, [(TP, state)])

    async def produce(self, count: int, acks: int = -1) -> int:
        """``count`` one-record batches through the leader's Produce handler; the last offset."""
        harness = BrokerHarness(self.leader)
        last = -1
        for _ in range(count):
            request = ProduceRequest(acks=acks, timeout_ms=int(WAIT_S * 1000), topic_data=(
                TopicProduceData(TOPIC, (PartitionProduceData(0, batch([next(values)])),)),))
            response = await harness.request(request, version=9)
            (answer,) = response.responses[0].partition_responses
            assert answer.error_code == ErrorCode.NONE, answer.error_message
            last = answer.base_offset
        return last


def lead(broker: Broker, epoch: int, isr: tuple[int, ...] = (LEADER, FOLLOWER)) -> Partition:
    partition = broker.replica_manager.host_replica(*TP)
    partition.make_leader(epoch, (LEADER, FOLLOWER), frozenset(isr))
    return partition


def follow(broker: Broker, epoch: int) -> Partition:
    partition = broker.replica_manager.host_replica(*TP)
    partition.make_follower(LEADER, epoch, (LEADER, FOLLOWER), frozenset({LEADER, FOLLOWER}))
    return partition


def log_bytes(log: Log) -> bytes:
    """Every byte of the log from its start to its end, as a follower would fetch it."""
    found = log.read(log.log_start_offset, 2**31 - 1, isolation=FetchIsolation.LOG_END)
    return b"" if found.region is None else found.region.read(log.fs)


def append_as_leader(log: Log, epoch: int, count: int) -> None:
    """Records a broker wrote while it led at ``epoch`` (before the test's leadership)."""
    log.leader_epoch_cache.assign(epoch, log.log_end_offset)
    for _ in range(count):
        log.append(batch([next(values)]), leader_epoch=epoch)


async def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def brokers(tmp_path: Path, properties: Mapping[str, str]) -> AsyncIterator[Pair]:
    root = Path(tempfile.mkdtemp(prefix="strom-fetcher-", dir=MEMORY_DIR)) if MEMORY_DIR.is_dir() else tmp_path
    started: list[Broker] = []
    server = None
    manager = None
    try:
        def make(broker_id: int) -> Broker:
            data_dir = root / f"broker-{broker_id}"
            data_dir.mkdir()
            config = BrokerConfig.from_properties({
                **TEST_PROPERTIES, **FAST, **properties, "log.dirs": str(data_dir), "node.id": str(broker_id),
                "zookeeper.connect": "127.0.0.1:1/never-contacted", "listeners": "PLAINTEXT://127.0.0.1:0"})
            broker = Broker(config)
            broker.startup()
            started.append(broker)
            return broker

        leader, follower = make(LEADER), make(FOLLOWER)
        server = SocketServer(leader)
        await server.start()
        manager = ReplicaFetcherManager(follower.replica_manager, follower.metadata, follower.config, FOLLOWER,
                                        lambda: 1)
        pair = Pair(leader, follower, server.port, manager)
        yield pair
    finally:
        if manager is not None:
            await manager.shutdown()
        if server is not None:
            await server.stop()
        for broker in started:
            await broker.shutdown()
        if root != tmp_path:
            shutil.rmtree(root, ignore_errors=True)


def run(scenario: Callable[[Pair], Awaitable[None]], tmp_path: Path, properties: Mapping[str, str] | None = None
        ) -> None:
    async def main() -> None:
        async with brokers(tmp_path, properties or {}) as pair:
            await scenario(pair)

    asyncio.run(main())


def test_the_follower_copies_the_log_and_acks_all_completes(tmp_path: Path) -> None:
    async def scenario(pair: Pair) -> None:
        lead(pair.leader, 1)
        follow(pair.follower, 1)
        pair.publish_brokers(LEADER, FOLLOWER)
        pair.manager.add_partitions({TP: InitialFetchState(LEADER, 1, 0)})
        # acks=-1 answers only once the follower's fetches carry the leader's HW past it.
        assert await pair.produce(5) == 4
        assert pair.leader_log.high_watermark == 5
        await wait_until(lambda: pair.follower_log.high_watermark == 5, "the follower learns the HW")
        assert log_bytes(pair.follower_log) == log_bytes(pair.leader_log)
        assert pair.follower_log.leader_epoch_cache.entries == pair.leader_log.leader_epoch_cache.entries
        fetcher = pair.manager.fetcher_for(TP)
        assert fetcher is not None and fetcher.source_broker_id == LEADER

    run(scenario, tmp_path)


def test_a_diverging_tail_is_truncated_and_replaced(tmp_path: Path) -> None:
    """KIP-101/KIP-595: the follower led at epoch 0 and wrote 2 records the leader never got;
    the leader's epoch 0 ends at 3 and its epoch 1 begins there."""
    async def scenario(pair: Pair) -> None:
        follower_log = pair.follower.replica_manager.host_replica(*TP).log
        leader_log = pair.leader.replica_manager.host_replica(*TP).log
        append_as_leader(leader_log, 0, 3)
        follower_log.append_as_follower(log_bytes(leader_log))  # the 3 records both have
        append_as_leader(follower_log, 0, 2)  # and 2 only the follower has, at offsets 3 and 4
        lead(pair.leader, 1)
        await pair.produce(4, acks=1)  # epoch 1 at offsets 3..6 on the leader
        follow(pair.follower, 1)
        pair.publish_brokers(LEADER, FOLLOWER)
        assert follower_log.log_end_offset == 5
        pair.manager.add_partitions({TP: InitialFetchState(LEADER, 1, follower_log.log_end_offset)})
        await wait_until(lambda: follower_log.log_end_offset == leader_log.log_end_offset == 7
                         and follower_log.high_watermark == 7, "the follower catches up")
        assert log_bytes(follower_log) == log_bytes(leader_log)
        assert follower_log.leader_epoch_cache.entries == leader_log.leader_epoch_cache.entries

    run(scenario, tmp_path)


def test_an_epoch_the_leader_never_had_is_cut_back_in_two_steps(tmp_path: Path) -> None:
    """KIP-279: the follower has epochs 0 and 2, the leader 0 and 1 (and leads at 3)."""
    async def scenario(pair: Pair) -> None:
        follower_log = pair.follower.replica_manager.host_replica(*TP).log
        leader_log = pair.leader.replica_manager.host_replica(*TP).log
        append_as_leader(leader_log, 0, 3)
        follower_log.append_as_follower(log_bytes(leader_log))
        append_as_leader(leader_log, 1, 2)  # offsets 3, 4 at epoch 1: the follower never saw them
        append_as_leader(follower_log, 2, 3)  # offsets 3..5 at epoch 2: the leader never saw them
        lead(pair.leader, 3)
        await pair.produce(2, acks=1)  # offsets 5, 6 at epoch 3
        follow(pair.follower, 3)
        pair.publish_brokers(LEADER, FOLLOWER)
        pair.manager.add_partitions({TP: InitialFetchState(LEADER, 3, follower_log.log_end_offset)})
        await wait_until(lambda: follower_log.log_end_offset == 7 and follower_log.high_watermark == 7,
                         "the follower catches up")
        assert log_bytes(follower_log) == log_bytes(leader_log)
        assert [e.epoch for e in follower_log.leader_epoch_cache.entries] == [0, 1, 3]

    run(scenario, tmp_path)


def test_a_follower_behind_the_leaders_log_start_starts_over_there(tmp_path: Path) -> None:
    """OFFSET_OUT_OF_RANGE: the leader deleted records the empty follower still lacks."""
    async def scenario(pair: Pair) -> None:
        partition = lead(pair.leader, 1, isr=(LEADER,))  # alone in the ISR: its HW is its end
        await pair.produce(10, acks=1)
        assert pair.leader_log.high_watermark == 10
        partition.delete_records_on_leader(8)
        follow(pair.follower, 1)
        pair.publish_brokers(LEADER, FOLLOWER)
        pair.manager.add_partitions({TP: InitialFetchState(LEADER, 1, 0)})
        await wait_until(lambda: pair.follower_log.log_end_offset == 10, "the follower catches up")
        assert pair.follower_log.log_start_offset == 8
        assert log_bytes(pair.follower_log) == log_bytes(pair.leader_log)

    run(scenario, tmp_path)


def test_a_follower_ahead_of_the_leader_truncates_to_its_end(tmp_path: Path) -> None:
    """OFFSET_OUT_OF_RANGE the other way (an unclean election): the follower's log, written
    without leader epochs so the leader cannot tell it diverges, ends past the leader's."""
    async def scenario(pair: Pair) -> None:
        follower_log = pair.follower.replica_manager.host_replica(*TP).log
        for _ in range(5):
            follower_log.append(batch([next(values)]))  # no leader epoch
        assert follower_log.latest_epoch == -1
        lead(pair.leader, 1, isr=(LEADER,))
        await pair.produce(3, acks=1)
        follow(pair.follower, 1)
        pair.publish_brokers(LEADER, FOLLOWER)
        pair.manager.add_partitions({TP: InitialFetchState(LEADER, 1, follower_log.log_end_offset)})
        await wait_until(lambda: follower_log.log_end_offset == 3, "the follower truncates to the leader's end")
        await pair.produce(1, acks=1)
        await wait_until(lambda: follower_log.log_end_offset == 4, "the follower fetches the next record")
        leader_tail = pair.leader_log.read(3, 2**20, isolation=FetchIsolation.LOG_END).region
        follower_tail = follower_log.read(3, 2**20, isolation=FetchIsolation.LOG_END).region
        assert leader_tail is not None and follower_tail is not None
        assert follower_tail.read(follower_log.fs) == leader_tail.read(pair.leader_log.fs)

    run(scenario, tmp_path)


def test_a_fenced_follower_waits_for_the_controller_then_resumes(tmp_path: Path) -> None:
    async def scenario(pair: Pair) -> None:
        lead(pair.leader, 2)
        await pair.produce(3, acks=1)
        follow(pair.follower, 1)  # the follower has not heard of epoch 2 yet
        pair.publish_brokers(LEADER, FOLLOWER)
        pair.manager.add_partitions({TP: InitialFetchState(LEADER, 1, 0)})
        await wait_until(lambda: TP in pair.manager.failed_partitions, "FENCED_LEADER_EPOCH fails the partition")
        assert pair.manager.fetcher_for(TP) is None
        assert pair.follower_log.log_end_offset == 0
        follow(pair.follower, 2)  # the controller's LeaderAndIsr arrives
        pair.manager.add_partitions({TP: InitialFetchState(LEADER, 2, 0)})
        assert TP not in pair.manager.failed_partitions
        await wait_until(lambda: pair.follower_log.log_end_offset == 3, "the follower catches up")
        assert log_bytes(pair.follower_log) == log_bytes(pair.leader_log)

    run(scenario, tmp_path)


def test_a_local_disk_failure_fails_the_partition(tmp_path: Path) -> None:
    async def scenario(pair: Pair) -> None:
        lead(pair.leader, 1, isr=(LEADER,))
        follow(pair.follower, 1)
        pair.follower_log.offline = True  # what a failed fdatasync leaves: appends refuse
        pair.publish_brokers(LEADER, FOLLOWER)
        pair.manager.add_partitions({TP: InitialFetchState(LEADER, 1, 0)})
        await pair.produce(1, acks=1)
        await wait_until(lambda: TP in pair.manager.failed_partitions, "the append fails the partition")
        assert pair.manager.fetcher_for(TP) is None and pair.follower_log.log_end_offset == 0

    run(scenario, tmp_path)


def test_a_leader_not_yet_in_the_metadata_is_fetched_once_it_is(tmp_path: Path) -> None:
    async def scenario(pair: Pair) -> None:
        lead(pair.leader, 1)
        await pair.produce(2, acks=1)
        follow(pair.follower, 1)
        pair.publish_brokers(FOLLOWER)  # LeaderAndIsr before the UpdateMetadata naming the leader
        pair.manager.add_partitions({TP: InitialFetchState(LEADER, 1, 0)})
        fetcher = pair.manager.fetcher_for(TP)
        assert fetcher is not None
        await wait_until(lambda: fetcher.partitions[TP].delayed_until > 0, "the partition backs off")
        assert pair.follower_log.log_end_offset == 0
        pair.publish_brokers(LEADER, FOLLOWER)
        await wait_until(lambda: pair.follower_log.log_end_offset == 2, "the follower catches up")

    run(scenario, tmp_path)


def test_partitions_move_between_fetchers_and_idle_fetchers_stop(tmp_path: Path) -> None:
    async def scenario(pair: Pair) -> None:
        lead(pair.leader, 1)
        follow(pair.follower, 1)
        pair.publish_brokers(LEADER, FOLLOWER)
        manager = pair.manager
        manager.add_partitions({TP: InitialFetchState(LEADER, 1, 0)})
        assert [key[0] for key in manager.fetchers] == [LEADER]
        await pair.produce(1)
        # A new leader (broker 3, not reachable): the partition leaves broker 1's fetcher,
        # which has nothing left and stops.
        pair.follower.replica_manager.partitions[TP].make_follower(3, 2, (LEADER, FOLLOWER, 3), frozenset({3}))
        manager.add_partitions({TP: InitialFetchState(3, 2, 1)})
        assert [key[0] for key in manager.fetchers] == [3]
        fetcher = manager.fetcher_for(TP)
        assert fetcher is not None and fetcher.source_broker_id == 3
        manager.remove_partitions([TP])
        assert manager.fetchers == {} and manager.fetcher_for(TP) is None
        assert pair.follower_log.log_end_offset == 1

    run(scenario, tmp_path)


def test_where_a_new_follower_starts_and_an_offline_partition_is_fetched_by_none(tmp_path: Path) -> None:
    async def scenario(pair: Pair) -> None:
        partition = follow(pair.follower, 1)
        log = partition.log
        for _ in range(3):
            log.append(batch([next(values)]))  # no epochs: from the high watermark (0)
        assert initial_fetch_state(partition) == InitialFetchState(LEADER, 1, 0)
        append_as_leader(log, 0, 2)  # with epochs: from the log end
        assert initial_fetch_state(partition) == InitialFetchState(LEADER, 1, 5)
        pair.manager.add_partitions({TP: InitialFetchState(LEADER, 1, 5)})
        assert pair.manager.fetcher_for(TP) is not None
        pair.manager.add_partitions({TP: InitialFetchState(-1, 2, 5)})
        assert pair.manager.fetcher_for(TP) is None and pair.manager.fetchers == {}

    run(scenario, tmp_path)


def test_num_replica_fetchers_spreads_a_leaders_partitions(tmp_path: Path) -> None:
    """Two partitions on different fetchers of the same leader both replicate."""
    async def scenario(pair: Pair) -> None:
        config = dataclasses.replace(pair.follower.config, num_replica_fetchers=2)
        manager = ReplicaFetcherManager(pair.follower.replica_manager, pair.follower.metadata, config,
                                        FOLLOWER, lambda: 1, listener_name="PLAINTEXT")
        other = next((TOPIC, i) for i in range(1, 64) if fetcher_index((TOPIC, i), 2) != fetcher_index(TP, 2))
        try:
            for tp in (TP, other):
                pair.leader.replica_manager.host_replica(*tp).make_leader(1, (LEADER, FOLLOWER),
                                                                           frozenset({LEADER, FOLLOWER}))
                pair.follower.replica_manager.host_replica(*tp).make_follower(
                    LEADER, 1, (LEADER, FOLLOWER), frozenset({LEADER, FOLLOWER}))
            pair.publish_brokers(LEADER, FOLLOWER)
            manager.add_partitions({tp: InitialFetchState(LEADER, 1, 0) for tp in (TP, other)})
            assert sorted(manager.fetchers) == [(LEADER, 0), (LEADER, 1)]
            harness = BrokerHarness(pair.leader)
            for tp in (TP, other):
                request = ProduceRequest(acks=-1, timeout_ms=int(WAIT_S * 1000), topic_data=(
                    TopicProduceData(TOPIC, (PartitionProduceData(tp[1], batch([next(values)])),)),))
                response = await harness.request(request, version=9)
                assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            follower_logs = [pair.follower.replica_manager.partitions[tp].log for tp in (TP, other)]
            await wait_until(lambda: all(log.high_watermark == 1 for log in follower_logs), "both replicate")
        finally:
            await manager.shutdown()

    run(scenario, tmp_path)


def test_a_removed_partition_is_not_written_by_an_answer_in_flight(tmp_path: Path) -> None:
    """The follower becomes leader of ``TP`` while a long-polling fetch for it and ``OTHER``
    is out; the answer carrying ``TP``'s new record is not appended here."""
    other = (TOPIC, 1)

    async def scenario(pair: Pair) -> None:
        for tp in (TP, other):
            pair.leader.replica_manager.host_replica(*tp).make_leader(1, (LEADER, FOLLOWER), frozenset({LEADER}))
            pair.follower.replica_manager.host_replica(*tp).make_follower(
                LEADER, 1, (LEADER, FOLLOWER), frozenset({LEADER}))
        pair.publish_brokers(LEADER, FOLLOWER)
        pair.manager.add_partitions({tp: InitialFetchState(LEADER, 1, 0) for tp in (TP, other)})
        waiting = pair.leader.replica_manager.log_end_purgatory.watchers
        await wait_until(lambda: TP in waiting and other in waiting, "a fetch for both long-polls the leader")
        pair.manager.remove_partitions([TP])
        new_leader = pair.follower.replica_manager.partitions[TP]
        new_leader.make_leader(2, (LEADER, FOLLOWER), frozenset({FOLLOWER}))
        harness = BrokerHarness(pair.leader)
        for tp in (TP, other):  # the old leader, not yet told, still takes TP's record
            request = ProduceRequest(acks=1, timeout_ms=int(WAIT_S * 1000), topic_data=(
                TopicProduceData(TOPIC, (PartitionProduceData(tp[1], batch([next(values)])),)),))
            response = await harness.request(request, version=9)
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        other_log = pair.follower.replica_manager.partitions[other].log
        await wait_until(lambda: other_log.log_end_offset == 1, "the other partition replicates")
        assert new_leader.log.log_end_offset == 0
        assert [e.epoch for e in new_leader.log.leader_epoch_cache.entries] == [2]

    run(scenario, tmp_path, {"replica.fetch.wait.max.ms": "20000"})
