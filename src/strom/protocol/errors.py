"""The exceptions that carry a Kafka error code, and the one untrusted protocol input may raise.

``KafkaException`` is the single root of every Strom exception that maps to a Kafka
error code: protocol decoding (``ProtocolError``), storage (``StorageError``), the
broker's topic and fetch-session refusals (``TopicError``, ``FetchSessionError``) and the
clients' ``KafkaError``. Code that only needs "which code goes on the wire" catches
``KafkaException`` once instead of five unrelated roots, as Kafka's ``ApiException``
lets its request handlers do.

Every decoder in ``strom.protocol`` turns a malformed input (truncated frame, a
negative or oversized length, a bad varint, invalid UTF-8, a broken CRC) into a
``ProtocolError`` that says where it happened, so a caller needs a single
``except`` to keep a broker alive and answer with the protocol's error code.
"""

from __future__ import annotations

from strom.protocol.error_codes import ErrorCode


class KafkaException(Exception):
    """An error with the Kafka error code that explains it, and a message for people.

    ``error_code`` is a class default a subclass may narrow (``OffsetOutOfRangeError``)
    and an instance may override; codes newer than ``ErrorCode`` become
    ``UNKNOWN_SERVER_ERROR`` rather than failing while an error is being reported.
    """

    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, error_code: int | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = ErrorCode.from_code(error_code)

    @property
    def message(self) -> str:
        """The text the exception was raised with (``str(exc)`` may add context)."""
        return str(self.args[0]) if self.args else ""


class ProtocolError(KafkaException):
    """Input that does not follow Kafka's wire format.

    ``api_key``/``api_version``/``field`` locate the fault inside a request or
    response when it is known; ``error_code`` is the Kafka error code a broker
    should answer with (``CORRUPT_MESSAGE`` = 2 by default).
    """

    error_code: ErrorCode = ErrorCode.CORRUPT_MESSAGE

    def __init__(
        self,
        message: str,
        *,
        api_key: int | None = None,
        api_version: int | None = None,
        message_name: str | None = None,
        field: str | None = None,
        error_code: int | None = None,
    ) -> None:
        self.reason = message
        self.api_key = api_key
        self.api_version = api_version
        self.message_name = message_name
        self.field = field
        super().__init__(self._describe(), error_code)

    def _describe(self) -> str:
        where = []
        if self.message_name is not None:
            where.append(self.message_name)
        elif self.api_key is not None:
            where.append(f"api_key={self.api_key}")
        if self.api_version is not None:
            where.append(f"v{self.api_version}")
        if self.field is not None:
            where.append(f"field {self.field}")
        return f"{self.reason} ({' '.join(where)})" if where else self.reason
