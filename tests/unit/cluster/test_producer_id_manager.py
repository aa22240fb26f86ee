"""ZkProducerIdManager's use of its blocks: ids in order from each block, the next block
claimed ahead (before the current one runs out), one claim shared by concurrent waiters,
a failed claim answered retriable. ZooKeeper is replaced by a block counter here (its
conditional write is tested against a real ZooKeeper in tests/cluster/test_producer_ids.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import pytest
from kazoo.exceptions import ConnectionLoss

from strom.broker.producer_ids import ProducerIdsUnavailableError
from strom.cluster.producer_id_manager import ZkProducerIdManager
from strom.protocol.error_codes import ErrorCode

BLOCK = 1000
TIMEOUT = 30.0


class Blocks:
    """Hands out consecutive blocks, as /latest_producer_id_block would; may hold or fail a claim."""

    def __init__(self) -> None:
        self.claimed: list[tuple[int, int]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()
        self.fail_next = False
        self._lock = threading.Lock()

    def claim_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        self.entered.set()
        assert self.hold.wait(TIMEOUT)
        with self._lock:
            if self.fail_next:
                self.fail_next = False
                raise ConnectionLoss("ZooKeeper connection lost")
            start = self.claimed[-1][1] + 1 if self.claimed else 0
            self.claimed.append((start, start + BLOCK - 1))
            return self.claimed[-1]


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.001)


def test_ids_come_in_order_from_consecutive_blocks() -> None:
    async def scenario() -> None:
        blocks = Blocks()
        manager = ZkProducerIdManager(1, blocks)
        ids = [await manager.generate() for _ in range(2500)]
        assert ids == list(range(2500))
        await manager.shutdown()
        # Block 3 was claimed ahead at id 1,900; the next claim would come at 2,900.
        assert manager.claims == 3
        assert blocks.claimed == [(0, 999), (1000, 1999), (2000, 2999)]

    run(scenario)


def test_the_next_block_is_claimed_before_the_current_one_runs_out() -> None:
    async def scenario() -> None:
        blocks = Blocks()
        manager = ZkProducerIdManager(1, blocks)
        assert [await manager.generate() for _ in range(900)] == list(range(900))
        await until(lambda: len(blocks.claimed) == 2)  # 90% used: the second block is claimed ahead
        blocks.hold.clear()
        blocks.entered.clear()
        assert [await manager.generate() for _ in range(100)] == list(range(900, 1000))
        # Block 2 was in hand, so id 1,000 needs no ZooKeeper; the claim of block 3 starts later.
        assert await manager.generate() == 1000
        assert [await manager.generate() for _ in range(899)] == list(range(1001, 1900))
        await asyncio.to_thread(blocks.entered.wait, TIMEOUT)  # block 3's claim is under way, held
        assert [await manager.generate() for _ in range(100)] == list(range(1900, 2000))
        waiting = asyncio.ensure_future(manager.generate())  # block 2 used up, block 3 held back
        await asyncio.sleep(0.05)
        assert not waiting.done()
        blocks.hold.set()
        assert await waiting == 2000
        await manager.shutdown()

    run(scenario)


def test_concurrent_requests_share_one_claim() -> None:
    async def scenario() -> None:
        blocks = Blocks()
        blocks.hold.clear()
        manager = ZkProducerIdManager(1, blocks)
        waiting = [asyncio.ensure_future(manager.generate()) for _ in range(50)]
        await asyncio.to_thread(blocks.entered.wait, TIMEOUT)
        blocks.hold.set()
        assert sorted(await asyncio.gather(*waiting)) == list(range(50))
        assert blocks.claimed == [(0, 999)]
        await manager.shutdown()

    run(scenario)


def test_a_failed_claim_is_a_retriable_error_and_the_next_request_claims_again() -> None:
    async def scenario() -> None:
        blocks = Blocks()
        blocks.fail_next = True
        manager = ZkProducerIdManager(1, blocks)
        with pytest.raises(ProducerIdsUnavailableError, match="connection lost") as raised:
            await manager.generate()
        assert raised.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert await manager.generate() == 0
        assert manager.claims == 1
        await manager.shutdown()

    run(scenario)
