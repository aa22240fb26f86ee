"""Cluster-mode Metadata answers spliced from remembered topic bytes are the plain encoder's, byte for byte.

The broker answers from each topic's encoded bytes, kept by the MetadataCache until the
topic or the live brokers change. Here every answer is compared with the same answer
built as objects (the handler's own lookup and description of each topic) and encoded
by the generated encoder: in many versions, with topics in error, offline replicas,
dead leaders, authorized operations asked for or not, topic ids and none; then again
after UpdateMetadata changes a partition, a topic and the set of live brokers, so a
remembered answer that outlived its state would show.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from strom.broker.authorizer import CLUSTER_NAME, ResourceType, authorized_operations
from strom.broker.broker import Broker
from strom.broker.handlers import metadata
from strom.protocol.error_codes import ErrorCode
from strom.protocol.headers import encode_request
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from strom.protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponseTopic,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.cluster import CLUSTER, RecordingAdmin, State, live_broker, update

THREE = (live_broker(1, 9091, "r1"), live_broker(2, 9092, "r2"), live_broker(3, 9093, None))
ORDERS = uuid.uuid4()
STATES = {
    ("orders", 0): State(leader=1, leader_epoch=3, replicas=(1, 2), isr=(1, 2), partition_epoch=7),
    ("orders", 1): State(leader=2, leader_epoch=0, replicas=(2, 3), isr=(2,), offline=(3,)),
    ("orders", 2): State(leader=4, leader_epoch=1, replicas=(4, 1), isr=(4,)),  # leader not alive
    **{("big", index): State(leader=1 + index % 3, leader_epoch=index, replicas=(1 + index % 3, 1 + (index + 1) % 3))
       for index in range(300)},  # > 127 partitions: a compact count of two bytes
    ("__consumer_offsets", 0): State(leader=3, leader_epoch=0, replicas=(3,)),
}
VERSIONS = [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12]


def _plain(broker: Broker, body: MetadataRequest, version: int) -> bytes:
    """The answer built as objects, then encoded whole by the generated encoder."""
    cache = broker.metadata
    if body.topics is None or (version == 0 and not body.topics):
        found: list[object] = list(cache.topics())
    else:
        found = [metadata._cluster_lookup(broker, t.name, t.topic_id, body.allow_auto_topic_creation)
                 for t in body.topics]
    topics = []
    for topic in found:
        if not isinstance(topic, MetadataResponseTopic):
            topic = metadata._cluster_describe(broker, topic, broker.request_listener(), version)  # type: ignore[arg-type]
        if body.include_topic_authorized_operations:
            topic = replace(topic, topic_authorized_operations=authorized_operations(ResourceType.TOPIC, topic.name or ""))
        topics.append(topic)
    brokers = tuple(MetadataResponseBroker(b.id, b.endpoints[0].host, b.endpoints[0].port, b.rack)
                    for b in cache.live_brokers())
    return MetadataResponse(
        brokers=brokers, cluster_id=broker.cluster_id, controller_id=cache.controller_id, topics=tuple(topics),
        cluster_authorized_operations=authorized_operations(
            ResourceType.CLUSTER, CLUSTER_NAME, requested=body.include_cluster_authorized_operations),
    ).encode(version)


def _requests(version: int) -> list[MetadataRequest]:
    names = ["orders", "no-such-topic", "big", "bad/name", "__consumer_offsets", "orders"]
    by_name = tuple(MetadataRequestTopic(name=name) for name in names)
    if version >= 12:  # by id (what clients do from v12): a known one and an unknown one
        by_name += (MetadataRequestTopic(topic_id=ORDERS, name=None), MetadataRequestTopic(topic_id=uuid.uuid4(), name=None))
    all_topics: tuple[MetadataRequestTopic, ...] | None = () if version == 0 else None
    allow = version < 4  # the flag came in v4; before, it is always on (the test's admin records creations)
    requests = [MetadataRequest(topics=by_name, allow_auto_topic_creation=allow),
                MetadataRequest(topics=all_topics, allow_auto_topic_creation=allow)]
    if version >= 8:
        requests += [replace(r, include_topic_authorized_operations=True) for r in requests]
    if 8 <= version <= 10:
        requests += [replace(r, include_cluster_authorized_operations=True) for r in requests]
    return requests


async def _check_every_answer(h: BrokerHarness, versions: list[int]) -> int:
    """Compare each request's answer (asked twice: built, then remembered) with the plain one."""
    compared = 0
    for version in versions:
        for body in _requests(version):
            for _ in range(2):
                frame = await h.send_frame(encode_request(body, version, 7, "test")[4:])
                assert frame is not None
                header_size = 4 + 4 + (1 if version >= 9 else 0)  # size, correlation id, tagged fields
                assert frame[header_size:] == _plain(h.broker, body, version), (version, body)
                compared += 1
    return compared


