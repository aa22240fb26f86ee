"""Creating, growing and deleting topics in cluster mode go to the controller; others answer NOT_CONTROLLER.

As Kafka's ZooKeeper mode (``KafkaApis.handleCreateTopicsRequest``, ``handleCreatePartitionsRequest``
and ``handleDeleteTopicsRequest`` check ``controller.isActive`` first): every entry of the
request gets NOT_CONTROLLER and nothing is created or deleted; clients re-send to
Metadata's ``controller_id``. One node is always its own controller.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from strom.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from strom.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from strom.protocol.topic_partition import TopicPartition
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.unit.broker.handlers.cluster import CLUSTER, RecordingAdmin


@dataclass
class Controller:
    """The broker's controller seam, as strom.cluster wires it: active or not."""

    is_active: bool

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int
                                  ) -> tuple[ErrorCode, tuple[TopicPartition, ...]]:
        raise AssertionError("not asked here")


async def _create(h: BrokerHarness, *names: str) -> list[tuple[str, int]]:
    request = CreateTopicsRequest(topics=tuple(CreatableTopic(n, 1, 1) for n in names), timeout_ms=5000)
    response = await h.request(request, version=7)
    return [(t.name, t.error_code) for t in response.topics]


@pytest.mark.parametrize("controller", [None, Controller(is_active=False)], ids=["no controller", "inactive"])
def test_a_broker_that_is_not_the_controller_answers_not_controller(broker: BrokerRunner,
                                                                     controller: Controller | None) -> None:
    async def scenario(h: BrokerHarness) -> None:
        h.broker.controller = controller
        assert not h.broker.is_controller()
        not_controller = ErrorCode.NOT_CONTROLLER
        assert await _create(h, "a", "b", "a") == [("a", not_controller), ("b", not_controller), ("a", not_controller)]
        for version in (0, 5, 6):
            request = (DeleteTopicsRequest(topic_names=("a", "b"), timeout_ms=5000) if version < 6 else
                       DeleteTopicsRequest(topics=(DeleteTopicState(name="a"), DeleteTopicState(topic_id=uuid.uuid4())),
                                           timeout_ms=5000))
            response = await h.request(request, version=version)
            assert [r.error_code for r in response.responses] == [not_controller, not_controller]
        grow = CreatePartitionsRequest(topics=(CreatePartitionsTopic("a", 2), CreatePartitionsTopic("b", 3),
                                               CreatePartitionsTopic("a", 4)), timeout_ms=5000)
        response = await h.request(grow, version=3)
        assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
            ("a", not_controller, None), ("b", not_controller, None)]  # one per name, as Kafka's map
        assert h.broker.metadata.topics() == []

    broker.run(scenario, CLUSTER)


def test_the_active_controller_goes_on_to_create(broker: BrokerRunner) -> None:
    """Past the check, the request reaches the admin manager."""

    async def scenario(h: BrokerHarness) -> None:
        h.broker.controller = Controller(is_active=True)
        assert h.broker.is_controller()
        admin = RecordingAdmin()
        h.broker.admin_manager = admin  # type: ignore[assignment]
        assert await _create(h, "a") == [("a", ErrorCode.NONE)]
        assert admin.created == [("a", 1)]

    broker.run(scenario, CLUSTER)


def test_one_node_is_its_own_controller(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert h.broker.controller is None and h.broker.is_controller()
        assert await _create(h, "a") == [("a", ErrorCode.NONE)]

    broker.run(scenario)
