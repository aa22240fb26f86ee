"""FindCoordinator (10): this node coordinates every group; batched keys from v4."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.metadata_request import MetadataRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner

GROUP, TRANSACTION = 0, 1


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_one_group_key(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(FindCoordinatorRequest(key="g"), version=version)
        endpoint = h.broker.advertised
        assert (response.error_code, response.node_id, response.host, response.port) == (
            0, 1, endpoint.host, endpoint.port,
        )

    broker.run(scenario)


@pytest.mark.parametrize("version", [4, 5, 6])
def test_a_batch_of_group_keys(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(FindCoordinatorRequest(key_type=GROUP, coordinator_keys=("a", "b")), version=version)
        assert [(c.key, c.error_code, c.node_id) for c in response.coordinators] == [("a", 0, 1), ("b", 0, 1)]

    broker.run(scenario)


def test_the_first_group_lookup_creates_the_offsets_topic(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.request(FindCoordinatorRequest(key="g"), version=3)
        metadata = await h.request(MetadataRequest(topics=None), version=12)
        (offsets,) = [t for t in metadata.topics if t.name == "__consumer_offsets"]
        assert offsets.is_internal
        assert len(offsets.partitions) == 1  # offsets.topic.num.partitions in the harness

    broker.run(scenario)


def test_a_transactional_id_finds_this_node(broker: BrokerRunner) -> None:
    """As Kafka: the leader of the id's __transaction_state partition, this node on one node."""

    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(FindCoordinatorRequest(key="tx", key_type=TRANSACTION), version=3)
        assert (response.error_code, response.node_id) == (ErrorCode.NONE, 1)

    broker.run(scenario)


@pytest.mark.parametrize("key_type", [2, 7])
def test_an_unknown_key_type_is_an_invalid_request(broker: BrokerRunner, key_type: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(FindCoordinatorRequest(key_type=key_type, coordinator_keys=("x",)), version=4)
        assert [c.error_code for c in response.coordinators] == [ErrorCode.INVALID_REQUEST]

    broker.run(scenario)
