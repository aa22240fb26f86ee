"""The classic group protocol's paths, success and error, on Kafka 3.9 and Strom: JoinGroup
(with and without a member id, static members), SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit/OffsetFetch, DescribeGroups/ListGroups/DeleteGroups and OffsetDelete.

Each broker's members are driven alike, one step at a time, through two connections per
broker; a JoinGroup or SyncGroup that waits for the rest of the group is sent, the other
member acts, then its answer is read. Member ids are random per broker and compared as
labels in the order each broker handed them out (``<member 1>`` ...).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from strom.protocol.consumer_protocol import encode_subscription
from strom.protocol.message import Message
from strom.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from strom.protocol.messages.delete_groups_request import DeleteGroupsRequest
from strom.protocol.messages.describe_groups_request import DescribeGroupsRequest
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.heartbeat_request import HeartbeatRequest
from strom.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from strom.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from strom.protocol.messages.list_groups_request import ListGroupsRequest
from strom.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from strom.protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from strom.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from strom.protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from tests.differential.wire import Pair, Side, create_topic, leaf_differences, unique

JOIN_VERSION = 5
MEMBER_ID_REQUIRED, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS = 79, 25, 22, 27
FENCED_INSTANCE_ID, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC = 82, 68, 69, 86


@pytest.fixture(scope="module")
def topic(pair: Pair) -> str:
    """A topic the groups subscribe to; Kafka's group coordinator loaded first (its first
    answers after start are COORDINATOR_NOT_AVAILABLE while __consumer_offsets is made)."""
    deadline = time.monotonic() + 90
    for request in (FindCoordinatorRequest(key="warm-up", key_type=0), OffsetFetchRequest(group_id="warm-up")):
        while pair.kafka.raw(request, 2).error_code:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "Kafka 3.9's group coordinator never loaded"
            time.sleep(0.2)
    return create_topic(pair, unique("grouped"), 2)


@pytest.fixture(autouse=True)
def fresh_member_labels(pair: Pair) -> None:
    """Each test labels its own members from ``<member 1>``."""
    for side in pair.sides():
        side.members.clear()


@pytest.fixture
def second(pair: Pair) -> Iterator[Pair]:
    """A second connection to each broker: a group's second member."""
    other = Pair(pair.strom.another_connection(), pair.kafka.another_connection())
    yield other
    other.close()


def _join(group: str, topic: str, member_id: str = "", instance: str | None = None,
          rebalance_timeout_ms: int = 30000) -> JoinGroupRequest:
    metadata = encode_subscription(ConsumerProtocolSubscription(topics=(topic,)), 1)
    return JoinGroupRequest(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=rebalance_timeout_ms,
                            member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                            protocols=(JoinGroupRequestProtocol(name="range", metadata=metadata),))


def _joined(pair: Pair, group: str, topic: str, instance: str | None = None) -> None:
    """One member joins ``group`` and syncs, on each broker: a Stable group of one."""
    if instance is None:
        assert pair.same(_join(group, topic), JOIN_VERSION)["error_code"] == MEMBER_ID_REQUIRED
    answer = pair.each(lambda side: _join(group, topic, _last_member(side), instance), JOIN_VERSION)
    assert answer["error_code"] == 0 and answer["generation_id"] == 1
    synced = pair.each(lambda side: _sync(group, 1, _last_member(side), [_last_member(side)], instance), 3)
    assert synced["error_code"] == 0


def _wait_for_state(side: Side, group: str, state: str) -> None:
    """Poll DescribeGroups (not compared) until ``group`` is in ``state`` on ``side``."""
    deadline = time.monotonic() + 60
    while side.raw(DescribeGroupsRequest(groups=(group,)), 5).groups[0].group_state != state:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, f"{group} never reached {state} on {side.bootstrap}"
        time.sleep(0.05)


def _last_member(side: Side) -> str:
    return next(reversed(side.members)) if side.members else ""


def _sync(group: str, generation: int, member: str, assign_to: list[str], instance: str | None = None
          ) -> SyncGroupRequest:
    return SyncGroupRequest(group_id=group, generation_id=generation, member_id=member, group_instance_id=instance,
                            protocol_type="consumer", protocol_name="range",
                            assignments=tuple(SyncGroupRequestAssignment(member_id=m, assignment=b"") for m in assign_to))


def _heartbeat(group: str, generation: int, member: str, instance: str | None = None) -> HeartbeatRequest:
    return HeartbeatRequest(group_id=group, generation_id=generation, member_id=member, group_instance_id=instance)


def _commit(group: str, topic: str, generation: int = -1, member: str = "", metadata: str = "",
            offset: int = 5) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                               retention_time_ms=-1, topics=(OffsetCommitRequestTopic(name=topic, partitions=(
                                   OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                committed_metadata=metadata),)),))


