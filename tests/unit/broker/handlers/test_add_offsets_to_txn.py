"""AddOffsetsToTxn (25): the group's ``__consumer_offsets`` partition joins the transaction,
so its marker lands there too."""

from __future__ import annotations

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.txn_requests import PROPERTIES, end, init, state_of, until_complete


async def add_offsets(h: BrokerHarness, producer: tuple[int, int], version: int) -> int:
    response = await h.request(AddOffsetsToTxnRequest(transactional_id="tx", producer_id=producer[0],
                                                      producer_epoch=producer[1], group_id="g"), version=version)
    code: int = response.error_code
    return code


def test_the_groups_offsets_partition_joins_the_transaction(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        producer = ((await init(h, "tx")).producer_id, 0)
        assert await add_offsets(h, (producer[0], 1), version=0) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert await add_offsets(h, (producer[0], 1), version=2) == ErrorCode.PRODUCER_FENCED
        assert await add_offsets(h, producer, version=0) == ErrorCode.NONE
        found = h.broker.transaction_coordinator.state_manager.get_transaction_state("tx")
        assert not isinstance(found, ErrorCode) and found[1] is not None
        assert found[1].partitions == {("__consumer_offsets", 0)}  # offsets.topic.num.partitions=1 here
        before = await h.list_offset("__consumer_offsets", 0)
        assert await end(h, "tx", producer, committed=True) == ErrorCode.NONE
        await until_complete(h, "tx", producer, committed=True)
        assert await h.list_offset("__consumer_offsets", 0) == before + 1  # the COMMIT marker
        assert state_of(h, "tx").name == "COMPLETE_COMMIT"

    broker.run(scenario, PROPERTIES)
