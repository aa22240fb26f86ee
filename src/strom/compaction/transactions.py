"""What compaction does with transactions (Kafka's ``CleanedTransactionMetadata`` and the
batch retention of ``LogCleaner.Cleaner``).

Batches are judged in offset order, from the log start (pass 2) or the first dirty
offset (pass 1), against the aborted transactions of the range, read from the
``.txnindex`` files (``Log.collect_aborted_transactions``). An aborted transaction is
"ongoing" from its first offset until its ABORT marker; a transactional data batch of
a producer with an ongoing aborted transaction is aborted, and its records go whatever
their keys (they never enter the offset map either, so they supersede nothing).

Markers (control batches never take part in key-based compaction):

- an ABORT marker is kept while a batch of its transaction was seen in this pass: its
  ``.txnindex`` entry is then kept too (``kept_aborted``, written with the cleaned
  segment); once no batch is seen, it may go, and its entry is dropped;
- a COMMIT marker may go once no batch of its transaction was seen;
- an empty control batch (an earlier cleaning emptied it) may go;
- a marker that may go is removed only when its segment was last modified before the
  delete horizon, the rule the cleaner applies to tombstones (Kafka's before KIP-534,
  ``retainLegacyDeletesAndTxnMarkers``), so a read_committed consumer that reads the
  clean section within ``delete.retention.ms`` still meets the marker.

Producer state (Kafka's ``RETAIN_EMPTY``): the batch holding an active producer's last
data offset, or, when its last entry is a marker, the marker of its current epoch
(the epoch fencing needs), is kept as a batch with no records when all its records
go, so a log rebuilt from the segments still knows the producer's last sequence and
epoch. Any other batch left with no record is removed.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import NamedTuple

from strom.protocol.errors import ProtocolError
from strom.protocol.records import (
    BatchHeader,
    ControlRecordType,
    decode_batch,
    parse_control_record,
)
from strom.storage.log import Log
from strom.storage.producer_state import NO_PRODUCER_ID
from strom.storage.transaction_index import AbortedTxn

EMPTY_CONTROL = -1  # a control batch without records


class TxnBatch(NamedTuple):
    """What the transaction bookkeeping needs of one batch (pass 1 keeps those of the
    transactional batches, so pass 2 can replay a segment it does not read again)."""

    last_offset: int
    producer_id: int
    producer_epoch: int
    is_transactional: bool
    control_type: int | None  # None for a data batch; EMPTY_CONTROL for an empty control batch


class Verdict(NamedTuple):
    """One batch's fate: its records all go (aborted, or a marker past the horizon),
    and whether the batch itself stays, emptied, for the producer state."""

    discard_records: bool
    retain_empty: bool


KEEP = Verdict(False, False)


class LastRecord(NamedTuple):
    """Kafka's ``LastRecord``: an active producer's last data offset (None if its epoch
    has no batch, i.e. its last entry is a marker) and its current epoch."""

    last_data_offset: int | None
    producer_epoch: int


def last_records_of_active_producers(log: Log) -> dict[int, LastRecord]:
    return {entry.producer_id: LastRecord(entry.batches[-1].last_offset if entry.batches
                                          else None, entry.producer_epoch)
            for entry in log.producer_state.active_producers()}


def txn_batch(chunk: bytes | bytearray | memoryview, position: int,
              header: BatchHeader) -> TxnBatch:
    control: int | None = None
    if header.is_control:
        control = EMPTY_CONTROL
        if header.records_count:
            records = decode_batch(chunk, position, verify_crc=False).records
            try:
                control = int(parse_control_record(records[0].key, records[0].value).type)
            except ProtocolError:
                control = ControlRecordType.LEADER_CHANGE  # unreadable: kept, as unknown types
    return TxnBatch(header.last_offset, header.producer_id, header.producer_epoch,
                    header.is_transactional, control)


class CleanedTransactions:
    """Kafka's ``CleanedTransactionMetadata``: the transactions met while reading batches
    in offset order, and the aborted ones whose ``.txnindex`` entries stay."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending = [(entry.first_offset, entry.last_offset, entry) for entry in aborted]
        heapq.heapify(self._pending)
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # pid -> (txn, seen)
        self._ongoing_committed: set[int] = set()
        self.kept_aborted: list[AbortedTxn] = []  # of the segments being rewritten

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            entry = heapq.heappop(self._pending)[2]
            self._ongoing_aborted.setdefault(entry.producer_id, (entry, False))

    def on_batch(self, batch: TxnBatch) -> bool:
        """Whether the batch may go: an aborted data batch, or a marker whose transaction
        has no batch left (subject to the delete horizon)."""
        self._consume_aborted_up_to(batch.last_offset)
        if batch.control_type is None:
            if not batch.is_transactional:
                return False
            aborted = self._ongoing_aborted.get(batch.producer_id)
            if aborted is not None:
                self._ongoing_aborted[batch.producer_id] = (aborted[0], True)
                return True
            self._ongoing_committed.add(batch.producer_id)
            return False
        if batch.control_type == ControlRecordType.ABORT:
            ended = self._ongoing_aborted.pop(batch.producer_id, None)
            if ended is not None and ended[1]:
                self.kept_aborted.append(ended[0])
                return False
            return True
        if batch.control_type == ControlRecordType.COMMIT:
            if batch.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(batch.producer_id)
                return False
            return True
        return batch.control_type == EMPTY_CONTROL


