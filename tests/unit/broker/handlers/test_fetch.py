"""Fetch (1): reads by name and by topic id, and the per-partition errors Kafka answers.

Long polls and fetch sessions have modules of their own (test_fetch_long_poll.py,
test_fetch_sessions.py).
"""

from __future__ import annotations

import uuid

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.support.broker_harness import BrokerHarness, BrokerRunner, records_of
from tests.support.fetch_requests import fetch, partitions_of

BIG = b"v" * 6000  # over a few KiB: the broker answers with a file region (sendfile)


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_reads_records_by_topic_name(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.produce("t", 0, [b"a", b"b"], keys=[b"k1", None])
        await h.produce("t", 0, [BIG])
        response = await h.request(fetch([("t", 0, 0)], version=version), version=version)
        assert response.error_code == ErrorCode.NONE
        partition = partitions_of(response)[("t", 0)]
        assert partition.error_code == ErrorCode.NONE
        assert (partition.high_watermark, partition.last_stable_offset) == (3, 3)
        if version >= 5:  # log_start_offset came in v5
            assert partition.log_start_offset == 0
        assert [(r.offset, r.key, r.value) for r in records_of(partition.records)] == [
            (0, b"k1", b"a"), (1, None, b"b"), (2, None, BIG),
        ]
        later = await h.request(fetch([("t", 0, 2)], version=version), version=version)
        assert [r.offset for r in records_of(partitions_of(later)[("t", 0)].records)] == [2]

    broker.run(scenario)


@pytest.mark.parametrize("version", [13, 15, 16])
def test_reads_records_by_topic_id(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        topic_id = await h.create_topic("t")
        await h.produce("t", 0, [b"a"])
        await h.produce("t", 0, [b"b"])  # a batch of its own: the answer starts at the batch holding the offset
        response = await h.request(fetch([("t", 0, 1)], version=version, topic_ids={"t": topic_id}), version=version)
        (topic,) = response.responses
        assert topic.topic_id == topic_id
        partition = partitions_of(response)[(topic_id, 0)]
        assert partition.error_code == ErrorCode.NONE
        assert [(r.offset, r.value) for r in records_of(partition.records)] == [(1, b"b")]

    broker.run(scenario)


def test_at_the_log_end_the_answer_is_empty(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.produce("t", 0, [b"a"])
        partition = partitions_of(await h.request(fetch([("t", 0, 1)]), version=12))[("t", 0)]
        assert (partition.error_code, partition.high_watermark) == (ErrorCode.NONE, 1)
        assert records_of(partition.records) == []

    broker.run(scenario)


def test_the_first_batch_is_returned_even_above_the_partition_limit(broker: BrokerRunner) -> None:
    """KIP-74: a batch larger than partition_max_bytes still comes back, so consumers progress."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.produce("t", 0, [BIG])
        await h.produce("t", 0, [BIG])
        response = await h.request(fetch([("t", 0, 0)], partition_max_bytes=100), version=12)
        assert [r.offset for r in records_of(partitions_of(response)[("t", 0)].records)] == [0]

    broker.run(scenario)


@pytest.mark.parametrize("offset", [3, 100, -5])
def test_an_offset_beyond_the_log_is_out_of_range(broker: BrokerRunner, offset: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.produce("t", 0, [b"a", b"b"])
        partition = partitions_of(await h.request(fetch([("t", 0, offset)]), version=12))[("t", 0)]
        assert partition.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert records_of(partition.records) == []

    broker.run(scenario)


@pytest.mark.parametrize(("topic", "partition"), [("absent", 0), ("t", 4)])
def test_an_unknown_topic_or_partition_is_refused_per_partition(
    broker: BrokerRunner, topic: str, partition: int
) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.produce("t", 0, [b"a"])
        response = await h.request(fetch([("t", 0, 0), (topic, partition, 0)]), version=12)
        answered = partitions_of(response)
        assert answered[(topic, partition)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert answered[("t", 0)].error_code == ErrorCode.NONE  # the other partition is still read
        assert [r.value for r in records_of(answered[("t", 0)].records)] == [b"a"]

    broker.run(scenario)


def test_an_unknown_topic_id_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        unknown = uuid.uuid4()
        response = await h.request(fetch([("ghost", 0, 0)], version=13, topic_ids={"ghost": unknown}), version=13)
        assert partitions_of(response)[(unknown, 0)].error_code == ErrorCode.UNKNOWN_TOPIC_ID

    broker.run(scenario)


def test_a_current_leader_epoch_ahead_of_the_leader_is_unknown(broker: BrokerRunner) -> None:
    """KIP-320: the client's epoch (from Metadata) is checked; a newer one than the leader's is UNKNOWN_LEADER_EPOCH.

    FENCED_LEADER_EPOCH (an older epoch) needs a leader epoch above 0, which a single
    node never reaches through requests.
    """

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.produce("t", 0, [b"a"])
        metadata = await h.request(MetadataRequest(topics=(MetadataRequestTopic(name="t"),)), version=12)
        epoch = metadata.topics[0].partitions[0].leader_epoch
        assert epoch >= 0
        current = await h.request(fetch([("t", 0, 0)], current_leader_epoch=epoch), version=12)
        assert partitions_of(current)[("t", 0)].error_code == ErrorCode.NONE
        ahead = await h.request(fetch([("t", 0, 0)], current_leader_epoch=epoch + 1), version=12)
        assert partitions_of(ahead)[("t", 0)].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH

    broker.run(scenario)


@pytest.mark.parametrize("version", [12, 15])
def test_a_fetch_from_a_broker_that_is_no_replica_is_refused(broker: BrokerRunner, version: int) -> None:
    """replica_id >= 0 is a follower (v15+: in replica_state). Kafka's leader refuses one that is
    not among the partition's replicas with NOT_LEADER_OR_FOLLOWER; on one node every
    partition has this broker as its only replica, so every follower fetch is such a one.
    """

    async def scenario(h: BrokerHarness) -> None:
        topic_id = await h.create_topic("t")
        await h.produce("t", 0, [b"a", b"b", b"c"])
        request = fetch([("t", 0, 1)], version=version, replica_id=2, topic_ids={"t": topic_id})
        response = await h.request(request, version=version)
        (partition,) = partitions_of(response).values()
        assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert records_of(partition.records) == []

    broker.run(scenario)
