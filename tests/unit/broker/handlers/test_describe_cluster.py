"""DescribeCluster (60): this broker is the whole cluster and its controller."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_cluster_request import DescribeClusterRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner

BROKERS, CONTROLLERS = 1, 2  # v1 endpoint types
CLUSTER_OPERATIONS = {5, 7, 8, 9, 10, 11, 12}  # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, *_CONFIGS, IDEMPOTENT_WRITE


@pytest.mark.parametrize("version", [0, 1])
def test_this_broker_is_the_cluster(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(DescribeClusterRequest(), version=version)
        endpoint = h.broker.advertised
        assert response.error_code == ErrorCode.NONE
        assert response.cluster_id == h.broker.cluster_id and response.cluster_id
        assert response.controller_id == 1
        assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(1, endpoint.host, endpoint.port)]
        assert response.cluster_authorized_operations == -(2**31)

    broker.run(scenario)


def test_authorized_operations_when_asked(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(DescribeClusterRequest(include_cluster_authorized_operations=True), version=1)
        allowed = {bit for bit in range(32) if response.cluster_authorized_operations >> bit & 1}
        assert allowed == CLUSTER_OPERATIONS

    broker.run(scenario)


def test_asking_a_broker_for_controllers_is_an_unsupported_endpoint_type(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(DescribeClusterRequest(endpoint_type=CONTROLLERS), version=1)
        assert response.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE

    broker.run(scenario)
