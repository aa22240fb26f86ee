"""Producer ids in a cluster: blocks of 1,000 claimed in ZooKeeper (Kafka's ZkProducerIdManager).

``/latest_producer_id_block`` holds the last block any broker claimed
(``{"version":1,"broker":..,"block_start":"..","block_end":".."}``, end inclusive). A
broker claims the next block with a write conditional on the znode's version
(``KafkaZkClient.claim_producer_id_block``), so two brokers can never both own a block,
and hands out the block's ids one by one. Invariants: an id is handed out only from a
block this broker claimed, each at most once; a block claimed but not used up (the
broker stopped) leaves a gap, never a reuse.

Unlike Kafka 3.9's ZkProducerIdManager, which blocks its request thread on ZooKeeper
whenever a block runs out, the next block is claimed ahead (once 90% of the current one
is handed out, Kafka's RPCProducerIdManager threshold) in a worker thread, so
InitProducerId waits for ZooKeeper only on the first request or under a burst. While no
block can be claimed InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS (retriable).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final, Protocol

from kazoo.exceptions import KazooException

from strom.broker.producer_ids import ProducerIdsUnavailableError
from strom.protocol.errors import KafkaException

logger = logging.getLogger(__name__)

PREFETCH_THRESHOLD: Final = 0.9


class ProducerIdBlockClaimer(Protocol):
    """The part of ``KafkaZkClient`` this needs (blocking; called in a worker thread)."""

    def claim_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        """Claim the next block for ``broker_id``: its first and last id (inclusive)."""
        ...


class ZkProducerIdManager:
    def __init__(self, broker_id: int, zk_client: ProducerIdBlockClaimer) -> None:
        self.broker_id = broker_id
        self.zk_client = zk_client
        self.claims = 0  # blocks this manager claimed (the tests count them)
        self._next = 0
        self._last = -1  # the current block's last id; _next > _last: used up
        self._prefetch_at = 0
        self._next_block: tuple[int, int] | None = None
        self._claim: asyncio.Task[None] | None = None
        self._claim_error: Exception | None = None

    def load(self) -> None:
        """Nothing to read at start: the first block is claimed by the first request."""

    async def generate(self) -> int:
        """The next id; waits only when the current block is used up and the next not here."""
        while self._next > self._last:
            await self._switch_block()
        producer_id = self._next
        self._next += 1
        if self._next >= self._prefetch_at and self._next_block is None and self._claim is None:
            self._start_claim()
        return producer_id

    async def shutdown(self) -> None:
        """Wait for a claim in flight (its thread cannot be stopped) before ZooKeeper closes."""
        if self._claim is not None:
            await asyncio.shield(self._claim)

    async def _switch_block(self) -> None:
        if self._next_block is None:
            if self._claim is None:
                self._start_claim()
            assert self._claim is not None
            # Shielded: a waiter whose connection closes must not cancel everyone's claim.
            await asyncio.shield(self._claim)
        if self._next <= self._last:
            return  # another waiter switched already
        if self._next_block is None:
            raise ProducerIdsUnavailableError(f"cannot claim a block of producer ids in ZooKeeper: {self._claim_error}")
        first, last = self._next_block
        self._next_block = None
        self._next, self._last = first, last
        self._prefetch_at = first + int((last - first + 1) * PREFETCH_THRESHOLD)

    def _start_claim(self) -> None:
        self._claim_error = None
        self._claim = asyncio.get_running_loop().create_task(self._claim_block(), name="claim producer id block")

    async def _claim_block(self) -> None:
        try:
            first, last = await asyncio.to_thread(self.zk_client.claim_producer_id_block, self.broker_id)
        except (KafkaException, KazooException) as exc:  # ZooKeeper unreachable, ids exhausted
            logger.warning("broker %d: claiming a producer id block failed: %s", self.broker_id, exc)
            self._claim_error = exc
        else:
            self.claims += 1
            self._next_block = (first, last)
            logger.info("broker %d claimed producer ids %d-%d", self.broker_id, first, last)
        finally:
            self._claim = None
