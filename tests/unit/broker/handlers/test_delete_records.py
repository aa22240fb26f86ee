"""DeleteRecords (21): move a partition's log start offset up; Kafka's refusals."""

from __future__ import annotations

from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from tests.support.broker_harness import EARLIEST, BrokerHarness, BrokerRunner, records_of
from tests.support.fetch_requests import fetch, partitions_of

HIGH_WATERMARK = -1  # DeleteRecords' offset -1: up to the high watermark


async def _delete(h: BrokerHarness, topic: str, partition: int, offset: int, version: int = 2) -> Any:
    request = DeleteRecordsRequest(
        topics=(DeleteRecordsTopic(topic, (DeleteRecordsPartition(partition, offset),)),), timeout_ms=1000
    )
    response = await h.request(request, version=version)
    ((result,),) = [t.partitions for t in response.topics]
    return result


async def _five(h: BrokerHarness, configs: dict[str, str] | None = None) -> None:
    await h.create_topic("t", configs=configs)
    for value in (b"0", b"1", b"2", b"3", b"4"):
        await h.produce("t", 0, [value])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_records_below_the_new_log_start_are_gone(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _five(h)
        result = await _delete(h, "t", 0, 3, version)
        assert (result.partition_index, result.error_code, result.low_watermark) == (0, 0, 3)
        assert await h.list_offset("t", 0, EARLIEST) == 3
        below = partitions_of(await h.request(fetch([("t", 0, 1)]), version=12))[("t", 0)]
        assert below.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        kept = partitions_of(await h.request(fetch([("t", 0, 3)]), version=12))[("t", 0)]
        assert (kept.log_start_offset, [r.value for r in records_of(kept.records)]) == (3, [b"3", b"4"])

    broker.run(scenario)


def test_offset_minus_one_deletes_up_to_the_high_watermark(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _five(h)
        result = await _delete(h, "t", 0, HIGH_WATERMARK)
        assert (result.error_code, result.low_watermark) == (0, 5)
        assert await h.list_offset("t", 0, EARLIEST) == 5

    broker.run(scenario)


def test_an_offset_below_the_log_start_changes_nothing(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _five(h)
        await _delete(h, "t", 0, 3)
        result = await _delete(h, "t", 0, 1)
        assert (result.error_code, result.low_watermark) == (0, 3)
        assert await h.list_offset("t", 0, EARLIEST) == 3

    broker.run(scenario)


@pytest.mark.parametrize("offset", [6, 1000, -2])
def test_an_offset_past_the_high_watermark_or_negative_is_out_of_range(broker: BrokerRunner, offset: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _five(h)
        result = await _delete(h, "t", 0, offset)
        assert (result.error_code, result.low_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
        assert await h.list_offset("t", 0, EARLIEST) == 0

    broker.run(scenario)


@pytest.mark.parametrize(("topic", "partition"), [("absent", 0), ("t", 1)])
def test_an_unknown_topic_or_partition_is_refused(broker: BrokerRunner, topic: str, partition: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        result = await _delete(h, topic, partition, 0)
        assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.run(scenario)


def test_a_compacted_topic_refuses_with_policy_violation(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("table", configs={"cleanup.policy": "compact"})
        await h.produce("table", 0, [b"v", b"w"], keys=[b"k", b"j"])
        result = await _delete(h, "table", 0, 1)
        assert result.error_code == ErrorCode.POLICY_VIOLATION
        assert await h.list_offset("table", 0, EARLIEST) == 0

    broker.run(scenario)


def test_a_compact_and_delete_topic_allows_it(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("both", configs={"cleanup.policy": "compact,delete"})
        await h.produce("both", 0, [b"v", b"w"], keys=[b"k", b"j"])
        result = await _delete(h, "both", 0, 1)
        assert (result.error_code, result.low_watermark) == (0, 1)

    broker.run(scenario)
