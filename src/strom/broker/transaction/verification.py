"""KIP-890 part 1: a partition leader verifies a producer's transaction before its first
transactional append to the partition, so no hanging transaction can begin there.

Without it, a Produce held back (a slow network, a paused client) can land after the
transaction's abort marker: it opens a new transaction on the partition that no
coordinator knows of, and the last stable offset stays behind it until the transaction
times out nowhere (KAFKA-14402, KAFKA-17754). Kafka's defence, kept here:

1. A Produce with a transactional id (``transaction.partition.verification.enable``, true
   by default) whose batch is transactional, to a partition with no open transaction of
   that producer id and epoch, takes a ``VerificationGuard`` from the partition
   (``Partition.maybe_start_transaction_verification``) and asks the transaction
   coordinator whether the partition is in the producer's ongoing transaction
   (``TransactionCoordinator.verify_partitions_in_transaction``, Kafka's
   ``handleVerifyPartitionsInTransaction``: the answer of AddPartitionsToTxn v4 VerifyOnly).
2. Only then is the batch appended, carrying the guard: the partition appends it only if
   the transaction is open there by now, or the guard is still the partition's for the
   producer. Any append of the producer's, the coordinator's marker included, drops the
   partition's guard, so an abort that lands between the answer and the append makes the
   append fail (KAFKA-14884); the check and the append run with no ``await`` between.
3. The coordinator's errors reach the producer as Kafka's ReplicaManager sends them
   (``produce_error``), and a TxnOffsetCommit is verified the same way for the group's
   ``__consumer_offsets`` partition (``verify_txn_offset_commit``, KAFKA-15449).

The coordinator is asked in-process when it is this broker (always on one node). A
cluster broker whose transaction coordinator is another broker asks it with
AddPartitionsToTxn v4 VerifyOnly (``add_partitions_manager``, Kafka's
``AddPartitionsToTxnManager``) on the inter-broker listener; the guard is taken before the
question and checked right before the append, as in-process. A coordinator that cannot be
reached answers NETWORK_EXCEPTION, and the Produce NOT_ENOUGH_REPLICAS (retriable).

A plain or idempotent Produce (no transactional id) pays nothing of this; a Produce
without a transactional id carrying transactional batches is not verified either, as in
Kafka 3.9 (its ReplicaManager verifies only requests with a transactional id).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition
from strom.storage.errors import StorageError

if TYPE_CHECKING:
    from strom.broker.replica_manager import ReplicaManager
    from strom.broker.transaction.add_partitions_manager import AddPartitionsToTxnManager
    from strom.broker.transaction.transaction_coordinator import TransactionCoordinator
    from strom.protocol.messages.produce_request import TopicProduceData
    from strom.storage.log import Log

logger = logging.getLogger(__name__)

# A record batch v2 header: magic at byte 16, attributes (int16) at 21-22, producer id
# (int64) and epoch (int16) at 43-52; 61 bytes in all.
_MAGIC_AT = 16
_ATTRIBUTES_LOW_BYTE_AT = 22
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_PRODUCER_AT = 43
_PRODUCER = struct.Struct(">qh")
_HEADER_SIZE = 61

TRANSACTION_ABORTABLE_FROM_PRODUCE = 11  # Produce v11 clients know TRANSACTION_ABORTABLE (KIP-890)

# Kafka's ReplicaManager answers these NOT_ENOUGH_REPLICAS: retriable for every client
# version, and no metadata refresh ("Unable to verify the partition has been added to
# the transaction").
_RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.NETWORK_EXCEPTION,
})


class VerificationGuard:
    """One verification of one producer on one partition, compared by identity (Kafka's
    ``VerificationGuard``): the partition keeps it until the producer's next append."""

    __slots__ = ("producer_epoch",)

    def __init__(self, producer_epoch: int) -> None:
        self.producer_epoch = producer_epoch

    def __repr__(self) -> str:
        return f"VerificationGuard(epoch={self.producer_epoch}, id={id(self):#x})"


