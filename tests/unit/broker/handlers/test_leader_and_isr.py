"""LeaderAndIsr (4): cluster mode only; broker, controller and leader epochs fence it; leader or follower."""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import pytest

from strom.broker.connection_errors import CloseConnection
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from strom.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from strom.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from strom.protocol.messages.request_header import RequestHeader
from strom.storage.partition_metadata import read_topic_id
from tests.support.broker_harness import BrokerHarness, BrokerRunner, batch, produce_request
from tests.support.fetch_requests import fetch, partitions_of
from tests.unit.broker.handlers.cluster import (
    CLUSTER,
    ME,
    Listener,
    State,
    become,
    leader_and_isr,
    leader_and_isr_errors,
    topic_id_of,
)

CONTROL_APIS = (4, 5, 6)
T0 = ("t", 0)


async def _produce_error(h: BrokerHarness, topic: str = "t", partition: int = 0) -> int:
    response = await h.request(produce_request(topic, partition, batch([b"v"]), acks=1), version=9)
    ((answer,),) = [t.partition_responses for t in response.responses]
    code: int = answer.error_code
    return code


async def _served(h: BrokerHarness) -> dict[int, tuple[int, int]]:
    response = await h.request(ApiVersionsRequest("strom-tests", "1"), version=3)
    return {api.api_key: (api.min_version, api.max_version) for api in response.api_keys}


def _header_only(api_key: int, api_version: int) -> bytes:
    out = bytearray()
    RequestHeader(api_key, api_version, 5, "raw-client").encode_into(1, out)
    return bytes(out)


