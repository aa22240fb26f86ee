"""AlterPartition (56): the handler's routing; the controller's checks and writes are tested
against a real ZooKeeper (tests/cluster/test_controller_replication.py) and as pure rules
(tests/unit/cluster/test_alter_partition.py)."""

from __future__ import annotations

import pytest

from strom.broker.connection_errors import CloseConnection
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    PartitionData,
    TopicData,
)
from strom.protocol.messages.alter_partition_response import AlterPartitionResponse
from strom.protocol.messages.alter_partition_response import PartitionData as AnsweredPartition
from strom.protocol.messages.alter_partition_response import TopicData as AnsweredTopic
from tests.support.broker_harness import BrokerHarness, BrokerRunner

CLUSTER = {"zookeeper.connect": "127.0.0.1:1/unused"}  # cluster mode; nothing here dials ZooKeeper
REQUEST = AlterPartitionRequest(broker_id=2, broker_epoch=5, topics=(TopicData(
    topic_name="t", partitions=(PartitionData(partition_index=0, leader_epoch=3, new_isr=(2, 1), partition_epoch=4),)),))


class _Controller:
    """A stand-in for the controller component: the unit under test is the handler."""

    def __init__(self, active: bool, fails: bool = False) -> None:
        self.active, self.fails = active, fails
        self.asked: list[tuple[AlterPartitionRequest, int]] = []

    @property
    def is_active(self) -> bool:
        return self.active

    async def alter_partition(self, request: AlterPartitionRequest, version: int) -> AlterPartitionResponse:
        self.asked.append((request, version))
        if self.fails:
            raise RuntimeError("ZooKeeper went away")
        return AlterPartitionResponse(topics=(AnsweredTopic(topic_name="t", partitions=(AnsweredPartition(
            partition_index=0, leader_id=2, leader_epoch=3, isr=(2, 1), partition_epoch=5),)),))


def test_a_single_node_does_not_serve_it(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        with pytest.raises(CloseConnection):
            await h.request(REQUEST, version=1)

    broker.run(scenario)


@pytest.mark.parametrize("active", [None, False])
def test_a_broker_that_is_not_the_controller_answers_not_controller(broker: BrokerRunner, active: bool | None
                                                                     ) -> None:
    async def scenario(h: BrokerHarness) -> None:
        h.broker.controller = None if active is None else _Controller(active)
        response = await h.request(REQUEST, version=1)
        assert (response.error_code, response.topics) == (ErrorCode.NOT_CONTROLLER, ())

    broker.run(scenario, CLUSTER)


def test_the_controller_answers_and_a_failure_is_unknown_server_error(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        controller = _Controller(active=True)
        h.broker.controller = controller
        response = await h.request(REQUEST, version=1)
        assert response.error_code == ErrorCode.NONE
        assert [(p.partition_index, p.isr, p.partition_epoch) for p in response.topics[0].partitions] == [(0, (2, 1), 5)]
        assert controller.asked == [(REQUEST, 1)]
        h.broker.controller = _Controller(active=True, fails=True)
        failed = await h.request(REQUEST, version=1)
        assert (failed.error_code, failed.topics) == (ErrorCode.UNKNOWN_SERVER_ERROR, ())

    broker.run(scenario, CLUSTER)
