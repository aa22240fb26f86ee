"""ListOffsets (2): earliest, latest, by timestamp, max timestamp, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode
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
from strom.protocol.records.v2_builder import build_record_batch
from tests.support.broker_harness import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    BrokerHarness,
    BrokerRunner,
    produce_request,
)

EARLIEST_LOCAL = -4  # KIP-1005, v8+


def _request(topic: str, partition: int, timestamp: int, *, current_leader_epoch: int = -1,
             isolation_level: int = 0) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=(ListOffsetsTopic(topic, (
            ListOffsetsPartition(partition, current_leader_epoch=current_leader_epoch, timestamp=timestamp),
        )),),
    )


async def _list(h: BrokerHarness, version: int, topic: str, partition: int, timestamp: int, **kwargs: int) -> Any:
    response = await h.request(_request(topic, partition, timestamp, **kwargs), version=version)
    ((found,),) = [t.partitions for t in response.topics]
    return found


async def _three_batches(h: BrokerHarness) -> None:
    """Offsets 0, 1, 2 with create times 1000, 3000, 2000: one record a batch."""
    await h.create_topic("t")
    for value, timestamp in ((b"a", 1000), (b"b", 3000), (b"c", 2000)):
        await h.produce("t", 0, [value], timestamp=timestamp)


@pytest.mark.parametrize("version", [1, 4, 7, 9])
def test_earliest_and_latest(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _three_batches(h)
        earliest = await _list(h, version, "t", 0, EARLIEST)
        latest = await _list(h, version, "t", 0, LATEST)
        assert (earliest.error_code, earliest.offset, earliest.timestamp) == (0, 0, -1)
        assert (latest.error_code, latest.offset, latest.timestamp) == (0, 3, -1)

    broker.run(scenario)


def test_earliest_follows_the_log_start_offset(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _three_batches(h)
        request = DeleteRecordsRequest(topics=(DeleteRecordsTopic("t", (DeleteRecordsPartition(0, 2),)),), timeout_ms=1000)
        await h.request(request, version=2)
        assert await h.list_offset("t", 0, EARLIEST) == 2

    broker.run(scenario)


def test_latest_read_committed_is_the_last_stable_offset(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _three_batches(h)  # no transactions: the last stable offset is the high watermark
        found = await _list(h, 7, "t", 0, LATEST, isolation_level=1)
        assert (found.error_code, found.offset) == (0, 3)

    broker.run(scenario)


@pytest.mark.parametrize(("timestamp", "offset", "found_timestamp"), [
    (0, 0, 1000), (1000, 0, 1000), (1001, 1, 3000), (2500, 1, 3000), (3000, 1, 3000),
])
def test_by_timestamp_the_first_offset_at_or_after_it(
    broker: BrokerRunner, timestamp: int, offset: int, found_timestamp: int
) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _three_batches(h)
        found = await _list(h, 7, "t", 0, timestamp)
        assert (found.error_code, found.offset, found.timestamp) == (0, offset, found_timestamp)

    broker.run(scenario)


def test_a_timestamp_after_every_record_finds_nothing(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _three_batches(h)
        found = await _list(h, 7, "t", 0, 3001)
        assert (found.error_code, found.offset, found.timestamp) == (0, -1, -1)

    broker.run(scenario)


def test_max_timestamp_finds_the_record_with_the_largest_timestamp(broker: BrokerRunner) -> None:
    """KIP-734 (v7+): -3 answers the offset of the largest timestamp, not the last offset."""

    async def scenario(h: BrokerHarness) -> None:
        await _three_batches(h)
        found = await _list(h, 7, "t", 0, MAX_TIMESTAMP)
        assert (found.error_code, found.offset, found.timestamp) == (0, 1, 3000)

    broker.run(scenario)


def test_max_timestamp_names_the_record_inside_its_batch(broker: BrokerRunner) -> None:
    """KIP-734 as Kafka 3.8+ answers it (KAFKA-16310): the record with the largest timestamp,
    not the last offset of the batch that holds it. One batch, create times 1000, 3000, 2000."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        records = build_record_batch((None, value, (), timestamp)
                                     for value, timestamp in ((b"a", 1000), (b"b", 3000), (b"c", 2000)))
        response = await h.request(produce_request("t", 0, bytes(records)), version=9)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        found = await _list(h, 7, "t", 0, MAX_TIMESTAMP)
        assert (found.error_code, found.offset, found.timestamp) == (0, 1, 3000)

    broker.run(scenario)


def test_max_timestamp_of_an_empty_partition_finds_nothing(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        found = await _list(h, 7, "t", 0, MAX_TIMESTAMP)
        assert (found.error_code, found.offset, found.timestamp) == (0, -1, -1)

    broker.run(scenario)


def test_earliest_local_is_the_log_start_offset_without_tiered_storage(broker: BrokerRunner) -> None:
    """KIP-1005 (v8+): -4, the earliest offset on local disk; with no tiered storage, the log start."""

    async def scenario(h: BrokerHarness) -> None:
        await _three_batches(h)
        found = await _list(h, 8, "t", 0, EARLIEST_LOCAL)
        assert (found.error_code, found.offset) == (0, 0)

    broker.run(scenario)


@pytest.mark.parametrize(("topic", "partition"), [("absent", 0), ("t", 3)])
def test_an_unknown_topic_or_partition_is_refused(broker: BrokerRunner, topic: str, partition: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        found = await _list(h, 7, topic, partition, LATEST)
        assert found.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.run(scenario, {"auto.create.topics.enable": "false"})


def test_a_current_leader_epoch_ahead_of_the_leader_is_unknown(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _three_batches(h)
        found = await _list(h, 4, "t", 0, LATEST, current_leader_epoch=0)
        assert (found.error_code, found.offset, found.leader_epoch) == (0, 3, 0)
        ahead = await _list(h, 4, "t", 0, LATEST, current_leader_epoch=1)
        assert ahead.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH

    broker.run(scenario)
