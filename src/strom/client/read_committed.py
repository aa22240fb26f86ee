"""READ_COMMITTED on the consumer's side: leaving out records of aborted transactions.

A Fetch at READ_COMMITTED stops at the last stable offset and lists the aborted
transactions whose records it may contain, as (producer id, first offset). The client
drops, batch by batch, a producer's transactional batches from that first offset until
the producer's ABORT marker, as Java's fetcher does. Shared by the per-record poll and
the Arrow decoder.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from strom.protocol.records.header import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader
from strom.protocol.records.v2 import Buffer, ControlRecordType, decode_batch, parse_control_record


class AbortedTransactionLike(Protocol):
    """A Fetch response's ``AbortedTransaction`` (or anything with its two fields)."""

    @property
    def producer_id(self) -> int: ...

    @property
    def first_offset(self) -> int: ...


class AbortFilter:
    """READ_COMMITTED as Java's fetcher does it, one batch at a time.

    An aborted transaction ``(producer, first offset)`` becomes active once a batch
    reaching that offset is seen; the producer's transactional batches are dropped
    until its ABORT marker.
    """

    def __init__(self, aborted: Iterable[AbortedTransactionLike]) -> None:
        self._pending = sorted((t.first_offset, t.producer_id) for t in aborted)
        self._next = 0
        self._producers: set[int] = set()

    def drops(self, buf: Buffer, pos: int, header: BatchHeader) -> bool:
        if header.producer_id < 0:
            return False
        pending = self._pending
        while self._next < len(pending) and pending[self._next][0] <= header.last_offset:
            self._producers.add(pending[self._next][1])
            self._next += 1
        if header.attributes & ATTR_CONTROL:
            if is_abort_marker(buf, pos):
                self._producers.discard(header.producer_id)
            return False
        return bool(header.attributes & ATTR_TRANSACTIONAL) and (
            header.producer_id in self._producers
        )


def is_abort_marker(buf: Buffer, pos: int) -> bool:
    records = decode_batch(buf, pos, verify_crc=False).records
    if not records:
        return False
    return parse_control_record(records[0].key, records[0].value).type == ControlRecordType.ABORT