def _by_label(label: str, build: Any) -> Any:
    """A request built per side around the member id that side calls ``label``."""
    return lambda side: build(side.member_id(label))


# --- JoinGroup ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 3])
def test_join_before_member_ids_were_required(pair: Pair, topic: str, version: int) -> None:
    group = unique("g-old")
    answer = pair.same(_join(group, topic), version)
    assert answer["error_code"] == 0 and answer["members"]


@pytest.mark.parametrize("version", [4, 5, 7, 9])
def test_join_without_then_with_a_member_id(pair: Pair, topic: str, version: int) -> None:
    group = unique("g-new")
    assert pair.same(_join(group, topic), version)["error_code"] == MEMBER_ID_REQUIRED
    answer = pair.each(lambda side: _join(group, topic, _last_member(side)), version)
    assert answer["error_code"] == 0 and answer["leader"] == answer["member_id"]


def test_join_with_a_member_id_the_group_does_not_know(pair: Pair, topic: str) -> None:
    group = unique("g-unknown")
    assert pair.same(_join(group, topic, "made-up-member"), JOIN_VERSION)["error_code"] == UNKNOWN_MEMBER_ID


def test_join_with_unsupported_protocol_type_or_bad_timeout(pair: Pair, topic: str) -> None:
    group = unique("g-bad")
    _joined(pair, group, topic)
    other = _join(group, topic)
    pair.same(JoinGroupRequest(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
                               protocol_type="connect", protocols=other.protocols), JOIN_VERSION)
    pair.same(JoinGroupRequest(group_id=unique("g-timeout"), session_timeout_ms=1, rebalance_timeout_ms=30000,
                               member_id="", protocol_type="consumer", protocols=other.protocols), JOIN_VERSION)


def test_a_second_member_rebalances_the_group(pair: Pair, second: Pair, topic: str) -> None:
    group = unique("g-two")
    _joined(pair, group, topic)
    assert second.same(_join(group, topic), JOIN_VERSION)["error_code"] == MEMBER_ID_REQUIRED
    for side in second.sides():  # member 2 joins: it waits for member 1 to rejoin
        side.send(_join(group, topic, side.member_id("<member 2>")), JOIN_VERSION)
    for side in pair.sides():  # its JoinGroup travels on another connection: wait for it
        _wait_for_state(side, group, "PreparingRebalance")
    # Member 1 learns of the rebalance from its heartbeat; its commit is refused meanwhile.
    assert pair.each(_by_label("<member 1>", lambda m: _heartbeat(group, 1, m)), 3)["error_code"] == \
        REBALANCE_IN_PROGRESS
    pair.each(_by_label("<member 1>", lambda m: _commit(group, topic, 1, m)), 7)
    pair.each(_by_label("<member 1>", lambda m: _heartbeat(group, 0, m)), 3)
    leader = pair.each(_by_label("<member 1>", lambda m: _join(group, topic, m)), JOIN_VERSION)
    follower = [side.receive(_join(group, topic), JOIN_VERSION) for side in second.sides()]
    assert follower[0] == follower[1]
    assert leader["generation_id"] == 2 and len(leader["members"]) == 2 and follower[0]["members"] == []
    # The follower's SyncGroup (its assignments ignored) waits for the leader's.
    for side in second.sides():
        side.send(_sync(group, 2, side.member_id("<member 2>"), [side.member_id("<member 2>")]), 3)
    pair.each(_by_label("<member 1>", lambda m: _sync(group, 1, m, [m])), 3)  # wrong generation
    synced = pair.each(lambda side: _sync(group, 2, side.member_id("<member 1>"),
                                          [side.member_id("<member 1>"), side.member_id("<member 2>")]), 3)
    assert synced["error_code"] == 0
    answers = [side.receive(_sync(group, 2, "", []), 3) for side in second.sides()]
    assert answers[0] == answers[1] and answers[0]["error_code"] == 0
    described = pair.same(DescribeGroupsRequest(groups=(group,)), 5)
    assert described["groups"][0]["group_state"] == "Stable"
    # Member 2 leaves: member 1 is told to rejoin.
    left = second.each(lambda side: LeaveGroupRequest(group_id=group, members=(
        MemberIdentity(member_id=side.member_id("<member 2>")),)), 3)
    assert left["error_code"] == 0
    pair.each(_by_label("<member 1>", lambda m: _heartbeat(group, 2, m)), 3)


