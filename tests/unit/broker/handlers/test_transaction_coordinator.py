"""The transaction coordinator's InitProducerId side (a transactional id): epochs, KIP-360,
fencing an open transaction, timeouts, epoch exhaustion; and FindCoordinator key type 1."""

from __future__ import annotations

import asyncio

from strom.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.metadata_request import MetadataRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.txn_requests import (
    PROPERTIES,
    TRANSACTION,
    add,
    end,
    init,
    produce_transactional,
)


def test_find_coordinator_names_this_node_and_creates_the_state_topic(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(FindCoordinatorRequest(key="tx", key_type=TRANSACTION), version=3)
        assert (response.error_code, response.node_id, response.port) == (0, 1, h.broker.advertised.port)
        batched = await h.request(FindCoordinatorRequest(key_type=TRANSACTION, coordinator_keys=("a", "b")),
                                  version=4)
        assert [(c.key, c.error_code, c.node_id) for c in batched.coordinators] == [("a", 0, 1), ("b", 0, 1)]
        metadata = await h.request(MetadataRequest(topics=None), version=12)
        (state_topic,) = [t for t in metadata.topics if t.name == TRANSACTION_STATE_TOPIC]
        assert state_topic.is_internal and len(state_topic.partitions) == 1

    broker.run(scenario, PROPERTIES)


def test_init_producer_id_bumps_the_epoch_and_checks_the_timeout(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        first = await init(h, "tx")
        assert (first.error_code, first.producer_epoch) == (0, 0) and first.producer_id >= 0
        second = await init(h, "tx")
        assert (second.error_code, second.producer_id, second.producer_epoch) == (0, first.producer_id, 1)
        other = await init(h, "other")
        assert other.error_code == 0 and other.producer_id != first.producer_id
        for timeout_ms in (300001, 0, -1):
            refused = await init(h, "tx", timeout_ms=timeout_ms)
            assert (refused.error_code, refused.producer_id) == (ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1)
        assert (await init(h, "")).error_code == ErrorCode.INVALID_REQUEST
        only_id = await init(h, "tx", version=3, producer=(first.producer_id, -1))
        assert only_id.error_code == ErrorCode.INVALID_REQUEST

    broker.run(scenario, PROPERTIES)


def test_kip_360_bump_with_the_producers_id_and_epoch(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        first = await init(h, "tx")
        pid = first.producer_id
        bumped = await init(h, "tx", version=3, producer=(pid, 0))
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, pid, 1)
        retried = await init(h, "tx", version=3, producer=(pid, 0))  # the answer was lost: same epoch again
        assert (retried.error_code, retried.producer_epoch) == (0, 1)
        fenced = await init(h, "tx", version=4, producer=(pid, 5))
        assert fenced.error_code == ErrorCode.PRODUCER_FENCED
        old_client = await init(h, "tx", version=3, producer=(pid, 5))
        assert old_client.error_code == ErrorCode.INVALID_PRODUCER_EPOCH

    broker.run(scenario, PROPERTIES)


def test_a_second_init_fences_the_open_transaction(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        zombie = ((await init(h, "tx")).producer_id, 0)
        assert await add(h, "tx", zombie, [("t", 0)]) == {("t", 0): ErrorCode.NONE}
        assert await produce_transactional(h, "tx", zombie, "t", [b"z"]) == ErrorCode.NONE
        fencing = await init(h, "tx")
        assert fencing.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
        for _ in range(500):  # the client retries until the abort is complete
            answer = await init(h, "tx")
            if answer.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
                break
            await asyncio.sleep(0.01)
        assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (0, zombie[0], 2)
        assert await h.list_offset("t", 0) == 2  # the zombie's record and the ABORT marker (epoch 1)
        assert await end(h, "tx", zombie, committed=True, version=0) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert await produce_transactional(h, "tx", zombie, "t", [b"late"], sequence=1) == (
            ErrorCode.INVALID_PRODUCER_EPOCH)

    broker.run(scenario, PROPERTIES)


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        producer = ((await init(h, "tx", timeout_ms=200)).producer_id, 0)
        assert await add(h, "tx", producer, [("t", 0)], version=2) == {("t", 0): ErrorCode.NONE}
        for _ in range(1000):  # the same partitions again: no write; NONE while the transaction is open,
            errors = await add(h, "tx", producer, [("t", 0)], version=2)  # CONCURRENT_TRANSACTIONS while fencing
            if errors[("t", 0)] not in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS):
                break
            await asyncio.sleep(0.01)
        assert errors == {("t", 0): ErrorCode.PRODUCER_FENCED}
        assert await end(h, "tx", producer, committed=True, version=2) == ErrorCode.PRODUCER_FENCED

    broker.run(scenario, {**PROPERTIES, "transaction.abort.timed.out.transaction.cleanup.interval.ms": "50"})


def test_an_exhausted_epoch_gets_a_new_producer_id(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        first = await init(h, "tx")
        found = h.broker.transaction_coordinator.state_manager.get_transaction_state("tx")
        assert not isinstance(found, ErrorCode) and found[1] is not None
        found[1].producer_epoch = 32766  # as if bumped that often
        rotated = await init(h, "tx", version=3, producer=(first.producer_id, 32766))
        assert rotated.error_code == 0 and rotated.producer_id != first.producer_id and rotated.producer_epoch == 0
        # A retry of that rotation (its answer lost) still carries the old id at the exhausted epoch.
        retried = await init(h, "tx", version=3, producer=(first.producer_id, 32766))
        assert (retried.error_code, retried.producer_id) == (ErrorCode.NONE, rotated.producer_id)

    broker.run(scenario, PROPERTIES)


def test_an_idle_id_expires_and_comes_back_with_a_new_producer_id(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        first = await init(h, "tx")
        assert first.error_code == ErrorCode.NONE
        manager = h.broker.transaction_coordinator.state_manager
        for _ in range(1000):  # the expiry scan writes a tombstone and drops the id
            found = manager.get_transaction_state("tx")
            if not isinstance(found, ErrorCode) and found[1] is None:
                break
            await asyncio.sleep(0.01)
        assert found == (0, None)
        again = await init(h, "tx", version=3, producer=(first.producer_id, 0))  # KIP-360: a new id, not a fence
        assert again.error_code == ErrorCode.NONE and again.producer_id != first.producer_id

    broker.run(scenario, {**PROPERTIES, "transactional.id.expiration.ms": "50",
                          "transaction.remove.expired.transaction.cleanup.interval.ms": "50"})
