"""InitProducerId (22): producer ids for idempotent producers, and KIP-360's epoch bump."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner


@pytest.mark.parametrize("version", [0, 2, 3, 4, 5])
def test_each_idempotent_producer_gets_its_own_id(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        first = await h.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), version=version)
        second = await h.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), version=version)
        assert first.error_code == second.error_code == ErrorCode.NONE
        assert first.producer_id >= 0 and second.producer_id >= 0
        assert first.producer_id != second.producer_id
        assert first.producer_epoch == second.producer_epoch == 0

    broker.run(scenario)


def test_a_known_producer_bumps_its_epoch(broker: BrokerRunner) -> None:
    """KIP-360 (v3+): an idempotent producer that hit an error keeps its id with the next epoch."""

    async def scenario(h: BrokerHarness) -> None:
        first = await h.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), version=4)
        bumped = await h.request(InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000,
            producer_id=first.producer_id, producer_epoch=first.producer_epoch,
        ), version=4)
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, first.producer_id, 1)

    broker.run(scenario)


def test_a_transactional_producer_gets_an_id_from_the_transaction_coordinator(broker: BrokerRunner) -> None:
    """As Kafka: a producer id at epoch 0 (the coordinator's cases are in test_transaction_coordinator)."""

    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(InitProducerIdRequest(transactional_id="tx-1", transaction_timeout_ms=60000), version=4)
        assert (response.error_code, response.producer_epoch) == (ErrorCode.NONE, 0)
        assert response.producer_id >= 0

    broker.run(scenario)
