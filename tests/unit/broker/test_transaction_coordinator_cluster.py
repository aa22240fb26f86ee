"""The transaction coordinator in cluster mode: it answers only for the ids of the
``__transaction_state`` partitions this broker leads, loading a partition when elected
(COORDINATOR_LOAD_IN_PROGRESS meanwhile) and forgetting it when it resigns; a load that
finds a PrepareCommit writes its markers (with the partition's leader epoch as the
coordinator epoch) and then CompleteCommit. Real logs and a real ReplicaManager; the
markers go to a recording writer (a stand-in for the partition leaders)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from strom.broker.admin_manager import AdminManager
from strom.broker.metadata_cache import MetadataCache
from strom.broker.producer_ids import ProducerIdManager
from strom.broker.replica_manager import ReplicaManager
from strom.broker.transaction.transaction_config import TransactionConfig
from strom.broker.transaction.transaction_coordinator import TransactionCoordinator
from strom.broker.transaction.transaction_log import (
    TRANSACTION_STATE_TOPIC,
    TransactionState,
    partition_for,
)
from strom.broker.transaction.transaction_marker_channel import (
    MarkerRound,
    TransactionMarkerChannel,
)
from strom.broker.transaction.transaction_state_manager import TransactionStateManager
from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition
from strom.storage.log_manager import LogManager

PARTITIONS = 3
CONFIG = TransactionConfig(num_partitions=PARTITIONS, replication_factor=1, min_isr=1)
TIMEOUT = 30.0


class RecordingWriter:
    """Answers every marker NONE (or REQUEST_TIMED_OUT while held) and remembers the rounds."""

    def __init__(self) -> None:
        self.rounds: list[MarkerRound] = []
        self.held = False

    async def __call__(self, marker_round: MarkerRound) -> Mapping[TopicPartition, ErrorCode]:
        self.rounds.append(marker_round)
        error = ErrorCode.REQUEST_TIMED_OUT if self.held else ErrorCode.NONE
        return dict.fromkeys(marker_round.partitions, error)

    def close(self) -> None:
        pass


def id_on(partition: int) -> str:
    return next(n for n in (f"txn-{i}" for i in itertools.count()) if partition_for(n, PARTITIONS) == partition)


def run(data_dir: Path, scenario: Callable[[TransactionCoordinator, RecordingWriter], Awaitable[None]]) -> None:
    log_manager = LogManager(str(data_dir), hw_follows_leo=False)
    log_manager.startup()
    replica_manager = ReplicaManager(log_manager, local_broker_id=1)
    replica_manager.startup()
    metadata = MetadataCache()
    admin_manager = AdminManager(metadata, replica_manager, log_manager)
    admin_manager.load()
    if metadata.get(TRANSACTION_STATE_TOPIC) is None:  # the controller's doing in a cluster
        admin_manager.create_topic(TRANSACTION_STATE_TOPIC, PARTITIONS, {"cleanup.policy": "compact"})
        admin_manager.create_topic("t", 1)
    manager = TransactionStateManager(CONFIG, metadata, admin_manager, replica_manager, cluster_mode=True)
    writer = RecordingWriter()
    channel = TransactionMarkerChannel(manager, writer, lambda topic: metadata.get(topic) is not None, 10)
    producer_ids = ProducerIdManager(str(data_dir))
    producer_ids.load()
    coordinator = TransactionCoordinator(CONFIG, manager, channel, producer_ids)
    coordinator.load()  # nothing: in a cluster, partitions load as they are won

    async def main() -> None:
        coordinator.start()
        try:
            await asyncio.wait_for(scenario(coordinator, writer), TIMEOUT)
        finally:
            await coordinator.shutdown()

    try:
        asyncio.run(main())
    finally:
        log_manager.close()


def state(coordinator: TransactionCoordinator, txn_id: str) -> TransactionState:
    found = coordinator.state_manager.get_transaction_state(txn_id)
    assert not isinstance(found, ErrorCode) and found[1] is not None
    return found[1].state


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)


def test_only_the_ids_of_led_partitions_are_answered(tmp_path: Path) -> None:
    txn_id = id_on(1)

    async def scenario(coordinator: TransactionCoordinator, _: RecordingWriter) -> None:
        assert (await coordinator.init_producer_id(txn_id, 60000)).error == ErrorCode.NOT_COORDINATOR
        coordinator.on_leadership_change([(TRANSACTION_STATE_TOPIC, 1)], [])
        assert (await coordinator.init_producer_id(txn_id, 60000)).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await coordinator.state_manager.wait_for_loads()
        first = await coordinator.init_producer_id(txn_id, 60000)
        assert (first.error, first.producer_epoch) == (ErrorCode.NONE, 0)
        assert (await coordinator.init_producer_id(id_on(2), 60000)).error == ErrorCode.NOT_COORDINATOR
        coordinator.on_leadership_change([], [(TRANSACTION_STATE_TOPIC, 1)])
        assert (await coordinator.init_producer_id(txn_id, 60000)).error == ErrorCode.NOT_COORDINATOR
        coordinator.on_leadership_change([(TRANSACTION_STATE_TOPIC, 1)], [])
        await coordinator.state_manager.wait_for_loads()
        again = await coordinator.init_producer_id(txn_id, 60000)  # the load found epoch 0
        assert (again.error, again.producer_id, again.producer_epoch) == (ErrorCode.NONE, first.producer_id, 1)

    run(tmp_path, scenario)


def test_a_load_completes_a_prepared_commit(tmp_path: Path) -> None:
    txn_id = id_on(0)

    async def scenario(coordinator: TransactionCoordinator, writer: RecordingWriter) -> None:
        coordinator.on_leadership_change([(TRANSACTION_STATE_TOPIC, 0)], [])
        await coordinator.state_manager.wait_for_loads()
        producer = await coordinator.init_producer_id(txn_id, 60000)
        pid = producer.producer_id
        assert await coordinator.add_partitions(txn_id, pid, 0, frozenset({("t", 0)})) == ErrorCode.NONE
        writer.held = True  # the markers do not get through: the coordinator moves on before Complete
        assert await coordinator.end_transaction(txn_id, pid, 0, committed=True) == ErrorCode.NONE
        await until(lambda: len(writer.rounds) >= 1)
        coordinator.on_leadership_change([], [(TRANSACTION_STATE_TOPIC, 0)])
        writer.held, writer.rounds = False, []
        # Elected again, at the next leader epoch: the coordinator epoch of the markers.
        hosted = coordinator.state_manager.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, 0)
        assert hosted is not None
        hosted.make_leader(1, (1,), frozenset({1}))
        coordinator.on_leadership_change([(TRANSACTION_STATE_TOPIC, 0)], [])
        await coordinator.state_manager.wait_for_loads()
        await until(lambda: state(coordinator, txn_id) == TransactionState.COMPLETE_COMMIT)
        assert writer.rounds == [MarkerRound(pid, 0, True, 1, (("t", 0),))]

    run(tmp_path, scenario)
