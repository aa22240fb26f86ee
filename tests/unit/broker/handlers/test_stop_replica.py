"""StopReplica (5): stop hosting or delete partitions; controller, broker and leader epochs fence it."""

from __future__ import annotations

import os
from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode
from tests.support.broker_harness import BrokerHarness, BrokerRunner, batch, produce_request
from tests.unit.broker.handlers.cluster import CLUSTER, ME, Listener, State, become, stop_replica

T0, T1 = ("t", 0), ("t", 1)
DURING_DELETE = -2


async def _stop(h: BrokerHarness, partitions: dict[tuple[str, int], int], *, version: int = 4,
                **kwargs: Any) -> tuple[int, dict[tuple[str, int], int]]:
    response = await h.request(stop_replica(partitions, version=version, **kwargs), version=version)
    return response.error_code, {(p.topic_name, p.partition_index): p.error_code for p in response.partition_errors}


async def _produce_error(h: BrokerHarness, partition: int = 0) -> int:
    response = await h.request(produce_request("t", partition, batch([b"v"]), acks=1), version=9)
    code: int = response.responses[0].partition_responses[0].error_code
    return code


def _log_dir(h: BrokerHarness, partition: int = 0) -> str:
    return os.path.join(h.broker.config.data_dir, f"t-{partition}")


def test_stopping_keeps_the_log_and_leads_no_more(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        listener = Listener()
        h.broker.replica_manager.leadership_listeners.append(listener)
        await become(h, {T0: State(leader=ME, leader_epoch=1), T1: State(leader=ME, leader_epoch=1)})
        assert await _produce_error(h) == ErrorCode.NONE
        assert await _stop(h, {T0: 2}) == (ErrorCode.NONE, {T0: ErrorCode.NONE})
        assert await _produce_error(h) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await _produce_error(h, 1) == ErrorCode.NONE  # the other partition is untouched
        assert h.broker.replica_manager.partitions[T0].log.log_end_offset == 1
        assert os.path.isdir(_log_dir(h))
        assert listener.calls[-1] == ([], [T0])
        # The controller can hand it back with a newer epoch.
        await become(h, {T0: State(leader=ME, leader_epoch=3)})
        assert await _produce_error(h) == ErrorCode.NONE

    broker.run(scenario, CLUSTER)


@pytest.mark.parametrize("version", range(5))
def test_deleting_removes_the_partition_and_its_log(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        listener = Listener()
        h.broker.replica_manager.leadership_listeners.append(listener)
        await become(h, {T0: State(leader=ME, leader_epoch=1), T1: State(leader=ME, leader_epoch=1)})
        assert await _stop(h, {T0: DURING_DELETE}, delete=True, version=version) == (
            ErrorCode.NONE, {T0: ErrorCode.NONE})
        assert T0 not in h.broker.replica_manager.partitions
        assert not os.path.exists(_log_dir(h))
        assert os.path.isdir(_log_dir(h, 1))
        assert await _produce_error(h) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert listener.calls[-1] == ([], [T0])

    broker.run(scenario, CLUSTER)


@pytest.mark.parametrize("epoch", [4, 5])
def test_a_leader_epoch_not_newer_than_the_partitions_is_fenced(broker: BrokerRunner, epoch: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await become(h, {T0: State(leader=ME, leader_epoch=5)})
        assert await _stop(h, {T0: epoch}, delete=True) == (ErrorCode.NONE, {T0: ErrorCode.FENCED_LEADER_EPOCH})
        assert os.path.isdir(_log_dir(h))
        assert await _produce_error(h) == ErrorCode.NONE
        # No epoch (-1, StopReplica before v3) and the deletion sentinel (-2) are not checked.
        assert await _stop(h, {T0: -1}) == (ErrorCode.NONE, {T0: ErrorCode.NONE})
        assert await _produce_error(h) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await _stop(h, {T0: DURING_DELETE}, delete=True) == (ErrorCode.NONE, {T0: ErrorCode.NONE})
        assert not os.path.exists(_log_dir(h))

    broker.run(scenario, CLUSTER)


def test_a_stale_controller_epoch_is_refused_with_no_partition_errors(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await become(h, {T0: State(leader=ME, leader_epoch=1)}, controller_epoch=7)
        assert await _stop(h, {T0: 2}, delete=True, controller_epoch=6) == (ErrorCode.STALE_CONTROLLER_EPOCH, {})
        assert os.path.isdir(_log_dir(h))
        assert await _stop(h, {T0: 2}, controller_epoch=8) == (ErrorCode.NONE, {T0: ErrorCode.NONE})
        assert h.broker.replica_manager.controller_epoch == 8

    broker.run(scenario, CLUSTER)


def test_a_stale_broker_epoch_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        h.broker.broker_epoch = 10
        await become(h, {T0: State(leader=ME, leader_epoch=1)}, broker_epoch=10)
        assert await _stop(h, {T0: 2}, delete=True, broker_epoch=9) == (ErrorCode.STALE_BROKER_EPOCH, {})
        assert os.path.isdir(_log_dir(h))
        assert await _stop(h, {T0: 2}, delete=True, broker_epoch=10) == (ErrorCode.NONE, {T0: ErrorCode.NONE})
        assert not os.path.exists(_log_dir(h))

    broker.run(scenario, CLUSTER)


def test_a_log_left_by_a_topic_deleted_while_this_broker_was_down_is_deleted(broker: BrokerRunner) -> None:
    """After a restart nothing is hosted; StopReplica(delete) still removes the log on disk."""

    async def first(h: BrokerHarness) -> None:
        await become(h, {T0: State(leader=ME, leader_epoch=1)})
        assert await _produce_error(h) == ErrorCode.NONE

    async def second(h: BrokerHarness) -> None:
        assert T0 not in h.broker.replica_manager.partitions and os.path.isdir(_log_dir(h))
        assert await _stop(h, {T0: DURING_DELETE}, delete=True) == (ErrorCode.NONE, {T0: ErrorCode.NONE})
        assert not os.path.exists(_log_dir(h))

    broker.run(first, CLUSTER)
    broker.run(second, CLUSTER)