class VerificationGuards:
    """One partition's guards, by producer id (Kafka keeps them in the producer state's
    ``VerificationStateEntry``). Used on the event loop only, by the partition's leader;
    a new leader (or a follower) starts with none."""

    __slots__ = ("_producer_state", "guards")

    def __init__(self, log: Log) -> None:
        self.guards: dict[int, VerificationGuard] = {}
        self._producer_state = log.producer_state

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """The producer's transaction at ``producer_epoch`` is open on the partition."""
        entry = self._producer_state.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0 and entry.producer_epoch == producer_epoch

    def start(self, producer_id: int, producer_epoch: int) -> VerificationGuard | None:
        """The guard a verification of the producer's transaction carries to the append;
        None if its transaction is open here already (nothing to verify). Concurrent
        requests of one producer share the guard (their appends must not void each
        other's); a newer epoch starts a new one (Kafka's maybeCreateVerificationStateEntry)."""
        if self.has_ongoing_transaction(producer_id, producer_epoch):
            return None
        guard = self.guards.get(producer_id)
        if guard is None or guard.producer_epoch < producer_epoch:
            guard = self.guards[producer_id] = VerificationGuard(producer_epoch)
        return guard

    def end(self, producer_id: int, guard: VerificationGuard) -> None:
        """The verification failed: drop its guard (unless a newer one replaced it)."""
        if self.guards.get(producer_id) is guard:
            del self.guards[producer_id]

    def check(self, verification: Verification, topic: str, index: int) -> None:
        """Right before the append, with nothing awaited since (KAFKA-14884): a marker that
        landed after the coordinator's answer ended the transaction and the guard."""
        producer_id = verification.producer_id
        if self.has_ongoing_transaction(producer_id, verification.producer_epoch):
            return
        guard = verification.guard
        if guard is None or self.guards.get(producer_id) is not guard:
            raise StorageError(f"producer {producer_id} epoch {verification.producer_epoch}: partition "
                               f"{topic}-{index} was not added to the transaction", ErrorCode.INVALID_TXN_STATE)

    def appended(self, records: bytes | bytearray | memoryview) -> None:
        """``records`` are in the log: their producers' guards are void."""
        for producer_id in producer_ids(records):
            self.guards.pop(producer_id, None)


@dataclass(frozen=True, slots=True)
class Verification:
    """What a verified transactional batch carries to ``Partition.append_as_leader``."""

    producer_id: int
    producer_epoch: int
    # None: the partition had the producer's transaction open when asked (Kafka's
    # SENTINEL); the append then needs it still open.
    guard: VerificationGuard | None


def transactional_producer(records: bytes | bytearray | memoryview) -> tuple[int, int] | None:
    """(producer id, epoch) of a transactional v2 data batch at the start of ``records``."""
    if (len(records) < _HEADER_SIZE or records[_MAGIC_AT] != 2
            or records[_ATTRIBUTES_LOW_BYTE_AT] & (_TRANSACTIONAL | _CONTROL) != _TRANSACTIONAL):
        return None
    producer_id, producer_epoch = _PRODUCER.unpack_from(records, _PRODUCER_AT)
    return producer_id, producer_epoch


def producer_ids(records: bytes | bytearray | memoryview) -> list[int]:
    """The producer ids of the v2 batches in ``records`` (legacy batches have none)."""
    found = []
    position, size = 0, len(records)
    while position + _HEADER_SIZE <= size:
        if records[position + _MAGIC_AT] == 2:
            found.append(_PRODUCER.unpack_from(records, position + _PRODUCER_AT)[0])
        position += 12 + struct.unpack_from(">i", records, position + 8)[0]
    return found


@dataclass(frozen=True, slots=True)
class Refusal:
    """A partition's Produce answer when its verification failed: Kafka's error, and the
    message it sends with the two it words itself (else none)."""

    error: ErrorCode
    message: str | None = None


