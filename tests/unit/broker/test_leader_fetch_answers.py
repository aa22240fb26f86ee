"""What a leader answers about its log while replicating: a follower's Fetch v12 whose
``last_fetched_epoch`` diverges gets ``diverging_epoch`` and no records (KIP-320's
fetch-time truncation), ListOffsets gets OFFSET_NOT_AVAILABLE while a new leader's HW is
below its epoch's start (KIP-207), and a partition this broker only follows serves
neither consumers nor followers (no KIP-392).

The in-process broker; the partition gets its follower the way the controller's
LeaderAndIsr gives it one (``make_leader`` with replicas and ISR), and the follower is
played with real Fetch requests carrying its ``replica_id``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from strom.broker.partition import Partition
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from tests.support.broker_harness import (
    BrokerHarness,
    BrokerRunner,
    batch,
    produce_request,
    records_of,
)
from tests.support.broker_harness import broker as broker  # the fixture
from tests.support.fetch_requests import fetch

TOPIC = "replicated"
FOLLOWER = 2


async def _produce(h: BrokerHarness, values: list[bytes], timestamp: int | None = None) -> None:
    request = produce_request(TOPIC, 0, batch(values, timestamp=timestamp), acks=1)
    response = await h.request(request, version=9)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def _lead(h: BrokerHarness, epoch: int, isr: tuple[int, ...]) -> Partition:
    partition = h.broker.replica_manager.get_partition(TOPIC, 0)
    assert partition is not None
    me = h.broker.node_id
    partition.make_leader(epoch, (me, FOLLOWER), frozenset(isr))
    return partition


async def _follower_fetch(h: BrokerHarness, offset: int, last_fetched_epoch: int, *, max_wait_ms: int = 0,
                          min_bytes: int = 0, session: tuple[int, int] = (0, -1)) -> Any:
    response = await _follower_fetch_response(h, offset, last_fetched_epoch, max_wait_ms=max_wait_ms,
                                              min_bytes=min_bytes, session=session)
    return response.responses[0].partitions[0]


async def _follower_fetch_response(h: BrokerHarness, offset: int, last_fetched_epoch: int, *, max_wait_ms: int = 0,
                                   min_bytes: int = 0, session: tuple[int, int] = (0, -1)) -> Any:
    request = fetch([(TOPIC, 0, offset)], replica_id=FOLLOWER, version=12, max_wait_ms=max_wait_ms,
                    min_bytes=min_bytes, session_id=session[0], session_epoch=session[1])
    topic = request.topics[0]
    with_epoch = dataclasses.replace(topic, partitions=tuple(
        dataclasses.replace(p, last_fetched_epoch=last_fetched_epoch) for p in topic.partitions))
    request = dataclasses.replace(request, topics=(with_epoch,))
    return await h.request(request, version=12)


async def _list_offset(h: BrokerHarness, timestamp: int, replica_id: int = -1) -> tuple[int, int]:
    request = ListOffsetsRequest(replica_id=replica_id, topics=(
        ListOffsetsTopic(TOPIC, (ListOffsetsPartition(0, timestamp=timestamp),)),))
    response = await h.request(request, version=7)
    found = response.topics[0].partitions[0]
    return found.error_code, found.offset


def test_a_follower_whose_last_fetched_epoch_diverges_gets_the_epoch_to_truncate_to(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC)
        await _produce(h, [b"e0-%d" % i for i in range(5)])  # epoch 0: offsets 0-4
        partition = _lead(h, 2, (h.broker.node_id, FOLLOWER))  # epoch 2 starts at 5
        await _produce(h, [b"e2-%d" % i for i in range(3)])  # offsets 5-7
        assert partition.log.leader_epoch_cache.entries == [(0, 0), (2, 5)]
        # Epoch 1 was never ours: the largest below it, 0, ended at 5.
        data = await _follower_fetch(h, 7, last_fetched_epoch=1)
        assert (data.error_code, data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (0, 0, 5)
        assert records_of(data.records) == []
        # Epoch 0 is ours but ended at 5, before the follower's offset 6.
        data = await _follower_fetch(h, 6, last_fetched_epoch=0)
        assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (0, 5)
        assert data.high_watermark == partition.high_watermark
        # A diverging fetch teaches the leader nothing of the follower.
        assert partition.followers[FOLLOWER].log_end_offset == -1
        # Where the follower's log matches, it gets records as usual and its progress counts.
        data = await _follower_fetch(h, 5, last_fetched_epoch=0)
        assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (-1, -1)
        assert [bytes(r.value or b"") for r in records_of(data.records)] == [b"e2-0", b"e2-1", b"e2-2"]
        assert partition.followers[FOLLOWER].log_end_offset == 5
        data = await _follower_fetch(h, 8, last_fetched_epoch=2)
        assert (data.error_code, data.diverging_epoch.epoch, data.high_watermark) == (0, -1, 5)
        assert partition.high_watermark == 8  # the answer has the HW as read; the fetch moved it after
        # An epoch this leader never had and nothing after it: its end cannot be known here.
        data = await _follower_fetch(h, 8, last_fetched_epoch=9)
        assert data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE

    broker.run(scenario)


def test_an_incremental_fetch_session_always_carries_a_diverging_partition(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC)
        await _produce(h, [b"a", b"b"])  # epoch 0: offsets 0-1
        _lead(h, 3, (h.broker.node_id, FOLLOWER))
        full = await _follower_fetch_response(h, 2, last_fetched_epoch=0, session=(0, 0))
        assert full.session_id > 0 and full.responses[0].partitions[0].diverging_epoch.epoch == -1
        # Nothing else changed (no records, same HW): only the divergence makes it news.
        incremental = await _follower_fetch_response(h, 3, last_fetched_epoch=0, session=(full.session_id, 1))
        (data,) = incremental.responses[0].partitions
        assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (0, 2)

    broker.run(scenario)


def test_a_diverging_answer_does_not_wait_for_min_bytes(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC)
        await _produce(h, [b"a", b"b"])
        _lead(h, 3, (h.broker.node_id, FOLLOWER))
        data = await asyncio.wait_for(
            _follower_fetch(h, 2, last_fetched_epoch=1, min_bytes=1, max_wait_ms=60_000), 30)
        assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (0, 2)

    broker.run(scenario)


def test_list_offsets_says_offset_not_available_while_a_new_leaders_hw_is_below_its_epoch_start(
        broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC)
        await _produce(h, [b"a", b"b"], timestamp=1_000)
        await _produce(h, [b"c", b"d", b"e"], timestamp=2_000)  # offsets 2-4
        partition = h.broker.replica_manager.partition_or_error(TOPIC, 0)
        me = h.broker.node_id
        # As a follower whose HW lagged the old leader's (the fetcher sets it) ...
        partition.make_follower(FOLLOWER, 1, (me, FOLLOWER), frozenset({me, FOLLOWER}))
        partition.log.update_high_watermark(2)
        # ... elected leader: epoch 2 starts at 5, the HW is 2 until the ISR has caught up.
        _lead(h, 2, (me, FOLLOWER))
        assert (partition.leader_epoch_start_offset, partition.high_watermark) == (5, 2)
        assert await _list_offset(h, -1) == (ErrorCode.OFFSET_NOT_AVAILABLE, -1)
        assert (await _list_offset(h, 2_000))[0] == ErrorCode.OFFSET_NOT_AVAILABLE  # found past the HW
        assert (await _list_offset(h, -3))[0] == ErrorCode.OFFSET_NOT_AVAILABLE  # max timestamp past the HW
        assert await _list_offset(h, 1_000) == (ErrorCode.NONE, 0)  # below the HW: answered
        assert await _list_offset(h, 9_000) == (ErrorCode.NONE, -1)  # no such record: none, not an error
        assert await _list_offset(h, -2) == (ErrorCode.NONE, 0)
        assert await _list_offset(h, -1, replica_id=-2) == (ErrorCode.NONE, 5)  # not a client: the log end
        # The follower catches up: the HW reaches the epoch start, answers are normal again.
        await _follower_fetch(h, 5, last_fetched_epoch=0)
        assert partition.high_watermark == 5
        assert await _list_offset(h, -1) == (ErrorCode.NONE, 5)
        assert await _list_offset(h, 2_000) == (ErrorCode.NONE, 2)

    broker.run(scenario)


def test_a_partition_only_followed_here_serves_neither_consumers_nor_followers(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC)
        await _produce(h, [b"a"])
        partition = h.broker.replica_manager.partition_or_error(TOPIC, 0)
        me = h.broker.node_id
        partition.make_follower(FOLLOWER, 1, (me, FOLLOWER), frozenset({me, FOLLOWER}))
        consumer = await h.request(fetch([(TOPIC, 0, 0)], version=12), version=12)
        assert consumer.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        data = await _follower_fetch(h, 0, last_fetched_epoch=0)
        assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    broker.run(scenario)


def test_a_produce_to_a_partition_this_broker_no_longer_leads_names_the_new_leader(broker: BrokerRunner) -> None:
    """KIP-951 (Produce v10+): NOT_LEADER_OR_FOLLOWER comes with the current leader and
    epoch (from the LeaderAndIsr that demoted this broker) and the leader's endpoint on
    the client's listener; before v10, the bare error."""
    from strom.broker.metadata_cache import BrokerEndpoint, LiveBroker, PartitionState

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic(TOPIC)
        await _produce(h, [b"a"])
        me = h.broker.node_id
        listener = h.broker.request_listener()
        h.broker.metadata.update_metadata(me, [
            LiveBroker(me, (BrokerEndpoint("127.0.0.1", 9092, listener),)),
            LiveBroker(FOLLOWER, (BrokerEndpoint("127.0.0.9", 19092, listener),), rack="r2"),
        ], [((TOPIC, 0), PartitionState(me, 0, (me, FOLLOWER), (me, FOLLOWER)))])
        partition = h.broker.replica_manager.get_partition(TOPIC, 0)
        assert partition is not None
        partition.make_follower(FOLLOWER, 3, (me, FOLLOWER), frozenset({me, FOLLOWER}))  # newer than the cache
        request = produce_request(TOPIC, 0, batch([b"b"]), acks=1)
        answer = await h.request(request, version=10)
        refused = answer.responses[0].partition_responses[0]
        assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (FOLLOWER, 3)
        assert [(n.node_id, n.host, n.port, n.rack) for n in answer.node_endpoints] == [(FOLLOWER, "127.0.0.9", 19092, "r2")]
        old = await h.request(request, version=9)
        assert old.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert old.responses[0].partition_responses[0].current_leader.leader_id == -1
        assert old.node_endpoints == ()
        # An offline partition (no leader) names none.
        partition.make_follower(-1, 4, (me, FOLLOWER), frozenset({me, FOLLOWER}))
        h.broker.metadata.update_metadata(me, h.broker.metadata.live_brokers(),
                                          [((TOPIC, 0), PartitionState(-1, 4, (me,), (me, FOLLOWER)))])
        offline = await h.request(request, version=10)
        assert offline.responses[0].partition_responses[0].current_leader.leader_id == -1
        assert offline.node_endpoints == ()

    broker.run(scenario)