@pytest.mark.parametrize("versions", [VERSIONS[:6], VERSIONS[6:]], ids=["v0-v5", "v7-v12"])
def test_spliced_answers_are_the_plain_encoders_bytes(broker: BrokerRunner, versions: list[int]) -> None:
    async def scenario(h: BrokerHarness) -> None:
        h.broker.admin_manager = RecordingAdmin()  # type: ignore[assignment]
        await update(h, STATES, THREE, topic_ids={"orders": ORDERS, "big": uuid.uuid4()})  # __consumer_offsets: no id
        assert await _check_every_answer(h, versions) > 0
        # A partition moves, a topic gets a new id, broker 3 dies: nothing remembered may survive.
        await update(h, {("orders", 0): State(leader=2, leader_epoch=4, replicas=(1, 2), isr=(2,), offline=(1,))},
                     THREE[:2], topic_ids={"orders": ORDERS})
        await _check_every_answer(h, versions)
        await update(h, {("big", 299): State(leader=-2, leader_epoch=0)}, THREE[:2])  # partition deleted
        await _check_every_answer(h, versions)

    broker.run(scenario, CLUSTER)


def test_remembered_topic_follows_update_metadata(broker: BrokerRunner) -> None:
    """The answer after an UpdateMetadata says what it said, not what was remembered."""
    async def scenario(h: BrokerHarness) -> None:
        request = MetadataRequest(topics=(MetadataRequestTopic(name="orders"),), allow_auto_topic_creation=False)
        await update(h, STATES, THREE, topic_ids={"orders": ORDERS})
        first = await h.request(request, version=12)
        assert first.topics[0].partitions[0].leader_id == 1
        await update(h, {("orders", 0): State(leader=3, leader_epoch=9, replicas=(1, 3), isr=(3,))}, THREE)
        second = await h.request(request, version=12)
        assert (second.topics[0].partitions[0].leader_id, second.topics[0].partitions[0].leader_epoch) == (3, 9)
        await update(h, {}, THREE[:1])  # only broker 1 alive: partition 0's leader (3) is gone
        third = await h.request(request, version=12)
        assert third.topics[0].partitions[0].leader_id == -1
        assert [b.node_id for b in third.brokers] == [1]

    broker.run(scenario, CLUSTER)


def test_an_auto_created_topic_is_leader_not_available_until_update_metadata(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        admin = RecordingAdmin()
        h.broker.admin_manager = admin  # type: ignore[assignment]
        await update(h, STATES, THREE, topic_ids={"orders": ORDERS})
        body = MetadataRequest(topics=(MetadataRequestTopic(name="fresh"), MetadataRequestTopic(name="orders")))
        frame = await h.send_frame(encode_request(body, 12, 7, "test")[4:])
        assert frame is not None
        assert admin.created == [("fresh", h.broker.config.num_partitions)]
        assert frame[9:] == _plain(h.broker, body, 12)  # asks the admin again: the cache still does not know it
        response = MetadataResponse.decode(12, frame[9:])
        assert [(t.name, t.error_code) for t in response.topics] == [("fresh", ErrorCode.LEADER_NOT_AVAILABLE), ("orders", 0)]

    broker.run(scenario, CLUSTER)