class BatchJudge:
    """Verdicts for the batches of the chunks pass 2 reads, in offset order."""

    def __init__(self, transactions: CleanedTransactions,
                 last_records: dict[int, LastRecord]) -> None:
        self.transactions = transactions
        self.last_records = last_records

    def replay(self, batches: Iterable[TxnBatch]) -> None:
        """The transactional batches of segments not read again (nothing to remove)."""
        for batch in batches:
            self.transactions.on_batch(batch)

    def judge(self, chunk: bytes | bytearray | memoryview,
              headers: list[tuple[int, BatchHeader]], retain_deletes: bool) -> list[Verdict]:
        verdicts: list[Verdict] = []
        for position, header in headers:
            if header.magic != 2 or header.producer_id == NO_PRODUCER_ID:
                verdicts.append(KEEP)
                continue
            batch = txn_batch(chunk, position, header)
            may_go = self.transactions.on_batch(batch)
            discard = may_go and (batch.control_type is None or not retain_deletes)
            verdicts.append(Verdict(discard, self._last_of_producer(batch)))
        return verdicts

    def _last_of_producer(self, batch: TxnBatch) -> bool:
        last = self.last_records.get(batch.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return batch.last_offset == last.last_data_offset
        return batch.control_type is not None and batch.producer_epoch == last.producer_epoch


def map_pass_batches(chunk: bytes | bytearray | memoryview,
                     headers: list[tuple[int, BatchHeader]], transactions: CleanedTransactions,
                     recorded: list[TxnBatch], retain_deletes: bool) -> tuple[list[bool], bool]:
    """Pass 1 over one chunk: which batches are aborted (their records stay out of the
    map), and whether the chunk holds a batch pass 2 may remove (an aborted one, an
    empty one, a marker that may go). Records the transactional batches in
    ``recorded``. Pass 1 starts at the first dirty offset, so it sees no more batches of
    a transaction than pass 2 does: a marker pass 2 removes, pass 1 finds removable."""
    aborted = [False] * len(headers)
    removable = False
    for number, (position, header) in enumerate(headers):
        if header.magic != 2 or header.producer_id == NO_PRODUCER_ID:
            continue
        if header.records_count == 0 and not header.is_control:
            removable = True
        if not header.is_transactional:
            continue
        batch = txn_batch(chunk, position, header)
        recorded.append(batch)
        if transactions.on_batch(batch):
            if batch.control_type is None:
                aborted[number] = removable = True
            elif not retain_deletes:
                removable = True
    return aborted, removable
