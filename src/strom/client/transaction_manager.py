"""The transactional producer's ``TransactionManager``: KIP-98 on the client's side, as Java's.

The states and their moves (Java's names; ``_ALLOWED_FROM`` is the table):

    UNINITIALIZED --init_transactions--> INITIALIZING --InitProducerId--> READY
    READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING_TRANSACTION --EndTxn--> READY
    IN_TRANSACTION, ABORTABLE_ERROR --abort_transaction--> ABORTING_TRANSACTION --EndTxn--> READY
    IN_TRANSACTION, COMMITTING_TRANSACTION --a failed batch or request--> ABORTABLE_ERROR
    any --fenced, unauthorized, an answer that cannot be--> FATAL_ERROR

What it asks the transaction coordinator (found with FindCoordinator key type 1, on a
connection of its own, as the consumer finds its group's):

- InitProducerId with the ``transactional.id`` and ``transaction.timeout.ms``, retried
  while the coordinator answers CONCURRENT_TRANSACTIONS (a previous instance's
  transaction is still being completed or aborted), is loading, or has moved;
- AddPartitionsToTxn before the first batch of a partition in a transaction. A
  partition is noted when a record is appended to it; the sender holds its batches
  (``sendable``) until the coordinator has it, and partitions noted while one request
  is out go together in the next, as Java's sender batches them;
- AddOffsetsToTxn, then TxnOffsetCommit to the group's own coordinator, for
  ``send_offsets_to_transaction`` (v3+ carries the member's generation, KIP-447);
- EndTxn once every batch of the transaction is answered. None for a transaction that
  added neither partitions nor offsets: the coordinator would answer INVALID_TXN_STATE
  for its Empty state, and Java and librdkafka skip it too.

Errors, sorted as Java sorts them: PRODUCER_FENCED (or INVALID_PRODUCER_EPOCH, which old
request versions answer instead) from the coordinator is fatal, ``ProducerFencedError``:
a newer instance owns the id; close the producer. A failed batch, or an error about the
transaction's content (an unknown producer id, a group member out of its generation,
TRANSACTION_ABORTABLE), is abortable: sends and commit raise it until
``abort_transaction`` brings the producer back to READY. ``init_transactions``,
``commit_transaction`` and ``abort_transaction`` wait up to ``max.block.ms``; the work
goes on after a timeout, and calling the same method again waits for it, as in Java.

A batch lost in a way that leaves its partition's sequence in doubt (a timeout, an
out-of-order or unknown producer id answer) is abortable too, but the abort then bumps
the epoch (KIP-360): after EndTxn, InitProducerId v3+ with the current producer id and
epoch, so every partition's sequence starts again at 0 with the new epoch, as Java's
and Sarama's producers do. A coordinator older than InitProducerId v3 cannot bump: the
abort then ends as any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Final, NoReturn, TypeVar

from strom.client.accumulator import RecordAccumulator
from strom.client.cluster import Cluster
from strom.client.config import ProducerConfig
from strom.client.coordinator_link import COORDINATOR_GONE, CoordinatorLink, Retry
from strom.client.errors import (
    IllegalStateError,
    InvalidProducerEpochError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortedError,
)
from strom.client.find_coordinator import GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE
from strom.client.offsets import CommitFailedError, OffsetAndMetadata
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from strom.protocol.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from strom.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from strom.protocol.messages.add_partitions_to_txn_response import AddPartitionsToTxnResponse
from strom.protocol.messages.end_txn_request import EndTxnRequest
from strom.protocol.messages.end_txn_response import EndTxnResponse
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.messages.init_producer_id_response import InitProducerIdResponse
from strom.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from strom.protocol.messages.txn_offset_commit_response import TxnOffsetCommitResponse
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.client.consumer import ConsumerGroupMetadata

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

# The versions a TV1 client speaks (KIP-890 part 2's EndTxn v5 and TxnOffsetCommit v5 are
# for brokers that advertise transaction.version 2). AddPartitionsToTxn v4+ is broker-only.
INIT_PRODUCER_ID_VERSIONS: Final = range(0, 6)
ADD_PARTITIONS_VERSIONS: Final = range(0, 4)
ADD_OFFSETS_VERSIONS: Final = range(0, 5)
END_TXN_VERSIONS: Final = range(0, 5)
TXN_OFFSET_COMMIT_VERSIONS: Final = range(0, 5)
# Java retries AddPartitionsToTxn's CONCURRENT_TRANSACTIONS after 20 ms, not retry.backoff.ms:
# the previous transaction's markers are usually written by then (KAFKA-5477).
ADD_PARTITIONS_RETRY_BACKOFF_MS: Final = 20

_FENCED: Final = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
_COORDINATOR_BUSY: Final = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})
# Errors after which this producer can do nothing more (Java's isFatalException and kin).
_FATAL: Final = frozenset({
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.INVALID_TXN_STATE, ErrorCode.UNSUPPORTED_VERSION, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    ErrorCode.INVALID_TRANSACTION_TIMEOUT,
})
# A batch failing with these leaves nothing to abort with (Java's maybeTransitionToErrorState).
_FATAL_FOR_BATCH: Final = _FATAL & {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                     ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION}
# A batch failing with these may or may not be in the log, so its partition's sequence
# is in doubt: the abort bumps the epoch (Java's needToTriggerEpochBumpFromClient).
_SEQUENCE_IN_DOUBT: Final = frozenset({
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
})
# Errors about the transaction's content: abort it and carry on.
_ABORTABLE: Final = frozenset({
    ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.TRANSACTION_ABORTABLE,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
})


class TransactionState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


_S = TransactionState
# Which states each state may be entered from (Java's State.isTransitionValid);
# FATAL_ERROR may be entered from any.
_ALLOWED_FROM: Final[dict[TransactionState, frozenset[TransactionState]]] = {
    _S.UNINITIALIZED: frozenset(),
    _S.INITIALIZING: frozenset({_S.UNINITIALIZED, _S.ABORTING_TRANSACTION}),  # the latter: KIP-360
    _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION}),
    _S.IN_TRANSACTION: frozenset({_S.READY}),
    _S.COMMITTING_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
    _S.ABORTING_TRANSACTION: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.ABORTABLE_ERROR: frozenset({_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR,
                                   _S.INITIALIZING}),
    _S.FATAL_ERROR: frozenset(TransactionState),
}


class _Backoff(Exception):
    """Try the request again after ``delay_ms``."""

    def __init__(self, reason: str, delay_ms: int) -> None:
        super().__init__(reason)
        self.delay_ms = delay_ms


class TransactionManager:
    """One transactional producer's transactions: its state, its producer id and epoch,
    the partitions its coordinator has, and the requests that move it along."""

    def __init__(self, config: ProducerConfig, cluster: Cluster, accumulator: RecordAccumulator) -> None:
        assert config.transactional_id is not None
        self.transactional_id: str = config.transactional_id
        self.config = config
        self._cluster = cluster
        self._accumulator = accumulator
        self._coordinator = CoordinatorLink(cluster, config, self.transactional_id, TRANSACTION_KEY_TYPE)
        self._group_coordinators: dict[str, CoordinatorLink] = {}
        self.state = TransactionState.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self._in_transaction: set[TopicPartition] = set()  # the coordinator has them
        self._new_partitions: set[TopicPartition] = set()  # to add
        self._adding: asyncio.Task[None] | None = None  # the AddPartitionsToTxn loop
        self._transaction_started = False  # partitions or offsets added: EndTxn needed
        self._epoch_bump_required = False  # KIP-360: the abort ends with InitProducerId
        self._init_producer_id_version = -1  # as negotiated with the coordinator
        # Told the producer id and epoch each time InitProducerId gives them (the sender).
        self.on_producer_id: Callable[[int, int], None] | None = None
        # init_transactions / commit / abort under way, or finished unseen: a caller that
        # timed out on it gets its outcome by calling the same method again.
        self._pending: asyncio.Task[None] | None = None
        self._pending_call = ""

    # -- what the producer and its sender ask ------------------------------------------
    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """A record is about to go to ``tp``: refuse it outside a transaction, and have
        the partition added to the transaction before its first batch is sent."""
        if self.state is not TransactionState.IN_TRANSACTION:
            self._fail_send()
        if tp in self._in_transaction or tp in self._new_partitions:
            return
        self._new_partitions.add(tp)
        if self._adding is None:
            self._adding = asyncio.ensure_future(self._add_partitions())

    def sendable(self, ready: set[TopicPartition]) -> set[TopicPartition]:
        """Of the partitions with a batch ready, those the coordinator has in the transaction."""
        in_transaction = self._in_transaction
        return ready if ready <= in_transaction else ready & in_transaction

    def undrained_batch_error(self) -> tuple[KafkaError, bool] | None:
        """Why batches not yet sent must fail now, and whether retries must too (a fatal
        error), or None while they may go."""
        state = self.state
        if state is TransactionState.FATAL_ERROR:
            return self.last_error or IllegalStateError("the producer is in a fatal error state"), True
        if state is TransactionState.ABORTABLE_ERROR:
            return self.last_error or TransactionAbortedError(), False
        if state is TransactionState.ABORTING_TRANSACTION:
            return TransactionAbortedError(), False
        return None

    def handle_failed_batch(self, error: BaseException) -> None:
        """A batch of the transaction failed: the transaction cannot commit (Java's
        maybeTransitionToErrorState)."""
        code = error.error_code if isinstance(error, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
        if code is ErrorCode.PRODUCER_FENCED:
            self._fatal(ProducerFencedError(str(error)))
        elif code in _FATAL_FOR_BATCH:
            self._fatal(error if isinstance(error, KafkaError) else KafkaError(code, str(error)))
        elif code is ErrorCode.INVALID_PRODUCER_EPOCH:
            self._abortable(InvalidProducerEpochError(str(error)))
        else:
            if code in _SEQUENCE_IN_DOUBT and self.state is not TransactionState.ABORTING_TRANSACTION:
                self._epoch_bump_required = True
            self._abortable(error if isinstance(error, KafkaError) else KafkaError(code, str(error)))

    def handle_failed_send(self, error: KafkaError) -> None:
        """A record of the transaction was refused before it reached a batch."""
        if self.state is TransactionState.IN_TRANSACTION and not isinstance(error, IllegalStateError):
            self.handle_failed_batch(error)

    # -- the API the producer exposes ----------------------------------------------------
    async def init_transactions(self) -> None:
        if not self._resumes("init_transactions"):
            self._transition(TransactionState.INITIALIZING)
            self._start_pending("init_transactions", self._init_producer_id())
        await self._wait_pending("init_transactions")

    def begin_transaction(self) -> None:
        self._maybe_fail_with_error()
        if self.state is not TransactionState.READY:
            raise IllegalStateError(f"begin_transaction in state {self.state.name}"
                                    + (": call init_transactions() first"
                                       if self.state is TransactionState.UNINITIALIZED else ""))
        self._transition(TransactionState.IN_TRANSACTION)

    async def commit_transaction(self) -> None:
        await self._end("commit_transaction", TransactionState.COMMITTING_TRANSACTION)

    async def abort_transaction(self) -> None:
        await self._end("abort_transaction", TransactionState.ABORTING_TRANSACTION)

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                          group: ConsumerGroupMetadata | str) -> None:
        """Commit ``offsets`` for the group with the transaction (KIP-98, KIP-447)."""
        self._maybe_fail_with_error()
        if self.state is not TransactionState.IN_TRANSACTION:
            raise IllegalStateError(f"send_offsets_to_transaction in state {self.state.name}: "
                                    "no transaction in progress")
        if isinstance(group, str):
            group_id, generation_id, member_id, instance_id = group, -1, "", None
        else:
            group_id, generation_id, member_id = group.group_id, group.generation_id, group.member_id
            instance_id = group.group_instance_id
        try:
            await self._retrying(lambda: self._add_offsets(group_id))
            self._transaction_started = True
            pending = dict(offsets)
            await self._retrying(lambda: self._txn_offset_commit(
                pending, group_id, generation_id, member_id, instance_id))
        except KafkaError as exc:
            raise self._unclassified(exc) from None

    async def close(self) -> None:
        for task in (self._pending, self._adding):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, KafkaError):
                    await task
        for link in (self._coordinator, *self._group_coordinators.values()):
            await link.close()

    @property
    def has_ongoing_transaction(self) -> bool:
        """Whether a transaction is open (or failed) and must be aborted before closing."""
        return self.state in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR)

    # -- state -------------------------------------------------------------------------
    def _transition(self, target: TransactionState, error: KafkaError | None = None) -> None:
        if self.state not in _ALLOWED_FROM[target]:
            raise IllegalStateError(f"invalid transition from {self.state.name} to {target.name}")
        logger.debug("transactional id %s: %s -> %s", self.transactional_id, self.state.name, target.name)
        self.state = target
        if error is not None:
            self.last_error = error
        if target is TransactionState.READY:
            self.last_error = None
            self._transaction_started = False
            self._epoch_bump_required = False
            self._in_transaction.clear()
            self._new_partitions.clear()
        if target in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
            self._accumulator.wakeup.set()  # the sender fails what waits to be sent

    def _abortable(self, error: KafkaError) -> KafkaError:
        if self.state is TransactionState.ABORTING_TRANSACTION or self.state is TransactionState.FATAL_ERROR:
            return error  # being aborted (or dead) anyway
        logger.info("transactional id %s: abortable error: %s", self.transactional_id, error)
        self._transition(TransactionState.ABORTABLE_ERROR, error)
        return error

    def _fatal(self, error: KafkaError) -> KafkaError:
        if self.state is not TransactionState.FATAL_ERROR:
            logger.error("transactional id %s: fatal error: %s", self.transactional_id, error)
            self._transition(TransactionState.FATAL_ERROR, error)
        return error

    def _unclassified(self, error: KafkaError) -> KafkaError:
        """An error the request's handler did not sort: fatal, as Java's "unexpected error"."""
        if self.state not in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
            self._fatal(error)
        return error

    def _maybe_fail_with_error(self) -> None:
        error = self.last_error
        if self.state not in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR) or error is None:
            return
        if isinstance(error, ProducerFencedError):
            raise ProducerFencedError(error.detail)
        if isinstance(error, InvalidProducerEpochError):
            raise InvalidProducerEpochError(error.detail)
        what = "an abortable" if self.state is TransactionState.ABORTABLE_ERROR else "a fatal"
        raise KafkaError(error.error_code, f"the transaction is in {what} error state: {error}") from error

    def _fail_send(self) -> NoReturn:
        self._maybe_fail_with_error()
        if self.producer_id < 0:
            raise IllegalStateError("a transactional producer cannot send before init_transactions()")
        raise IllegalStateError(f"cannot send in state {self.state.name}: call begin_transaction() first")

    # -- init / commit / abort: work that outlives a caller's timeout ------------------
    def _resumes(self, call: str) -> bool:
        """Whether ``call`` was made before and timed out: its work is then this call's."""
        task = self._pending
        if task is not None and self._pending_call != call and task.done():
            self._pending = task = None  # another call's, finished: nothing to resume
        return task is not None and self._pending_call == call

    def _start_pending(self, call: str, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: no warning
        self._pending, self._pending_call = task, call

    async def _wait_pending(self, what: str) -> None:
        task = self._pending
        assert task is not None
        try:
            async with asyncio.timeout(self.config.max_block_ms / 1000):
                await asyncio.shield(task)
        except TimeoutError:
            raise KafkaTimeoutError(f"{what} did not finish within max.block.ms "
                                    f"({self.config.max_block_ms} ms); call it again to keep waiting") from None
        finally:
            if task.done() and self._pending is task:
                self._pending = None

    async def _end(self, what: str, target: TransactionState) -> None:
        if self._resumes(what):
            await self._wait_pending(what)
            return
        if target is TransactionState.COMMITTING_TRANSACTION or self.state is TransactionState.FATAL_ERROR:
            self._maybe_fail_with_error()
        if self.state not in _ALLOWED_FROM[target]:
            raise IllegalStateError(f"{what} in state {self.state.name}: no transaction in progress")
        self._transition(target)
        if target is TransactionState.ABORTING_TRANSACTION:
            self._new_partitions.clear()
        self._start_pending(what, self._complete(target is TransactionState.COMMITTING_TRANSACTION))
        await self._wait_pending(what)

    async def _complete(self, commit: bool) -> None:
        accumulator = self._accumulator
        if not commit:
            accumulator.abort_undrained_batches(TransactionAbortedError())
        # EndTxn only once every batch of the transaction is answered (in flight, retried,
        # or waiting for its partition to be added), as Java's sender waits.
        await accumulator.flush()
        if self._adding is not None:
            await asyncio.shield(self._adding)
        if self.state is not (TransactionState.COMMITTING_TRANSACTION if commit
                              else TransactionState.ABORTING_TRANSACTION):
            self._maybe_fail_with_error()  # a batch or AddPartitionsToTxn failed meanwhile
        # KIP-360 needs InitProducerId v3+ (the producer id and epoch in the request)
        bump = not commit and self._epoch_bump_required and self._init_producer_id_version >= 3
        # INVALID_PRODUCER_ID_MAPPING: the coordinator would refuse EndTxn too (Java skips it)
        unmapped = self.last_error is not None and self.last_error.error_code is ErrorCode.INVALID_PRODUCER_ID_MAPPING
        try:
            if self._transaction_started and not (bump and unmapped):  # else no EndTxn: nothing added
                await self._retrying(lambda: self._end_txn(commit))
        except KafkaError as exc:
            raise self._unclassified(exc) from None
        if bump:
            logger.info("transactional id %s: bumping epoch %d after the abort (KIP-360)",
                        self.transactional_id, self.producer_epoch)
            self._transition(TransactionState.INITIALIZING)
            await self._init_producer_id(bump=True)
            return
        self._transition(TransactionState.READY)

    # -- requests ----------------------------------------------------------------------
    async def _retrying(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        """``attempt`` until it returns or raises an error for good; retried after a
        backoff when the coordinator is busy, moved or unreachable."""
        while True:
            try:
                return await attempt()
            except _Backoff as backoff:
                reason, delay_ms = str(backoff), backoff.delay_ms
            except (Retry, KafkaConnectionError, KafkaTimeoutError) as exc:
                reason, delay_ms = str(exc), self.config.retry_backoff_ms
            logger.debug("transactional id %s: retrying: %s", self.transactional_id, reason)
            await asyncio.sleep(delay_ms / 1000)

    def _coordinator_error(self, link: CoordinatorLink, code: ErrorCode, what: str,
                           busy_backoff_ms: int | None = None) -> NoReturn:
        """Raise what ``code`` in a coordinator's answer means: retry, fenced, or the error."""
        if code in COORDINATOR_GONE:
            link.mark_unknown(code.name)
            raise Retry(f"{what}: {code.name}")
        if code in _COORDINATOR_BUSY:
            raise _Backoff(f"{what}: {code.name}", busy_backoff_ms or self.config.retry_backoff_ms)
        if code in _FENCED:
            raise self._fatal(ProducerFencedError(
                f"{what}: {code.name}: a newer producer with transactional.id {self.transactional_id!r} exists"))
        if code in _FATAL:
            raise self._fatal(KafkaError(code, what))
        if code in _ABORTABLE:
            raise self._abortable(KafkaError(code, what))
        raise self._fatal(KafkaError(code, f"{what}: unexpected error"))

    async def _init_producer_id(self, bump: bool = False) -> None:
        """InitProducerId; ``bump`` (KIP-360, v3+) names the current producer id and epoch,
        so the coordinator bumps this producer's epoch rather than fencing it."""
        def request(version: int) -> InitProducerIdRequest:
            known = bump and version >= 3
            return InitProducerIdRequest(transactional_id=self.transactional_id,
                                         transaction_timeout_ms=self.config.transaction_timeout_ms,
                                         producer_id=self.producer_id if known else -1,
                                         producer_epoch=self.producer_epoch if known else -1)

        async def attempt() -> None:
            response, version = await self._coordinator.send(InitProducerIdRequest.API_KEY, request,
                                                             INIT_PRODUCER_ID_VERSIONS)
            assert isinstance(response, InitProducerIdResponse)
            self._init_producer_id_version = version
            code = ErrorCode.from_code(response.error_code)
            if code is not ErrorCode.NONE:
                self._coordinator_error(self._coordinator, code, "InitProducerId")
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch

        try:
            await self._retrying(attempt)
        except KafkaError as exc:
            raise self._fatal(exc) from None
        logger.info("transactional id %s: producer id %d, epoch %d", self.transactional_id,
                    self.producer_id, self.producer_epoch)
        if self.on_producer_id is not None:
            self.on_producer_id(self.producer_id, self.producer_epoch)
        self._transition(TransactionState.READY)

    async def _add_partitions(self) -> None:
        """Add the noted partitions, a request at a time, until none is left to add."""
        try:
            while self._new_partitions and self.state in (
                    TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION,
                    TransactionState.ABORTING_TRANSACTION):
                adding = frozenset(self._new_partitions)
                await self._retrying(functools.partial(self._add_partitions_once, adding))
                self._in_transaction |= adding
                self._new_partitions -= adding
                self._transaction_started = True
                self._accumulator.wakeup.set()  # their batches may go now
        except KafkaError as exc:
            self._unclassified(exc)
        finally:
            self._adding = None

    async def _add_partitions_once(self, partitions: frozenset[TopicPartition]) -> None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=tuple(AddPartitionsToTxnTopic(name=topic, partitions=tuple(indexes))
                                      for topic, indexes in by_topic.items()))
        response, _ = await self._coordinator.send(AddPartitionsToTxnRequest.API_KEY, lambda _: request,
                                                   ADD_PARTITIONS_VERSIONS)
        assert isinstance(response, AddPartitionsToTxnResponse)
        codes = {ErrorCode.from_code(part.partition_error_code)
                 for topic in response.results_by_topic_v3_and_below for part in topic.results_by_partition}
        codes -= {ErrorCode.NONE, ErrorCode.OPERATION_NOT_ATTEMPTED}  # the latter: another failed
        if not codes:
            return
        # The worst first: fenced and fatal errors, then a move or a busy coordinator.
        code = min(codes, key=lambda c: (c not in _FENCED, c not in _FATAL, c not in COORDINATOR_GONE,
                                         c not in _COORDINATOR_BUSY, int(c)))
        if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise _Backoff("AddPartitionsToTxn: UNKNOWN_TOPIC_OR_PARTITION", self.config.retry_backoff_ms)
        if code not in _FENCED | _FATAL | frozenset(COORDINATOR_GONE) | _COORDINATOR_BUSY | _ABORTABLE:
            raise self._abortable(KafkaError(code, f"AddPartitionsToTxn for {sorted(partitions)}"))
        backoff = ADD_PARTITIONS_RETRY_BACKOFF_MS if code is ErrorCode.CONCURRENT_TRANSACTIONS else None
        self._coordinator_error(self._coordinator, code, f"AddPartitionsToTxn for {sorted(partitions)}", backoff)

    async def _add_offsets(self, group_id: str) -> None:
        request = AddOffsetsToTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                         producer_epoch=self.producer_epoch, group_id=group_id)
        response, _ = await self._coordinator.send(AddOffsetsToTxnRequest.API_KEY, lambda _: request,
                                                   ADD_OFFSETS_VERSIONS)
        assert isinstance(response, AddOffsetsToTxnResponse)
        code = ErrorCode.from_code(response.error_code)
        if code is not ErrorCode.NONE:
            self._coordinator_error(self._coordinator, code, f"AddOffsetsToTxn for group {group_id!r}")

    async def _txn_offset_commit(self, pending: dict[TopicPartition, OffsetAndMetadata], group_id: str,
                                 generation_id: int, member_id: str, instance_id: str | None) -> None:
        """Commit ``pending`` through the group's coordinator; partitions it answers for
        leave ``pending``, so a retry carries only those still to do (as Java's)."""
        link = self._group_coordinators.get(group_id)
        if link is None:
            link = self._group_coordinators[group_id] = CoordinatorLink(
                self._cluster, self.config, group_id, GROUP_KEY_TYPE)

        def request(version: int) -> TxnOffsetCommitRequest:
            by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
            for (topic, partition), committed in sorted(pending.items()):
                epoch = committed.leader_epoch if committed.leader_epoch is not None and version >= 2 else -1
                by_topic.setdefault(topic, []).append(TxnOffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=committed.offset,
                    committed_leader_epoch=epoch, committed_metadata=committed.metadata))
            v3 = version >= 3  # KIP-447: the member's generation, so a zombie's commit is refused
            return TxnOffsetCommitRequest(
                transactional_id=self.transactional_id, group_id=group_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, generation_id=generation_id if v3 else -1,
                member_id=member_id if v3 else "", group_instance_id=instance_id if v3 else None,
                topics=tuple(TxnOffsetCommitRequestTopic(name=topic, partitions=tuple(partitions))
                             for topic, partitions in by_topic.items()))

        response, _ = await link.send(TxnOffsetCommitRequest.API_KEY, request, TXN_OFFSET_COMMIT_VERSIONS)
        assert isinstance(response, TxnOffsetCommitResponse)
        errors: dict[ErrorCode, list[TopicPartition]] = {}
        for topic in response.topics:
            for part in topic.partitions:
                code = ErrorCode.from_code(part.error_code)
                tp = (topic.name, part.partition_index)
                if code is ErrorCode.NONE:
                    pending.pop(tp, None)
                else:
                    errors.setdefault(code, []).append(tp)
        if not errors:
            if pending:
                raise Retry(f"TxnOffsetCommit answered nothing for {sorted(pending)}")
            return
        what = f"TxnOffsetCommit for group {group_id!r}"
        for code in errors:
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                raise self._abortable(CommitFailedError(
                    code, f"{what}: member {member_id!r} of generation {generation_id} is no longer in the group"))
            if code in (ErrorCode.FENCED_INSTANCE_ID, ErrorCode.TRANSACTION_ABORTABLE):
                raise self._abortable(KafkaError(code, what))
        code = min(errors, key=lambda c: (c not in _FENCED, c not in _FATAL, int(c)))
        if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT):
            if code is ErrorCode.REQUEST_TIMED_OUT:
                link.mark_unknown(code.name)
            raise Retry(f"{what}: {code.name}")
        self._coordinator_error(link, code, what)

    async def _end_txn(self, commit: bool) -> None:
        request = EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                producer_epoch=self.producer_epoch, committed=commit)
        response, _ = await self._coordinator.send(EndTxnRequest.API_KEY, lambda _: request, END_TXN_VERSIONS)
        assert isinstance(response, EndTxnResponse)
        code = ErrorCode.from_code(response.error_code)
        if code is not ErrorCode.NONE:
            self._coordinator_error(self._coordinator, code, f"EndTxn ({'commit' if commit else 'abort'})")
