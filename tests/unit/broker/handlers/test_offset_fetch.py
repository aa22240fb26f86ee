"""OffsetFetch (9): a group's committed offsets, -1 where there is none; batched groups from v8."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.groups import commit


@pytest.mark.parametrize("version", [1, 3, 5, 7])
def test_the_asked_partitions_with_minus_one_where_nothing_is_committed(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=3)
        await commit(h, "g", {("t", 0): 10}, metadata="note")
        request = OffsetFetchRequest(group_id="g", topics=(OffsetFetchRequestTopic("t", (0, 2)),))
        response = await h.request(request, version=version)
        found = {p.partition_index: (p.committed_offset, p.metadata, p.error_code) for t in response.topics
                 for p in t.partitions}
        assert found == {0: (10, "note", 0), 2: (-1, "", 0)}
        if version >= 2:
            assert response.error_code == ErrorCode.NONE
        if version >= 5:
            (topic,) = response.topics
            assert topic.partitions[0].committed_leader_epoch == 0

    broker.run(scenario)


@pytest.mark.parametrize("version", [2, 7])
def test_null_topics_means_every_committed_partition(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=2)
        await h.create_topic("u")
        await commit(h, "g", {("t", 1): 4, ("u", 0): 9})
        response = await h.request(OffsetFetchRequest(group_id="g", topics=None), version=version)
        found = {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}
        assert found == {("t", 1): 4, ("u", 0): 9}

    broker.run(scenario)


def test_an_unknown_group_has_nothing_committed(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        request = OffsetFetchRequest(group_id="nobody", topics=(OffsetFetchRequestTopic("t", (0,)),))
        response = await h.request(request, version=7)
        assert response.error_code == ErrorCode.NONE
        assert [(p.committed_offset, p.error_code) for t in response.topics for p in t.partitions] == [(-1, 0)]
        every = await h.request(OffsetFetchRequest(group_id="nobody", topics=None), version=7)
        assert (every.error_code, every.topics) == (ErrorCode.NONE, ())

    broker.run(scenario)


@pytest.mark.parametrize("version", [8, 9])
def test_v8_a_batch_of_groups(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await commit(h, "a", {("t", 0): 1})
        await commit(h, "b", {("t", 0): 2})
        request = OffsetFetchRequest(groups=(
            OffsetFetchRequestGroup("a", topics=(OffsetFetchRequestTopics("t", (0,)),)),
            OffsetFetchRequestGroup("b", topics=None),
            OffsetFetchRequestGroup("c", topics=(OffsetFetchRequestTopics("t", (0,)),)),
        ))
        response = await h.request(request, version=version)
        found = {
            g.group_id: (g.error_code, [(t.name, p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions])
            for g in response.groups
        }
        assert found == {"a": (0, [("t", 0, 1)]), "b": (0, [("t", 0, 2)]), "c": (0, [("t", 0, -1)])}

    broker.run(scenario)
