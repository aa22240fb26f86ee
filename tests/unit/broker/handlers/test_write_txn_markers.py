"""WriteTxnMarkers (27): COMMIT/ABORT control batches on led partitions, errors per producer
per partition, the last stable offset they release, and the group offsets they resolve."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.records import ControlRecordType, parse_control_record
from strom.protocol.records.header import iter_batches
from strom.protocol.records.v2 import decode_batch
from strom.protocol.topic_partition import TopicPartition
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.fetch_requests import fetch
from tests.unit.broker.handlers.txn_requests import (
    GROUP_PARTITION,
    UNVERIFIED,
    fetch_offsets,
    latest_offset,
    marker,
    produce_transactional,
    producer_id,
    txn_commit,
    write_markers,
)

DATA: TopicPartition = ("data", 0)


@pytest.mark.parametrize("version", [0, 1])
def test_a_commit_marker_releases_the_last_stable_offset(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("data")
        await h.produce("data", 0, [b"plain"])
        producer = await producer_id(h)
        first = await produce_transactional(h, DATA, producer, 0, [b"a", b"b"])
        assert (first, await latest_offset(h, DATA, read_committed=True)) == (1, 1)
        assert await latest_offset(h, DATA, read_committed=False) == 3
        assert await write_markers(h, marker(producer, True, [DATA], coordinator_epoch=3), version=version) == [
            (producer[0], "data", 0, ErrorCode.NONE)]
        # the marker takes offset 3; read_committed reads everything up to the log end
        assert await latest_offset(h, DATA, read_committed=True) == 4
        response = await h.request(fetch([("data", 0, 0)]), version=12)
        (part,) = response.responses[0].partitions
        assert (part.high_watermark, part.last_stable_offset) == (4, 4)
        batches = [(header.is_control, header.producer_id, pos) for pos, header in iter_batches(part.records)]
        assert [(control, pid) for control, pid, _ in batches] == [
            (False, -1), (False, producer[0]), (True, producer[0])]
        (control,) = decode_batch(part.records, batches[2][2]).records
        assert parse_control_record(control.key, control.value)[::2] == (ControlRecordType.COMMIT, 3)

    broker.run(scenario)


def test_errors_per_producer_and_partition(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("data", partitions=2)
        first, second = await producer_id(h), await producer_id(h)
        await produce_transactional(h, DATA, first, 0, [b"x"])
        answers = await write_markers(
            h,
            marker(first, False, [DATA, ("data", 5), ("missing", 0)], coordinator_epoch=2),
            marker(second, True, [("data", 1)]),
        )
        assert answers == [
            (first[0], "data", 0, ErrorCode.NONE),
            (first[0], "data", 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (first[0], "missing", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (second[0], "data", 1, ErrorCode.NONE),
        ]
        assert await latest_offset(h, DATA, read_committed=True) == 2

    broker.run(scenario)


def test_stale_coordinator_and_producer_epochs_are_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("data")
        pid, epoch = await producer_id(h)
        await produce_transactional(h, DATA, (pid, epoch), 0, [b"x"])
        assert await write_markers(h, marker((pid, epoch), True, [DATA], coordinator_epoch=5)) == [
            (pid, "data", 0, ErrorCode.NONE)]
        # a coordinator that lost its partition to a newer one (epoch 4 < 5)
        assert await write_markers(h, marker((pid, epoch), False, [DATA], coordinator_epoch=4)) == [
            (pid, "data", 0, ErrorCode.TRANSACTION_COORDINATOR_FENCED)]
        # a fencing abort bumps the epoch; a marker of the old epoch is then refused
        assert await write_markers(h, marker((pid, epoch + 1), False, [DATA], coordinator_epoch=5)) == [
            (pid, "data", 0, ErrorCode.NONE)]
        assert await write_markers(h, marker((pid, epoch), False, [DATA], coordinator_epoch=5)) == [
            (pid, "data", 0, ErrorCode.INVALID_PRODUCER_EPOCH)]
        assert await latest_offset(h, DATA, read_committed=False) == 3  # the refused ones wrote nothing

    broker.run(scenario)


def test_markers_on_data_and_offsets_partitions_together(broker: BrokerRunner) -> None:
    """One marker over the producer's data partition and the group's offsets partition, as the
    coordinator sends it for a read-process-write transaction."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("data")
        await h.create_topic("in")
        producer = await producer_id(h)
        await produce_transactional(h, DATA, producer, 0, [b"out"])
        assert await txn_commit(h, "g", producer, {("in", 0): 42}) == {("in", 0): ErrorCode.NONE}
        assert await fetch_offsets(h, "g", ("in", 0), require_stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert [error for *_, error in await write_markers(h, marker(producer, True, [DATA, GROUP_PARTITION]))] == [
            ErrorCode.NONE, ErrorCode.NONE]
        assert await fetch_offsets(h, "g", ("in", 0), require_stable=True) == (42, ErrorCode.NONE)
        assert await latest_offset(h, DATA, read_committed=True) == 2

    broker.run(scenario, UNVERIFIED)