def test_heartbeat_and_sync_errors(pair: Pair, topic: str) -> None:
    group = unique("g-hb")
    _joined(pair, group, topic)
    assert pair.each(_by_label("<member 1>", lambda m: _heartbeat(group, 1, m)), 3)["error_code"] == 0
    assert pair.each(_by_label("<member 1>", lambda m: _heartbeat(group, 9, m)), 3)["error_code"] == ILLEGAL_GENERATION
    assert pair.same(_heartbeat(group, 1, "stranger"), 3)["error_code"] == UNKNOWN_MEMBER_ID
    pair.same(_heartbeat(unique("g-none"), 1, "stranger"), 3)
    pair.each(_by_label("<member 1>", lambda m: _sync(group, 9, m, [])), 3)
    pair.same(_sync(group, 1, "stranger", []), 3)
    pair.same(_sync(unique("g-none"), 1, "stranger", []), 3)
    for version in (0, 2, 4):
        pair.each(_by_label("<member 1>", lambda m: _heartbeat(group, 1, m)), version)


def test_static_members_are_fenced_by_their_successor(pair: Pair, second: Pair, topic: str) -> None:
    group = unique("g-static")
    instance = "instance-1"
    _joined(pair, group, topic, instance)
    # The same instance joins again from elsewhere with no member id: it replaces the member.
    answer = second.same(_join(group, topic, "", instance), JOIN_VERSION)
    assert answer["error_code"] == 0
    fenced = pair.each(_by_label("<member 1>", lambda m: _heartbeat(group, 1, m, instance)), 3)
    assert fenced["error_code"] == FENCED_INSTANCE_ID
    pair.each(_by_label("<member 1>", lambda m: _commit(group, topic, 1, m)), 7)
    pair.each(_by_label("<member 2>", lambda m: _heartbeat(group, 1, m, instance)), 3)
    pair.same(_heartbeat(group, 1, "stranger", instance), 3)
    left = second.each(lambda side: LeaveGroupRequest(group_id=group, members=(
        MemberIdentity(member_id="", group_instance_id=instance),)), 4)
    assert left["error_code"] == 0
    pair.same(DescribeGroupsRequest(groups=(group,)), 5)


# --- offsets ------------------------------------------------------------------------------------

def test_commits_by_members_and_by_others(pair: Pair, topic: str) -> None:
    group = unique("g-commit")
    _joined(pair, group, topic)
    assert pair.each(_by_label("<member 1>", lambda m: _commit(group, topic, 1, m)), 7)[
        "topics"][0]["partitions"][0]["error_code"] == 0
    unknown = pair.same(_commit(group, topic, 1, "stranger"), 7)
    assert unknown["topics"][0]["partitions"][0]["error_code"] == UNKNOWN_MEMBER_ID
    wrong = pair.each(_by_label("<member 1>", lambda m: _commit(group, topic, 7, m)), 7)
    assert wrong["topics"][0]["partitions"][0]["error_code"] == ILLEGAL_GENERATION
    pair.same(_commit(group, topic), 7)  # generation -1, no member: an admin's commit to a live group
    for version in (2, 5, 8):
        pair.each(_by_label("<member 1>", lambda m: _commit(group, topic, 1, m, offset=9)), version)


@pytest.mark.parametrize("size", [4096, 4097])
def test_commit_metadata_at_and_past_the_limit(pair: Pair, topic: str, size: int) -> None:
    answer = pair.same(_commit(unique("g-meta"), topic, metadata="m" * size), 7)
    assert answer["topics"][0]["partitions"][0]["error_code"] == (0 if size == 4096 else 12)


def test_commits_to_an_empty_group_and_unknown_topics(pair: Pair, topic: str) -> None:
    group = unique("g-simple")
    assert pair.same(_commit(group, topic, offset=3), 8)["topics"][0]["partitions"][0]["error_code"] == 0
    pair.same(_commit(group, unique("absent"), offset=3), 8)
    pair.same(_commit(group, topic, offset=-5), 8)


@pytest.mark.parametrize("version", [1, 2, 5, 7])
def test_offset_fetch(pair: Pair, topic: str, version: int) -> None:
    group = unique("g-fetch")
    pair.same(_commit(group, topic, offset=11, metadata="meta"), 7)
    named = OffsetFetchRequest(group_id=group, topics=(OffsetFetchRequestTopic(name=topic, partition_indexes=(0, 1)),))
    pair.same(named, version)
    if version >= 2:
        pair.same(OffsetFetchRequest(group_id=group, topics=None), version)  # every committed partition
        pair.same(OffsetFetchRequest(group_id=unique("g-none"), topics=None), version)
    pair.same(OffsetFetchRequest(group_id=unique("g-none"), topics=named.topics), version)


