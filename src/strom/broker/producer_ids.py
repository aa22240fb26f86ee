"""Producer ids for idempotent producers, unique across restarts.

On disk, ``<data-dir>/producer-id-block`` holds one line, ``next=<id>``: the first id
of the next block. Ids are handed out from a block of ``BLOCK_SIZE`` and the file is
advanced (atomically, fsync'ed) *before* the first id of a block is used, so a crash
can skip ids but never reuse one: a reused id would inherit another producer's
sequence numbers. Kafka's controller hands out blocks the same way (KIP-730).
"""

from __future__ import annotations

import os
from typing import Final

BLOCK_SIZE: Final = 1000
FILE_NAME: Final = "producer-id-block"


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
