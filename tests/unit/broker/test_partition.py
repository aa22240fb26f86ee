"""The Partition seam: per-partition leader epochs, the ISR's high watermark, followers'
reads, and the purgatory that wakes on high-watermark movement rather than on append.

One node has no followers, so these tests give a partition a second replica the way
the controller will (``make_leader`` with replicas and ISR) and play that follower's
part with real Fetch requests carrying its ``replica_id`` through the in-process
broker. Everything else is the real broker.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from strom.broker.partition import Partition
from strom.protocol.error_codes import ErrorCode
from strom.protocol.records.header import iter_batches
from tests.support.broker_harness import (
    EARLIEST,
    LATEST,
    BrokerHarness,
    BrokerRunner,
    batch,
    produce_request,
    records_of,
)
from tests.support.broker_harness import broker as broker  # the fixture
from tests.support.fetch_requests import fetch

FOLLOWER = 2
TOPIC = "replicated"


def _with_follower(h: BrokerHarness, index: int = 0, epoch: int = 1) -> Partition:
    """Give the partition a follower in the ISR, as the controller's LeaderAndIsr would."""
    partition = h.broker.replica_manager.partition_or_error(TOPIC, index)
    me = h.broker.node_id
    partition.make_leader(epoch, (me, FOLLOWER), frozenset({me, FOLLOWER}))
    return partition


async def _produce(h: BrokerHarness, values: list[bytes], acks: int = 1, timeout_ms: int = 5000) -> tuple[int, int]:
    request = produce_request(TOPIC, 0, batch(values), acks=acks)
    request = type(request)(acks=acks, timeout_ms=timeout_ms, topic_data=request.topic_data)
    response = await h.request(request, version=9)
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


async def _fetch(h: BrokerHarness, offset: int, *, replica_id: int = -1, min_bytes: int = 0,
                 max_wait_ms: int = 0, current_leader_epoch: int = -1, version: int = 12,
                 topic_id: uuid.UUID | None = None) -> tuple[int, int, list[bytes]]:
    request = fetch([(TOPIC, 0, offset)], replica_id=replica_id, min_bytes=min_bytes, max_wait_ms=max_wait_ms,
                    current_leader_epoch=current_leader_epoch, version=version,
                    topic_ids={TOPIC: topic_id} if topic_id else None)
    response = await h.request(request, version=version)
    data = response.responses[0].partitions[0]
    return data.error_code, data.high_watermark, [bytes(r.value) for r in records_of(data.records)]


