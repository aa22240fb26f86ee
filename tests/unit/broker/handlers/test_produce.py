"""Produce (0): appends answered with their offsets, and every refusal Kafka gives."""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest
from crc32c import crc32c

from strom.protocol.compression import CompressionType
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from strom.protocol.records.v2_builder import build_record_batch
from tests.support.broker_harness import BrokerHarness, BrokerRunner, batch, produce_request


def _partition(response: Any) -> Any:
    ((partition,),) = [t.partition_responses for t in response.responses]
    return partition


@pytest.mark.parametrize("version", [3, 5, 7, 9, 11])
def test_appends_are_answered_with_their_base_offsets(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        for expected_base, values in ((0, [b"a", b"b", b"c"]), (3, [b"d"])):
            response = await h.request(produce_request("t", 0, batch(values)), version=version)
            assert [t.name for t in response.responses] == ["t"]
            partition = _partition(response)
            assert (partition.index, partition.error_code, partition.base_offset) == (0, 0, expected_base)
            assert partition.log_append_time_ms == -1  # CreateTime topic
            if version >= 5:
                assert partition.log_start_offset == 0
        assert await h.list_offset("t", 0) == 4

    broker.run(scenario)


def test_a_log_append_time_topic_answers_the_append_time(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("stamped", configs={"message.timestamp.type": "LogAppendTime"})
        response = await h.request(produce_request("stamped", 0, batch([b"x"], timestamp=5)), version=9)
        partition = _partition(response)
        assert partition.error_code == ErrorCode.NONE
        assert partition.log_append_time_ms > 5

    broker.run(scenario)


def test_acks_zero_appends_and_gets_no_answer(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("quiet")
        assert await h.request(produce_request("quiet", 0, batch([b"a", b"b"]), acks=0), version=9) is None
        assert await h.list_offset("quiet", 0) == 2

    broker.run(scenario)


@pytest.mark.parametrize(("topic", "partition"), [("absent", 0), ("t", 1), ("t", -1)])
def test_an_unknown_topic_or_partition_is_refused(broker: BrokerRunner, topic: str, partition: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=1)
        response = await h.request(produce_request(topic, partition, batch([b"x"])), version=9)
        assert _partition(response).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # Kafka looks the partition up before it validates the record set.
        empty = await h.request(produce_request(topic, partition, b""), version=9)
        assert _partition(empty).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.run(scenario, {"auto.create.topics.enable": "false"})


@pytest.mark.parametrize("acks", [2, -2, 5])
def test_invalid_acks_are_refused_for_every_partition(broker: BrokerRunner, acks: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=2)
        request = ProduceRequest(acks=acks, timeout_ms=1000, topic_data=(TopicProduceData("t", (
            PartitionProduceData(0, batch([b"x"])), PartitionProduceData(1, batch([b"y"])),
        )),))
        response = await h.request(request, version=9)
        errors = [(p.index, p.error_code) for t in response.responses for p in t.partition_responses]
        assert errors == [(0, ErrorCode.INVALID_REQUIRED_ACKS), (1, ErrorCode.INVALID_REQUIRED_ACKS)]
        assert await h.list_offset("t", 0) == 0

    broker.run(scenario)


def test_null_records_are_corrupt(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        response = await h.request(produce_request("t", 0, None), version=9)
        assert _partition(response).error_code == ErrorCode.CORRUPT_MESSAGE

    broker.run(scenario)


def test_a_batch_with_a_bad_crc_is_corrupt(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        damaged = bytearray(batch([b"payload"]))
        damaged[-3] ^= 0xFF  # a byte of the value, under the CRC
        response = await h.request(produce_request("t", 0, bytes(damaged)), version=9)
        assert _partition(response).error_code == ErrorCode.CORRUPT_MESSAGE
        assert await h.list_offset("t", 0) == 0

    broker.run(scenario)


def test_an_empty_record_set_is_an_invalid_record(broker: BrokerRunner) -> None:
    """Kafka's ProduceRequest.validateRecords (v3+): "must have at least one record batch" → INVALID_RECORD."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        response = await h.request(produce_request("t", 0, b""), version=9)
        assert _partition(response).error_code == ErrorCode.INVALID_RECORD

    broker.run(scenario)


def test_two_batches_for_one_partition_are_an_invalid_record(broker: BrokerRunner) -> None:
    """Kafka (v3+): "only allowed to contain exactly one record batch" → INVALID_RECORD."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        response = await h.request(produce_request("t", 0, batch([b"a"]) + batch([b"b"])), version=9)
        assert _partition(response).error_code == ErrorCode.INVALID_RECORD
        assert await h.list_offset("t", 0) == 0

    broker.run(scenario)


def test_a_keyless_record_on_a_compacted_topic_is_an_invalid_record(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("table", configs={"cleanup.policy": "compact"})
        keyless = await h.request(produce_request("table", 0, batch([b"v1", b"v2"], keys=[b"k", None])), version=9)
        assert _partition(keyless).error_code == ErrorCode.INVALID_RECORD
        keyed = await h.request(produce_request("table", 0, batch([b"v1", b"v2"], keys=[b"k", b"j"])), version=9)
        assert _partition(keyed).error_code == ErrorCode.NONE

    broker.run(scenario)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_keyless_records_on_a_compacted_topic_are_named_one_by_one(broker: BrokerRunner, compression: str) -> None:
    """KIP-467 (v8+): the answer names each refused record by its index in the batch, so a
    client fails those and not the rest (100 records, every tenth keyless: 10 named)."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("table", configs={"cleanup.policy": "compact"})
        keys = [None if i % 10 == 3 else b"k%d" % i for i in range(100)]
        records = bytes(build_record_batch(((k, b"v", (), 1000) for k in keys),
                                           compression=CompressionType[compression.upper()]))
        response = await h.request(produce_request("table", 0, records), version=9)
        partition = _partition(response)
        assert partition.error_code == ErrorCode.INVALID_RECORD
        assert [e.batch_index for e in partition.record_errors] == [i for i in range(100) if i % 10 == 3]
        assert all("without key" in (e.batch_index_error_message or "") for e in partition.record_errors)
        assert partition.error_message.startswith("One or more records have been rejected due to 10 record errors")
        assert await h.list_offset("table", 0) == 0

    broker.run(scenario)


def test_timestamps_outside_the_topics_bounds_are_named_one_by_one(broker: BrokerRunner) -> None:
    """KIP-937 bounds with KIP-467 answers: records more than before.max.ms in the past or
    after.max.ms in the future are named; the batch is refused as INVALID_TIMESTAMP."""

    async def scenario(h: BrokerHarness) -> None:
        hour = 3_600_000
        await h.create_topic("bounded", configs={"message.timestamp.before.max.ms": str(hour),
                                                 "message.timestamp.after.max.ms": str(hour)})
        now = int(time.time() * 1000)
        stamps = [now, now - 2 * hour, now + 10, now + 2 * hour, -1]
        records = bytes(build_record_batch((b"k", b"v", (), t) for t in stamps))
        partition = _partition(await h.request(produce_request("bounded", 0, records), version=9))
        assert partition.error_code == ErrorCode.INVALID_TIMESTAMP
        assert [e.batch_index for e in partition.record_errors] == [1, 3]
        assert "is out of range" in (partition.record_errors[0].batch_index_error_message or "")
        assert partition.error_message == "One or more records have been rejected due to invalid timestamp"
        assert await h.list_offset("bounded", 0) == 0
        fine = bytes(build_record_batch((b"k", b"v", (), t) for t in (now, now - hour // 2)))
        assert _partition(await h.request(produce_request("bounded", 0, fine), version=9)).error_code == 0

    broker.run(scenario)


def test_the_deprecated_difference_bound_applies_where_the_new_ones_are_unset(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("old-style", configs={"message.timestamp.difference.max.ms": "60000"})
        now = int(time.time() * 1000)
        records = bytes(build_record_batch((b"k", b"v", (), t) for t in (now - 120_000, now, now + 120_000)))
        partition = _partition(await h.request(produce_request("old-style", 0, records), version=9))
        assert partition.error_code == ErrorCode.INVALID_TIMESTAMP
        assert [e.batch_index for e in partition.record_errors] == [0, 2]

    broker.run(scenario)


def test_a_log_append_time_topic_does_not_bound_producer_timestamps(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("stamped-bounded", configs={"message.timestamp.type": "LogAppendTime",
                                                         "message.timestamp.before.max.ms": "1000"})
        records = bytes(build_record_batch([(b"k", b"v", (), 5)]))
        assert _partition(await h.request(produce_request("stamped-bounded", 0, records), version=9)).error_code == 0

    broker.run(scenario)


def test_record_errors_are_absent_before_produce_v8(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("table", configs={"cleanup.policy": "compact"})
        response = await h.request(produce_request("table", 0, batch([b"a", b"b"], keys=[b"k", None])), version=7)
        partition = _partition(response)
        assert partition.error_code == ErrorCode.INVALID_RECORD
        assert partition.record_errors == ()

    broker.run(scenario)


def test_a_batch_over_max_message_bytes_is_too_large(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("small", configs={"max.message.bytes": "200"})
        response = await h.request(produce_request("small", 0, batch([b"x" * 500])), version=9)
        assert _partition(response).error_code == ErrorCode.MESSAGE_TOO_LARGE
        fits = await h.request(produce_request("small", 0, batch([b"x" * 20])), version=9)
        assert _partition(fits).error_code == ErrorCode.NONE

    broker.run(scenario)


def test_a_batch_whose_record_count_disagrees_with_its_offsets_is_an_invalid_record(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        forged = bytearray(batch([b"a", b"b"]))
        struct.pack_into(">i", forged, 57, 3)  # the records count (the CRC covers it: recomputed below)
        struct.pack_into(">I", forged, 17, crc32c(bytes(forged[21:])))
        response = await h.request(produce_request("t", 0, bytes(forged)), version=9)
        assert _partition(response).error_code == ErrorCode.INVALID_RECORD

    broker.run(scenario)
