"""Storage exceptions: each carries the Kafka error code a broker answers with.

``StorageError`` derives from ``strom.protocol.errors.KafkaException``, the one root of
every exception carrying an error code. A handler catches ``StorageError`` alone and puts ``error_code`` on the wire; the
message inside says what happened, for logs.
"""

from __future__ import annotations

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException


class StorageError(KafkaException):
    """Base class; ``error_code`` is the Kafka error for the response."""

    def __init__(self, message: str, error_code: ErrorCode | None = None) -> None:
        super().__init__(message, error_code)


class InvalidRecordsError(StorageError):
    """The producer's records were refused; nothing of them was written."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class RecordValidationError(InvalidRecordsError):
    """Some records of a batch broke a rule of the topic; nothing of the batch was written.

    ``record_errors`` names each offending record by its index in the batch, with why
    (KIP-467), so a client fails exactly those records and retries or fails the rest
    with a different error (librdkafka's ``_INVALID_DIFFERENT_RECORD``).
    """

    def __init__(self, record_errors: list[tuple[int, str]],
                 error_code: ErrorCode = ErrorCode.INVALID_RECORD) -> None:
        if error_code == ErrorCode.INVALID_TIMESTAMP:  # Kafka's LogValidator.processRecordErrors
            message = "One or more records have been rejected due to invalid timestamp"
        else:
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i, why in record_errors[:3])
            message = (f"One or more records have been rejected due to {len(record_errors)} record errors "
                       f"in total, and only showing the first three errors at most: [{shown}]")
        super().__init__(message, error_code)
        self.record_errors = record_errors


class OffsetsOutOfOrderError(InvalidRecordsError):
    """A follower's append whose batches' offsets do not increase (Kafka's
    ``OffsetsOutOfOrderException``): the leader sent a log no segment may hold."""


class UnexpectedAppendOffsetError(StorageError):
    """A follower's append starts below the log end offset (Kafka's
    ``UnexpectedAppendOffsetException``); nothing was written.

    ``first_offset`` is the first batch's base offset (a v0/v1 entry's stored offset)
    and ``last_offset`` the append's last: a follower whose log is empty may start it
    over at ``first_offset`` and append again, as Kafka's ``Partition`` does.
    """

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class OffsetOutOfRangeError(StorageError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class KafkaStorageError(StorageError):
    """The disk failed (ENOSPC, EIO, ...); the log is still readable up to its end offset."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class LogDirLockedError(StorageError):
    """Another process holds the data directory's lock file."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class ProducerStateError(StorageError):
    """A batch broke an idempotence or transaction rule (``producer_state``); nothing of
    the append was written. The subclass says which; the broker answers its code."""


class OutOfOrderSequenceError(ProducerStateError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(ProducerStateError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(ProducerStateError):
    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(ProducerStateError):
    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED
