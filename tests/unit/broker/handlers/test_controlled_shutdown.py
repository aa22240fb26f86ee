"""ControlledShutdown (7): the handler's routing; the controller's side is tested on a real
cluster (tests/cluster), where a broker's SIGTERM drives it end to end."""

from __future__ import annotations

import pytest

from strom.broker.connection_errors import CloseConnection
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.controlled_shutdown_request import ControlledShutdownRequest
from strom.protocol.topic_partition import TopicPartition
from tests.support.broker_harness import BrokerHarness, BrokerRunner

CLUSTER = {"zookeeper.connect": "127.0.0.1:1/unused"}  # cluster mode; nothing here dials ZooKeeper


class _Controller:
    """A stand-in for the controller component: the unit under test is the handler."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.asked: list[tuple[int, int]] = []

    @property
    def is_active(self) -> bool:
        return self.active

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int
                                  ) -> tuple[ErrorCode, tuple[TopicPartition, ...]]:
        self.asked.append((broker_id, broker_epoch))
        return ErrorCode.NONE, (("t", 1), ("u", 0))


def test_a_single_node_does_not_serve_it(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        with pytest.raises(CloseConnection):
            await h.request(ControlledShutdownRequest(broker_id=2, broker_epoch=5), version=3)

    broker.run(scenario)


@pytest.mark.parametrize("active", [None, False])
def test_a_broker_that_is_not_the_controller_answers_not_controller(broker: BrokerRunner, active: bool | None
                                                                     ) -> None:
    async def scenario(h: BrokerHarness) -> None:
        h.broker.controller = None if active is None else _Controller(active)
        response = await h.request(ControlledShutdownRequest(broker_id=2, broker_epoch=5), version=3)
        assert response.error_code == ErrorCode.NOT_CONTROLLER
        assert response.remaining_partitions == ()

    broker.run(scenario, CLUSTER)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_the_controller_answers_with_the_partitions_still_led(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        controller = _Controller(active=True)
        h.broker.controller = controller
        response = await h.request(ControlledShutdownRequest(broker_id=2, broker_epoch=5), version=version)
        assert response.error_code == ErrorCode.NONE
        assert [(p.topic_name, p.partition_index) for p in response.remaining_partitions] == [("t", 1), ("u", 0)]
        assert controller.asked == [(2, 5 if version >= 2 else -1)]  # v0-1 carry no broker epoch

    broker.run(scenario, CLUSTER)
