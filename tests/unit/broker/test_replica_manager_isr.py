"""The ReplicaManager's part in ISR changes (cluster mode): partitions it hosts propose
through the AlterPartitionManager it was given, only brokers the controller reports alive
may join, and the periodic isr-expiration pass proposes removing followers that stopped.

A real ReplicaManager and LogManager on a temp dir, driven by LeaderAndIsr states as the
controller sends them; the AlterPartition sink is a recorder (the manager has its own tests).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from strom.broker.metadata_cache import BrokerEndpoint, LiveBroker, MetadataCache
from strom.broker.periodic import isr_expiration_interval_ms
from strom.broker.replica_manager import LeaderAndIsrPartition, ReplicaManager
from strom.cluster.zk_data import LeaderAndIsr
from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition
from strom.storage.log_manager import LogManager
from strom.storage.log_results import FetchIsolation
from tests.support.storage import batch

ME, F2, F3 = 1, 2, 3
LAG_MS = 200


class Recorder:
    def __init__(self) -> None:
        self.proposals: list[tuple[TopicPartition, LeaderAndIsr]] = []

    def submit(self, topic_partition: TopicPartition, leader_and_isr: LeaderAndIsr
               ) -> asyncio.Future[LeaderAndIsr | ErrorCode]:
        self.proposals.append((topic_partition, leader_and_isr))
        future: asyncio.Future[LeaderAndIsr | ErrorCode] = asyncio.get_running_loop().create_future()
        return future


def _replica_manager(data_dir: Path, alive: tuple[int, ...]) -> tuple[ReplicaManager, Recorder]:
    metadata = MetadataCache()
    metadata.update_metadata(ME, [LiveBroker(b, (BrokerEndpoint("127.0.0.1", 9000 + b),)) for b in alive], [])
    manager = ReplicaManager(LogManager(str(data_dir), hw_follows_leo=False), ME, metadata)
    recorder = Recorder()
    manager.enable_isr_changes(recorder, LAG_MS)
    manager.become_leader_or_follower(1, [LeaderAndIsrPartition("t", 0, ME, 3, (ME, F2), (ME, F2, F3), 5)])
    return manager, recorder


def test_only_a_broker_reported_alive_is_proposed_for_the_isr(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager, recorder = _replica_manager(tmp_path, alive=(ME, F2))
        partition = manager.partitions[("t", 0)]
        partition.append_as_leader(batch(2))
        partition.read(2, 1 << 20, FetchIsolation.LOG_END, F2)
        partition.read(2, 1 << 20, FetchIsolation.LOG_END, F3)  # caught up, but not alive
        assert recorder.proposals == []
        manager.metadata.update_metadata(ME, [LiveBroker(b, (BrokerEndpoint("127.0.0.1", 9000 + b),))
                                              for b in (ME, F2, F3)], [])
        partition.read(2, 1 << 20, FetchIsolation.LOG_END, F3)
        assert recorder.proposals == [(("t", 0), LeaderAndIsr(ME, 3, (ME, F2, F3), 5))]
    asyncio.run(scenario())


def test_isr_expiration_proposes_dropping_a_follower_that_stopped_fetching(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager, recorder = _replica_manager(tmp_path, alive=(ME, F2, F3))
        partition = manager.partitions[("t", 0)]
        partition.append_as_leader(batch(1))
        deadline = time.monotonic() + 60
        while manager.maybe_shrink_isr() == 0:  # F2 never fetches: out of sync once the lag time passes
            assert time.monotonic() < deadline, "the follower never left the ISR"
            await asyncio.sleep(LAG_MS / 4000)
        assert recorder.proposals == [(("t", 0), LeaderAndIsr(ME, 3, (ME,), 5))]
        assert manager.maybe_shrink_isr() == 0, "one change in flight at a time"
    asyncio.run(scenario())


def test_isr_expiration_runs_every_half_lag_time() -> None:
    assert isr_expiration_interval_ms(30_000) == 15_000  # Kafka's replicaLagTimeMaxMs / 2
    assert isr_expiration_interval_ms(1) == 1