@pytest.mark.parametrize("version", [8, 9])
def test_offset_fetch_of_several_groups_at_once(pair: Pair, topic: str, version: int) -> None:
    committed, unknown = unique("g-batch"), unique("g-none")
    pair.same(_commit(committed, topic, offset=6), 8)
    request = OffsetFetchRequest(groups=(
        OffsetFetchRequestGroup(group_id=committed, topics=None),
        OffsetFetchRequestGroup(group_id=committed, topics=(OffsetFetchRequestTopics(name=topic, partition_indexes=(0, 1)),)),
        OffsetFetchRequestGroup(group_id=unknown, topics=None),
    ))
    strom, kafka = pair.ask(request, version)
    for answer in (strom, kafka):  # Kafka answers the groups in its map's order
        answer["groups"].sort(key=lambda group: (group["group_id"], len(group["topics"])))
    assert strom == kafka, leaf_differences(strom, kafka)


def test_offset_fetch_of_a_topic_the_broker_does_not_know(pair: Pair) -> None:
    request = OffsetFetchRequest(group_id=unique("g-none"), topics=(
        OffsetFetchRequestTopic(name=unique("absent"), partition_indexes=(0,)),))
    pair.same(request, 5)


# --- describe, list, delete -----------------------------------------------------------------------

def _listed(answer: dict[str, Any], groups: set[str]) -> list[dict[str, Any]]:
    """The listed groups among ``groups`` (the brokers hold other tests' groups too)."""
    return sorted((g for g in answer["groups"] if g["group_id"] in groups), key=lambda g: g["group_id"])


def test_describe_list_and_delete_groups(pair: Pair, topic: str) -> None:
    live, empty = unique("g-live"), unique("g-empty")
    _joined(pair, live, topic)
    pair.same(_commit(empty, topic), 7)
    for version in (0, 1, 3, 5):
        pair.same(DescribeGroupsRequest(groups=(live, empty, unique("g-none")),
                                        include_authorized_operations=version >= 3), version)
    for version, states in ((0, ()), (3, ()), (4, ("Stable",)), (4, ("Empty", "Stable"))):
        strom, kafka = pair.ask(ListGroupsRequest(states_filter=states), version)
        assert strom["error_code"] == kafka["error_code"] == 0
        assert _listed(strom, {live, empty}) == _listed(kafka, {live, empty})
    strom, kafka = pair.ask(DeleteGroupsRequest(groups_names=(live, empty, unique("g-none"))), 2)
    for answer in (strom, kafka):  # Kafka answers in its map's hash order
        answer["results"].sort(key=lambda result: result["group_id"])
    assert strom == kafka, leaf_differences(strom, kafka)
    assert sorted(r["error_code"] for r in strom["results"]) == [0, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND]
    pair.same(DeleteGroupsRequest(groups_names=(empty,)), 0)
    pair.same(DescribeGroupsRequest(groups=(empty,)), 5)


def test_offset_delete(pair: Pair, topic: str) -> None:
    group = unique("g-odel")
    _joined(pair, group, topic)
    pair.each(_by_label("<member 1>", lambda m: _commit(group, topic, 1, m)), 7)
    other = create_topic(pair, unique("other"))
    pair.same(_commit(group, other), 7)
    delete = OffsetDeleteRequest(group_id=group, topics=(OffsetDeleteRequestTopic(name=topic, partitions=(
        OffsetDeleteRequestPartition(partition_index=0),)),))
    answer = pair.same(delete, 0)  # the group's member subscribes to the topic
    assert answer["topics"][0]["partitions"][0]["error_code"] == GROUP_SUBSCRIBED_TO_TOPIC
    delete_other = OffsetDeleteRequest(group_id=group, topics=(OffsetDeleteRequestTopic(name=other, partitions=(
        OffsetDeleteRequestPartition(partition_index=0),)),))
    assert pair.same(delete_other, 0)["topics"][0]["partitions"][0]["error_code"] == 0
    pair.same(OffsetDeleteRequest(group_id=unique("g-none"), topics=delete.topics), 0)
    pair.same(OffsetDeleteRequest(group_id=group, topics=(OffsetDeleteRequestTopic(name=unique("absent"), partitions=(
        OffsetDeleteRequestPartition(partition_index=0),)),)), 0)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_find_coordinator(pair: Pair, version: int) -> None:
    request: Message = (FindCoordinatorRequest(key="any-group", key_type=0) if version < 4 else
                        FindCoordinatorRequest(key_type=0, coordinator_keys=("any-group", "another")))
    strom, kafka = pair.ask(request, version)
    if version >= 4:  # the single-key fields are not in v4: their defaults mean nothing
        for answer in (strom, kafka):
            del answer["node_id"], answer["host"], answer["port"], answer["error_code"], answer["error_message"]
    assert strom == kafka, leaf_differences(strom, kafka)