def test_the_high_watermark_waits_for_the_isr_and_a_follower_reads_to_the_log_end(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        topic_id = await h.create_topic(TOPIC)
        partition = _with_follower(h)
        assert await _produce(h, [b"a", b"b", b"c"]) == (ErrorCode.NONE, 0)
        assert (partition.log.log_end_offset, partition.high_watermark) == (3, 0)
        # Consumers see nothing past the high watermark ...
        assert await _fetch(h, 0) == (ErrorCode.NONE, 0, [])
        assert await h.list_offset(TOPIC, 0, LATEST) == 0
        # ... the follower reads to the log end; its fetch offset is its log end offset.
        assert await _fetch(h, 0, replica_id=FOLLOWER) == (ErrorCode.NONE, 0, [b"a", b"b", b"c"])
        assert partition.high_watermark == 0
        # The answer carries the HW as read; the follower's progress moves it after (as Kafka).
        assert await _fetch(h, 3, replica_id=FOLLOWER, version=15, topic_id=topic_id) == (ErrorCode.NONE, 0, [])
        assert partition.high_watermark == 3
        assert await _fetch(h, 0) == (ErrorCode.NONE, 3, [b"a", b"b", b"c"])
        assert await h.list_offset(TOPIC, 0, LATEST) == 3

    broker.run(scenario)


def test_a_waiting_fetch_wakes_when_the_high_watermark_moves_not_on_append(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC)
        _with_follower(h)
        started = time.monotonic()
        consumer = asyncio.create_task(_fetch(h, 0, min_bytes=1, max_wait_ms=10_000))
        await asyncio.sleep(0.05)
        await _produce(h, [b"x"])
        await asyncio.sleep(0.1)
        assert not consumer.done(), "an append below the high watermark must not answer a consumer"
        await _fetch(h, 1, replica_id=FOLLOWER)  # the follower has it: the HW moves to 1
        error, high_watermark, values = await asyncio.wait_for(consumer, 5)
        assert (error, high_watermark, values) == (ErrorCode.NONE, 1, [b"x"])
        assert time.monotonic() - started < 5, "woken by the high watermark, not by max_wait_ms"

    broker.run(scenario)


def test_a_follower_fetch_waits_for_appends(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC)
        _with_follower(h)
        follower = asyncio.create_task(_fetch(h, 0, replica_id=FOLLOWER, min_bytes=1, max_wait_ms=10_000))
        await asyncio.sleep(0.05)
        assert not follower.done()
        await _produce(h, [b"y"])
        error, _, values = await asyncio.wait_for(follower, 5)
        assert (error, values) == (ErrorCode.NONE, [b"y"])

    broker.run(scenario)


def test_acks_all_waits_for_the_isr_and_times_out_without_it(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC)
        _with_follower(h)
        producer = asyncio.create_task(_produce(h, [b"p"], acks=-1, timeout_ms=10_000))
        await asyncio.sleep(0.1)
        assert not producer.done(), "acks=-1 is answered only once the ISR has the records"
        await _fetch(h, 1, replica_id=FOLLOWER)
        assert await asyncio.wait_for(producer, 5) == (ErrorCode.NONE, 0)
        # Nobody fetches this one: REQUEST_TIMED_OUT after the request's timeout.
        error, _ = await _produce(h, [b"q"], acks=-1, timeout_ms=100)
        assert error == ErrorCode.REQUEST_TIMED_OUT
        # acks=1 does not wait for the follower.
        assert await _produce(h, [b"r"], acks=1) == (ErrorCode.NONE, 2)

    broker.run(scenario)


def test_acks_all_is_refused_while_the_isr_is_below_min_insync_replicas(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC, configs={"min.insync.replicas": "2"})
        error, _ = await _produce(h, [b"a"], acks=-1)
        assert error == ErrorCode.NOT_ENOUGH_REPLICAS
        assert await _produce(h, [b"a"], acks=1) == (ErrorCode.NONE, 0)
        _with_follower(h)  # two in the ISR now
        await _fetch(h, 1, replica_id=FOLLOWER)
        producer = asyncio.create_task(_produce(h, [b"b"], acks=-1))
        await asyncio.sleep(0.05)
        await _fetch(h, 2, replica_id=FOLLOWER)
        assert await asyncio.wait_for(producer, 5) == (ErrorCode.NONE, 1)

    broker.run(scenario)


def test_a_fetch_from_a_broker_that_is_not_a_replica_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC)
        await _produce(h, [b"a"])
        error, _, values = await _fetch(h, 0, replica_id=7)
        assert (error, values) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, [])

    broker.run(scenario)


def test_leader_epochs_are_per_partition_stamped_on_batches_and_kept_across_restarts(broker: BrokerRunner) -> None:
    async def first_run(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC, partitions=2)
        partition = h.broker.replica_manager.partition_or_error(TOPIC, 0)
        me = h.broker.node_id
        partition.make_leader(3, (me,), frozenset({me}))
        await _produce(h, [b"e3"])
        assert h.broker.replica_manager.partition_or_error(TOPIC, 1).leader_epoch == 0
        # The batch carries the partition's epoch; the epoch cache says where it began.
        read = h.broker.replica_manager.partition_or_error(TOPIC, 0).log.read(0, 1 << 20)
        assert read.region is not None
        headers = [header for _, header in iter_batches(read.region.read(partition.log.fs))]
        assert [header.partition_leader_epoch for header in headers] == [3]
        assert partition.log.leader_epoch_cache.entries == [(3, 0)]
        # Fencing is per partition: epoch 2 is stale for partition 0, current for none.
        assert (await _fetch(h, 0, current_leader_epoch=2))[0] == ErrorCode.FENCED_LEADER_EPOCH
        assert (await _fetch(h, 0, current_leader_epoch=4))[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert (await _fetch(h, 0, current_leader_epoch=3))[0] == ErrorCode.NONE

    async def second_run(h: BrokerHarness) -> None:
        assert h.broker.replica_manager.partition_or_error(TOPIC, 0).leader_epoch == 3
        assert h.broker.replica_manager.partition_or_error(TOPIC, 1).leader_epoch == 0
        assert await h.list_offset(TOPIC, 0, EARLIEST) == 0
        assert await _fetch(h, 0, current_leader_epoch=3) == (ErrorCode.NONE, 1, [b"e3"])

    broker.run(first_run)
    broker.run(second_run)
