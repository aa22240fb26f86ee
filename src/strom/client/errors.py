"""What the clients raise: one ``KafkaError`` carrying the broker's error code.

A Kafka user branches on the code (``exc.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER``)
and on ``exc.retriable``, the same split the Java client makes with
``RetriableException``. Errors that never came from a broker (a timeout, a dropped
connection, a full buffer) still carry the code the Java client would report for them,
so one ``except KafkaError`` handles both kinds. ``KafkaError`` derives from
``strom.protocol.errors.KafkaException``, the root the broker's errors share.
"""

from __future__ import annotations

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException


class KafkaError(KafkaException):
    """A failed request, with the Kafka error code that explains it."""

    def __init__(self, error_code: int, message: str | None = None) -> None:
        code = ErrorCode.from_code(error_code)
        self.detail = message
        text = f"{code.name} ({int(code)})"
        text += f": {message}" if message else f": {code.message}"
        super().__init__(text, code)

    @property
    def retriable(self) -> bool:
        """Whether the same request may succeed if sent again later."""
        return self.error_code.retriable


class KafkaTimeoutError(KafkaError):
    """No answer within ``request.timeout.ms`` / ``max.block.ms`` / the caller's timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class KafkaConnectionError(KafkaError):
    """The connection to a broker failed or closed with requests outstanding."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)


class UnsupportedVersionError(KafkaError):
    """The broker serves no version of an API that this client can speak."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)


class ClientClosedError(KafkaError):
    """The client was closed; nothing more can be sent through it."""

    def __init__(self, message: str = "the client is closed") -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)

    @property
    def retriable(self) -> bool:
        return False


class ConfigError(ValueError):
    """A configuration property that does not exist or has an impossible value."""


def raise_for(error_code: int, message: str | None = None) -> None:
    """Raise ``KafkaError`` unless ``error_code`` is ``NONE``."""
    if error_code:
        raise KafkaError(error_code, message)


# -- transactions (the Java client's exceptions, named as this module names errors) ----------


class ProducerFencedError(KafkaError):
    """Another producer with the same ``transactional.id`` has a newer epoch (Java's
    ``ProducerFencedException``): this one is a zombie. Fatal: close the producer."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(ErrorCode.PRODUCER_FENCED, message)


class InvalidProducerEpochError(KafkaError):
    """A partition leader refused a batch of an older epoch (Java's
    ``InvalidProducerEpochException``). Since KIP-588 abortable: abort the transaction,
    whose EndTxn then says whether the producer was fenced."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(ErrorCode.INVALID_PRODUCER_EPOCH, message)


class TransactionAbortedError(KafkaError):
    """The record was never sent: its transaction was aborted first (Java's
    ``TransactionAbortedException``)."""

    def __init__(self, message: str = "the transaction was aborted before this record was sent") -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)

    @property
    def retriable(self) -> bool:
        return False


class IllegalStateError(KafkaError):
    """A transactional call made in a state that does not allow it (Java's
    ``IllegalStateException``): a send outside a transaction, a commit before
    ``begin_transaction``, ``init_transactions`` twice."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_TXN_STATE, message)
