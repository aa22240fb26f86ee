"""One transactional id's state at its coordinator, and Kafka's two-phase transitions.

Kafka's ``TransactionMetadata``. A transition is never applied where it is decided: a
``prepare_*`` method checks it and sets ``pending_state`` (so any other request meeting
the id answers CONCURRENT_TRANSACTIONS meanwhile), returning the ``TxnTransitMetadata``
to append to ``__transaction_state``; only once that append is durable does
``complete_transition`` apply it (``TransactionStateManager.append_transaction_to_log``).
A failed append clears the pending state and leaves the id as it was, so what a client
was told always matches what a coordinator loading the log will find.

States (ids as on disk) and the states each may follow::

    Empty 0              Empty, CompleteCommit, CompleteAbort
    Ongoing 1            Ongoing, Empty, CompleteCommit, CompleteAbort
    PrepareCommit 2      Ongoing
    PrepareAbort 3       Ongoing, PrepareEpochFence
    CompleteCommit 4     PrepareCommit
    CompleteAbort 5      PrepareAbort
    Dead 6               Empty, CompleteCommit, CompleteAbort (expiry: a tombstone, never a value)
    PrepareEpochFence 7  Ongoing (in memory only: the abort that follows is what is written)

Epochs: ``producer_epoch`` goes up by one per InitProducerId (and per fence); at
``EPOCH_EXHAUSTED`` (Short.MaxValue - 1) the next InitProducerId rotates to a new
producer id at epoch 0, remembering the old id in ``previous_producer_id`` so a retry
of that rotation is recognised (KIP-360).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from strom.broker.transaction.transaction_log import TransactionLogValue, TransactionState
from strom.protocol.topic_partition import TopicPartition

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
MAX_EPOCH: Final = 32767  # Short.MaxValue
EPOCH_EXHAUSTED: Final = MAX_EPOCH - 1

S = TransactionState

VALID_PREVIOUS_STATES: Final[dict[TransactionState, frozenset[TransactionState]]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= EPOCH_EXHAUSTED


class IllegalTransitionError(Exception):
    """A transition the state machine forbids: a coordinator bug, never a client's error."""


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """What a prepared transition will make of the id: appended, then applied."""

    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int

    def log_value(self) -> TransactionLogValue:
        return TransactionLogValue(self.producer_id, self.producer_epoch, self.txn_timeout_ms, self.state,
                                   self.partitions, self.txn_last_update_timestamp, self.txn_start_timestamp)


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    pending_state: TransactionState | None = None
    # An epoch fence whose append failed: the next fence must not bump the epoch again.
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_log(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        return cls(transactional_id, value.producer_id, producer_epoch=value.producer_epoch,
                   txn_timeout_ms=value.transaction_timeout_ms, state=value.state, partitions=set(value.partitions),
                   txn_start_timestamp=value.start_timestamp_ms,
                   txn_last_update_timestamp=value.last_update_timestamp_ms)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    def is_valid_producer_id(self, producer_id: int, producer_epoch: int) -> bool:
        """May a KIP-360 InitProducerId carrying (id, epoch) bump this id? Yes if the
        metadata is new (epoch -1), the id is the current one (its epoch is checked by the
        bump), or it is the previous one at an exhausted epoch (a retried rotation)."""
        return (self.producer_epoch == NO_PRODUCER_EPOCH or producer_id == self.producer_id
                or (producer_id == self.previous_producer_id and is_epoch_exhausted(producer_epoch)))

    # -- prepare -------------------------------------------------------------------------
    def _prepare(self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: frozenset[TopicPartition], start: int, now: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(f"{self.transactional_id}: preparing {state.name} while "
                                         f"{self.pending_state.name} is pending")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransitionError(f"{self.transactional_id}: {self.state.name} cannot become {state.name}")
        self.pending_state = state
        previous = self.producer_id if producer_id != self.producer_id else self.previous_producer_id
        return TxnTransitMetadata(producer_id, previous, epoch, last_epoch, timeout_ms, state, partitions, start, now)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch to fence the producer of an Ongoing transaction (then abort it)."""
        if self.producer_epoch == MAX_EPOCH:
            raise IllegalTransitionError(f"{self.transactional_id}: cannot fence an epoch of Short.MaxValue")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH, self.txn_timeout_ms,
                             frozenset(self.partitions), self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None, now: int
                                         ) -> TxnTransitMetadata | None:
        """InitProducerId's bump; None means PRODUCER_FENCED (a KIP-360 epoch neither
        current nor the last one)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:  # a retry of a bump that succeeded
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        if epoch == bumped and self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"{self.transactional_id}: epoch {self.producer_epoch} is exhausted")
        return self._prepare(S.EMPTY, self.producer_id, epoch, last_epoch, timeout_ms, frozenset(), -1, now)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        if self.has_pending_transaction:
            raise IllegalTransitionError(f"{self.transactional_id}: cannot rotate ids with a transaction pending")
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(S.EMPTY, new_producer_id, 0, last_epoch, timeout_ms, frozenset(), -1, now)

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now: int) -> TxnTransitMetadata:
        start = now if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) else self.txn_start_timestamp
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.partitions) | added, start, now)

    def prepare_abort_or_commit(self, state: TransactionState, now: int) -> TxnTransitMetadata:
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.partitions), self.txn_start_timestamp, now)

    def prepare_complete(self, now: int) -> TxnTransitMetadata:
        """After the markers: Complete*, with no partitions left (Kafka's ``prepareComplete``)."""
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False  # the Prepare* that followed the fence is durable
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, self.txn_last_update_timestamp)

    # -- complete ------------------------------------------------------------------------
    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """Apply a transition whose append succeeded (Kafka's ``completeTransitionTo``)."""
        if self.pending_state != transit.state:
            raise IllegalTransitionError(f"{self.transactional_id}: completing {transit.state.name}, "
                                         f"pending {self.pending_state}")
        if transit.txn_last_update_timestamp < self.txn_last_update_timestamp:
            raise IllegalTransitionError(f"{self.transactional_id}: update time goes back")
        epoch_ok = (transit.producer_epoch in (self.producer_epoch, self.producer_epoch + 1)
                    or (transit.producer_id != self.producer_id and transit.producer_epoch == 0))
        if not epoch_ok:
            raise IllegalTransitionError(f"{self.transactional_id}: epoch {self.producer_epoch} cannot become "
                                         f"{transit.producer_epoch}")
        if transit.state == S.ONGOING and not self.partitions <= transit.partitions and self.state == S.ONGOING:
            raise IllegalTransitionError(f"{self.transactional_id}: an Ongoing transaction's partitions only grow")
        self.previous_producer_id = transit.previous_producer_id
        self.producer_id = transit.producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