# -- single node: the control APIs do not exist ----------------------------------------
def test_one_node_neither_lists_nor_answers_the_control_apis(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        served = await _served(h)
        assert not served.keys() & set(CONTROL_APIS)
        assert 75 in served  # DescribeTopicPartitions stays on one node
        for key in CONTROL_APIS:
            with pytest.raises(CloseConnection):
                await h.send_frame(_header_only(key, 0) + bytes(64))
        with pytest.raises(CloseConnection):  # a whole, well-formed LeaderAndIsr too
            await h.request(leader_and_isr({T0: State(leader=ME, leader_epoch=0)}), version=7)

    broker.run(scenario)


def test_a_cluster_broker_lists_the_control_apis_and_not_krafts_own(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        served = await _served(h)
        assert served[4] == (0, 7) and served[5] == (0, 4) and served[6] == (0, 8)
        assert 75 not in served  # DescribeTopicPartitions: not on Kafka's ZooKeeper-mode broker
        with pytest.raises(CloseConnection):
            await h.send_frame(_header_only(75, 0) + bytes(64))

    broker.run(scenario, CLUSTER)


# -- leader ----------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(8))
def test_leading_creates_the_log_and_takes_produce(broker: BrokerRunner, version: int) -> None:
    topic_id = uuid.uuid4()

    async def scenario(h: BrokerHarness) -> None:
        listener = Listener()
        h.broker.replica_manager.leadership_listeners.append(listener)
        assert await _produce_error(h) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # nothing hosted yet
        ids = {"t": topic_id}
        errors = await become(h, {T0: State(leader=ME, leader_epoch=3)}, topic_ids=ids, version=version)
        assert errors == {T0: ErrorCode.NONE}
        assert await _produce_error(h) == ErrorCode.NONE
        partition = h.broker.replica_manager.partitions[T0]
        assert (partition.leader_id, partition.leader_epoch) == (ME, 3)
        directory = os.path.join(h.broker.config.data_dir, "t-0")
        assert read_topic_id(directory) == (topic_id if version >= 5 else None)  # topic ids came in v5
        assert listener.calls == [([T0], [])]

    broker.run(scenario, CLUSTER)


def test_a_new_leader_epoch_starts_at_the_log_end_before_any_append(broker: BrokerRunner) -> None:
    """KAFKA-7415: OffsetForLeaderEpoch of the old epoch ends where the new one began."""

    async def scenario(h: BrokerHarness) -> None:
        await become(h, {T0: State(leader=ME, leader_epoch=0)})
        for _ in range(3):
            assert await _produce_error(h) == ErrorCode.NONE
        await become(h, {T0: State(leader=ME, leader_epoch=4)})
        request = OffsetForLeaderEpochRequest(replica_id=-1, topics=(OffsetForLeaderTopic("t", (
            OffsetForLeaderPartition(0, current_leader_epoch=4, leader_epoch=0),
            OffsetForLeaderPartition(0, current_leader_epoch=4, leader_epoch=4))),))
        response = await h.request(request, version=4)
        old, new = response.topics[0].partitions
        assert (old.error_code, old.leader_epoch, old.end_offset) == (0, 0, 3)
        assert (new.error_code, new.leader_epoch, new.end_offset) == (0, 4, 3)

    broker.run(scenario, CLUSTER)


# -- follower --------------------------------------------------------------------------
def test_a_follower_refuses_every_client_request_with_not_leader_or_follower(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        listener = Listener()
        h.broker.replica_manager.leadership_listeners.append(listener)
        errors = await become(h, {T0: State(leader=2, leader_epoch=1, replicas=(2, ME))})
        assert errors == {T0: ErrorCode.NONE}
        assert listener.calls == [([], [T0])]
        assert os.path.isdir(os.path.join(h.broker.config.data_dir, "t-0"))  # a follower has the log too
        not_leader = ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await _produce_error(h) == not_leader
        assert partitions_of(await h.request(fetch([("t", 0, 0)]), version=12))[T0].error_code == not_leader
        offsets = await h.request(ListOffsetsRequest(replica_id=-1, topics=(
            ListOffsetsTopic("t", (ListOffsetsPartition(0, timestamp=-1),)),)), version=7)
        assert offsets.topics[0].partitions[0].error_code == not_leader
        debug = await h.request(ListOffsetsRequest(replica_id=-2, topics=(  # the debugging replica may ask
            ListOffsetsTopic("t", (ListOffsetsPartition(0, timestamp=-1),)),)), version=7)
        assert (debug.topics[0].partitions[0].error_code, debug.topics[0].partitions[0].offset) == (0, 0)
        epochs = await h.request(OffsetForLeaderEpochRequest(replica_id=-1, topics=(OffsetForLeaderTopic("t", (
            OffsetForLeaderPartition(0, leader_epoch=1),)),)), version=4)
        assert epochs.topics[0].partitions[0].error_code == not_leader
        deleted = await h.request(DeleteRecordsRequest(topics=(
            DeleteRecordsTopic("t", (DeleteRecordsPartition(0, 0),)),), timeout_ms=1000), version=2)
        assert deleted.topics[0].partitions[0].error_code == not_leader

    broker.run(scenario, CLUSTER)


def test_a_fetch_waiting_on_a_partition_that_moves_away_is_answered_at_once(broker: BrokerRunner) -> None:
    """Kafka's completeDelayedFetchOrProduceRequests: the long poll ends with the move, not its timeout."""

    async def scenario(h: BrokerHarness) -> None:
        await become(h, {T0: State(leader=ME, leader_epoch=1, replicas=(ME, 2))})
        waiting = asyncio.create_task(h.request(fetch([("t", 0, 0)], max_wait_ms=600_000, min_bytes=1), version=12))
        purgatory = h.broker.replica_manager.high_watermark_purgatory
        while not purgatory.watchers.get(T0):  # the fetch is parked on the partition
            assert not waiting.done()
            await asyncio.sleep(0)
        await become(h, {T0: State(leader=2, leader_epoch=2, replicas=(ME, 2))})
        response = await asyncio.wait_for(waiting, timeout=60)  # ten minutes if nothing woke it
        assert partitions_of(response)[T0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    broker.run(scenario, CLUSTER)


def test_no_leader_leaves_the_partition_offline_here(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await become(h, {T0: State(leader=-1, leader_epoch=1, replicas=(ME,), isr=(ME,))})
        assert h.broker.replica_manager.partitions[T0].leader_id == -1
        assert await _produce_error(h) == ErrorCode.NOT_LEADER_OR_FOLLOWER

    broker.run(scenario, CLUSTER)


def test_leadership_moves_away_and_back(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        listener = Listener()
        h.broker.replica_manager.leadership_listeners.append(listener)
        replicas = (ME, 2)
        await become(h, {T0: State(leader=ME, leader_epoch=1, replicas=replicas)})
        assert await _produce_error(h) == ErrorCode.NONE
        await become(h, {T0: State(leader=2, leader_epoch=2, replicas=replicas)})
        assert await _produce_error(h) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        await become(h, {T0: State(leader=ME, leader_epoch=3, replicas=replicas)})
        assert await _produce_error(h) == ErrorCode.NONE
        await become(h, {T0: State(leader=ME, leader_epoch=4, replicas=replicas, isr=(ME,))})  # the ISR shrank
        assert listener.calls == [([T0], []), ([], [T0]), ([T0], []), ([], [])]  # still leading: no news
        # The log kept both appends, each stamped with the epoch it was made in.
        assert h.broker.replica_manager.partitions[T0].log.leader_epoch_cache.entries == [(1, 0), (3, 1), (4, 2)]
        # KIP-320: a client still at epoch 3 is fenced; at 4 it is served.
        stale = partitions_of(await h.request(fetch([("t", 0, 0)], current_leader_epoch=3), version=12))[T0]
        assert stale.error_code == ErrorCode.FENCED_LEADER_EPOCH
        current = partitions_of(await h.request(fetch([("t", 0, 0)], current_leader_epoch=4), version=12))[T0]
        assert current.error_code == ErrorCode.NONE

    broker.run(scenario, CLUSTER)


# -- fencing ---------------------------------------------------------------------------
@pytest.mark.parametrize("epoch", [4, 5])
def test_a_leader_epoch_not_newer_than_the_partitions_is_ignored(broker: BrokerRunner, epoch: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await become(h, {T0: State(leader=ME, leader_epoch=5, replicas=(ME, 2))})
        errors = await become(h, {T0: State(leader=2, leader_epoch=epoch, replicas=(ME, 2)), ("t", 1): State(
            leader=ME, leader_epoch=0)})
        assert errors == {T0: ErrorCode.STALE_CONTROLLER_EPOCH, ("t", 1): ErrorCode.NONE}
        partition = h.broker.replica_manager.partitions[T0]
        assert (partition.leader_id, partition.leader_epoch) == (ME, 5)

    broker.run(scenario, CLUSTER)


def test_an_older_controller_epoch_is_refused_whole(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await become(h, {T0: State(leader=ME, leader_epoch=0)}, controller_epoch=5)
        request = leader_and_isr({T0: State(leader=2, leader_epoch=1, replicas=(ME, 2)),
                                  ("u", 0): State(leader=ME, leader_epoch=0)}, controller_epoch=4)
        response = await h.request(request, version=7)
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert leader_and_isr_errors(response, {"t": topic_id_of("t"), "u": topic_id_of("u")}) == {
            T0: ErrorCode.STALE_CONTROLLER_EPOCH, ("u", 0): ErrorCode.STALE_CONTROLLER_EPOCH}
        assert h.broker.replica_manager.partitions[T0].leader_id == ME
        assert ("u", 0) not in h.broker.replica_manager.partitions
        # The same epoch is still this controller's: accepted.
        assert await become(h, {("u", 0): State(leader=ME, leader_epoch=0)}, controller_epoch=5) == {
            ("u", 0): ErrorCode.NONE}
        assert h.broker.replica_manager.controller_epoch == 5

    broker.run(scenario, CLUSTER)


@pytest.mark.parametrize(("request_epoch", "accepted"), [(99, False), (100, True), (101, True), (-1, True)])
def test_a_request_for_an_earlier_registration_is_refused(broker: BrokerRunner, request_epoch: int,
                                                          accepted: bool) -> None:
    """KIP-380: older than this broker's epoch is STALE_BROKER_EPOCH; -1 is not checked."""

    async def scenario(h: BrokerHarness) -> None:
        h.broker.broker_epoch = 100
        response = await h.request(leader_and_isr({T0: State(leader=ME, leader_epoch=0)}, broker_epoch=request_epoch),
                                   version=7)
        expected = ErrorCode.NONE if accepted else ErrorCode.STALE_BROKER_EPOCH
        assert response.error_code == expected
        assert leader_and_isr_errors(response, {"t": topic_id_of("t")}) == {T0: expected}
        assert (T0 in h.broker.replica_manager.partitions) == accepted

    broker.run(scenario, CLUSTER)


def test_a_partition_not_assigned_here_is_ignored(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        errors = await become(h, {T0: State(leader=2, leader_epoch=0, replicas=(2, 3))})
        assert errors == {T0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert T0 not in h.broker.replica_manager.partitions
        assert not os.path.exists(os.path.join(h.broker.config.data_dir, "t-0"))

    broker.run(scenario, CLUSTER)


def test_a_topic_id_other_than_the_logs_is_inconsistent(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        first = uuid.uuid4()
        await become(h, {T0: State(leader=ME, leader_epoch=0)}, topic_ids={"t": first})
        other = uuid.uuid4()
        errors = await become(h, {T0: State(leader=ME, leader_epoch=1)}, topic_ids={"t": other})
        assert errors == {T0: ErrorCode.INCONSISTENT_TOPIC_ID}
        assert h.broker.replica_manager.partitions[T0].leader_epoch == 0

    broker.run(scenario, CLUSTER)


def test_a_restarted_broker_hosts_nothing_until_told_and_keeps_its_log(broker: BrokerRunner) -> None:
    async def first(h: BrokerHarness) -> None:
        await become(h, {T0: State(leader=ME, leader_epoch=2)})
        assert await _produce_error(h) == ErrorCode.NONE

    async def second(h: BrokerHarness) -> None:
        assert h.broker.replica_manager.partitions == {}
        assert await _produce_error(h) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        await become(h, {T0: State(leader=ME, leader_epoch=3)})
        assert h.broker.replica_manager.partitions[T0].log.log_end_offset == 1

    broker.run(first, CLUSTER)
    broker.run(second, CLUSTER)


def test_a_listener_that_fails_does_not_undo_the_change(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        def broken(*_: Any) -> None:
            raise RuntimeError("listener bug")

        later = Listener()
        h.broker.replica_manager.leadership_listeners[:0] = [broken]
        h.broker.replica_manager.leadership_listeners.append(later)
        assert await become(h, {T0: State(leader=ME, leader_epoch=0)}) == {T0: ErrorCode.NONE}
        assert later.calls == [([T0], [])]
        assert await _produce_error(h) == ErrorCode.NONE

    broker.run(scenario, CLUSTER)
