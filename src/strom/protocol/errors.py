"""The one exception that untrusted protocol input may raise.

Every decoder in ``strom.protocol`` turns a malformed input (truncated frame, a
negative or oversized length, a bad varint, invalid UTF-8, a broken CRC) into a
``ProtocolError`` that says where it happened, so a caller needs a single
``except`` to keep a broker alive and answer with the protocol's error code.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Input that does not follow Kafka's wire format.

    ``api_key``/``api_version``/``field`` locate the fault inside a request or
    response when it is known; ``error_code`` is the Kafka error code a broker
    should answer with (``CORRUPT_MESSAGE`` = 2 by default).
    """

    error_code: int = 2

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
        if error_code is not None:
            self.error_code = error_code
        super().__init__(self._describe())

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
