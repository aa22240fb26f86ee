"""Producer ids for idempotent producers, unique across restarts (and, in a cluster, brokers).

InitProducerId draws from a ``ProducerIdSource``: on one node the ``ProducerIdManager``
here; in cluster mode ``strom.cluster.producer_id_manager.ZkProducerIdManager``, which
claims its blocks in ZooKeeper so no two brokers hand out the same id.

On disk, ``<data-dir>/producer-id-block`` holds one line, ``next=<id>``: the first id
of the next block. Ids are handed out from a block of ``BLOCK_SIZE`` and the file is
advanced (atomically, fsync'ed) *before* the first id of a block is used, so a crash
can skip ids but never reuse one: a reused id would inherit another producer's
sequence numbers. Kafka's controller hands out blocks the same way (KIP-730).
"""

from __future__ import annotations

import os
from typing import Final, Protocol

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException

BLOCK_SIZE: Final = 1000
FILE_NAME: Final = "producer-id-block"


class ProducerIdsUnavailableError(KafkaException):
    """No block of ids can be had now (ZooKeeper unreachable): a retriable refusal, as
    Kafka's broker answers while it has no block (RPCProducerIdManager)."""

    error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class ProducerIdSource(Protocol):
    def load(self) -> None:
        """Read what the first id needs, at start."""

    async def generate(self) -> int:
        """A producer id no producer had before; raises ``ProducerIdsUnavailableError``."""


class ProducerIdManager:
    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, FILE_NAME)
        self._next = 0
        self._block_end = 0

    def load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as file:
                text = file.read().strip()
            self._next = int(text.removeprefix("next="))
        except FileNotFoundError:
            self._next = 0
        self._block_end = self._next

    async def generate(self) -> int:
        return self.next_id()

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            self._persist(self._block_end)
        producer_id = self._next
        self._next += 1
        return producer_id

    def _persist(self, next_block: int) -> None:
        temp = self.path + ".tmp"
        with open(temp, "w", encoding="utf-8") as file:
            file.write(f"next={next_block}\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, self.path)
