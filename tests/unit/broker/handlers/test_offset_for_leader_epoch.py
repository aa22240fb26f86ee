"""OffsetForLeaderEpoch (23): where a leader epoch ends in the log (KIP-101, KIP-320)."""

from __future__ import annotations

from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner

CONSUMER = -1  # replica_id of a consumer (v3+); -2 (the schema default) means "debug" in Kafka


async def _end(h: BrokerHarness, version: int, topic: str, partition: int, leader_epoch: int,
               current_leader_epoch: int = -1) -> Any:
    request = OffsetForLeaderEpochRequest(
        replica_id=CONSUMER,
        topics=(OffsetForLeaderTopic(topic, (OffsetForLeaderPartition(
            partition, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch,
        ),)),),
    )
    response = await h.request(request, version=version)
    ((found,),) = [t.partitions for t in response.topics]
    return found


@pytest.mark.parametrize("version", [0, 2, 3, 4])
def test_the_current_epoch_ends_at_the_log_end(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.produce("t", 0, [b"a", b"b"])
        await h.produce("t", 0, [b"c"])
        found = await _end(h, version, "t", 0, leader_epoch=0)
        assert (found.error_code, found.partition, found.end_offset) == (0, 0, 3)
        if version >= 1:  # the answer's leader_epoch came in v1
            assert found.leader_epoch == 0

    broker.run(scenario)


def test_an_epoch_newer_than_any_in_the_log_is_undefined(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.produce("t", 0, [b"a"])
        found = await _end(h, 4, "t", 0, leader_epoch=7)
        assert (found.error_code, found.leader_epoch, found.end_offset) == (0, -1, -1)

    broker.run(scenario)


@pytest.mark.parametrize(("topic", "partition"), [("absent", 0), ("t", 2)])
def test_an_unknown_topic_or_partition_is_refused(broker: BrokerRunner, topic: str, partition: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        found = await _end(h, 4, topic, partition, leader_epoch=0)
        assert found.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.run(scenario)


def test_a_current_leader_epoch_ahead_of_the_leader_is_unknown(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.produce("t", 0, [b"a"])
        assert (await _end(h, 4, "t", 0, leader_epoch=0, current_leader_epoch=0)).error_code == ErrorCode.NONE
        ahead = await _end(h, 4, "t", 0, leader_epoch=0, current_leader_epoch=3)
        assert ahead.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH

    broker.run(scenario)