def produce_refusal(error: ErrorCode, api_version: int) -> Refusal:
    """A verification error as Kafka's ReplicaManager answers a Produce of ``api_version``."""
    if error in _RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
        return Refusal(ErrorCode.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added to the "
                                                      f"transaction. Underlying error: {error.name}")
    if error == ErrorCode.PRODUCER_FENCED:
        return Refusal(ErrorCode.INVALID_PRODUCER_EPOCH)
    if error == ErrorCode.TRANSACTION_ABORTABLE and api_version < TRANSACTION_ABORTABLE_FROM_PRODUCE:
        error = ErrorCode.INVALID_TXN_STATE
    if error == ErrorCode.INVALID_TXN_STATE:
        return Refusal(error, "Partition was not added to the transaction")
    return Refusal(error)


class TransactionVerifier:
    """The leader's side of KIP-890 part 1: one per broker, on its event loop."""

    def __init__(self, coordinator: TransactionCoordinator, replica_manager: ReplicaManager,
                 offsets_partition_for: Callable[[str], TopicPartition], *, enabled: bool = True,
                 remote: AddPartitionsToTxnManager | None = None) -> None:
        self.coordinator = coordinator
        self.replica_manager = replica_manager
        self.offsets_partition_for = offsets_partition_for
        self.enabled = enabled
        self.remote = remote  # a cluster's broker: asks coordinators elsewhere

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Sequence[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's answer per partition: in-process when this broker coordinates
        the id, else (a cluster) from the coordinator's broker."""
        answers = self.coordinator.verify_partitions_in_transaction(
            transactional_id, producer_id, producer_epoch, partitions)
        if self.remote is not None and ErrorCode.NOT_COORDINATOR in answers.values():
            return await self.remote.verify(transactional_id, producer_id, producer_epoch, partitions)
        return answers

    async def verify_produce(self, transactional_id: str, api_version: int,
                             topic_data: Sequence[TopicProduceData]
                             ) -> dict[TopicPartition, Verification | Refusal]:
        """Each transactional batch's verification, or the error its partition answers.

        Partitions this broker does not lead, and batches that are not transactional, are
        left out: the append judges them as any other. Only a remote coordinator is
        awaited (AddPartitionsToTxn v4); the guards were taken before it.
        """
        verifications: dict[TopicPartition, Verification | Refusal] = {}
        asked: dict[tuple[int, int], list[tuple[TopicPartition, VerificationGuard]]] = {}
        partitions = self.replica_manager.partitions
        for topic in topic_data:
            for data in topic.partition_data:
                records = data.records
                key = (topic.name, data.index)
                partition = partitions.get(key)
                if partition is None or not isinstance(records, (bytes, bytearray, memoryview)):
                    continue
                producer = transactional_producer(records)
                if producer is None:
                    continue
                guard = partition.verification_guards.start(*producer)
                verifications[key] = Verification(producer[0], producer[1], guard)
                if guard is not None:
                    asked.setdefault(producer, []).append((key, guard))
        for (producer_id, producer_epoch), guarded in asked.items():
            answers = await self.verify(transactional_id, producer_id, producer_epoch, [key for key, _ in guarded])
            for key, guard in guarded:
                if error := answers.get(key, ErrorCode.NETWORK_EXCEPTION):
                    partitions[key].verification_guards.end(producer_id, guard)
                    verifications[key] = produce_refusal(error, api_version)
        return verifications

    async def verify_txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                       group_id: str) -> ErrorCode:
        """The GroupCoordinator's ``txn_offset_verifier``: is the group's offsets partition in
        the producer's ongoing transaction? Not asked when the transaction is open there
        already, as Kafka's ``maybeStartTransactionVerificationForPartition``. The answer is
        the coordinator's, PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (Kafka's
        AddPartitionsToTxnManager); the handler rewrites the rest for old versions."""
        key = self.offsets_partition_for(group_id)
        partition = self.replica_manager.partitions.get(key)
        if partition is not None and partition.verification_guards.has_ongoing_transaction(producer_id, producer_epoch):
            return ErrorCode.NONE
        answers = await self.verify(transactional_id, producer_id, producer_epoch, [key])
        error = answers.get(key, ErrorCode.NETWORK_EXCEPTION)
        if error == ErrorCode.NETWORK_EXCEPTION:  # the coordinator's broker not reached: retriable for every version
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED else error
