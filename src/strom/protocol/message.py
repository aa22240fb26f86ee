"""The base of every generated message class: version dispatch and error reporting.

Generated modules hold one straight-line decoder and encoder per distinct wire
layout of each struct (versions with the same layout share a function). This base
picks the function for a version and turns any low-level failure of a decoder
(``struct.error`` on a short buffer, ``IndexError`` in a varint, ``UnicodeDecodeError``)
into one ``ProtocolError`` naming the message, version and field.

The field is found without slowing the happy path: the generator records which
schema field each line of generated code handles, and on failure the deepest
generated frame of the traceback is looked up in that table.
"""

from __future__ import annotations

import struct
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, ClassVar, Self

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.primitives import INT32, Buffer, Records, write_uvarint

Decoder = Callable[[memoryview, int], tuple[Any, int]]
Encoder = Callable[[Any, bytearray, list[Records]], None]

# Records larger than this travel as their own buffer (zero copy); smaller ones are
# copied into the encoded frame, where one ``sendmsg`` buffer is cheaper than two.
ZERO_COPY_THRESHOLD = 4096

_DECODE_FAULTS = (
    struct.error,
    IndexError,
    UnicodeDecodeError,
    ValueError,
    OverflowError,
    MemoryError,
)


class UnsupportedVersionError(ProtocolError):
    """A message asked for in a version its schema does not define."""

    error_code = ErrorCode.UNSUPPORTED_VERSION


class Message:
    """A request, response, header or data record generated from Kafka's schemas."""

    __slots__ = ()

    API_KEY: ClassVar[int | None]
    NAME: ClassVar[str]
    KIND: ClassVar[str]
    VALID_VERSIONS: ClassVar[range]
    FLEXIBLE_VERSIONS: ClassVar[range]
    _DECODERS: ClassVar[dict[int, Decoder]]
    _ENCODERS: ClassVar[dict[int, Encoder]]

    @classmethod
    def decode(cls, version: int, buf: Buffer, *, exact: bool = True) -> Self:
        """Decode a whole message; ``exact`` rejects bytes left over after it."""
        message, pos = cls.decode_from(version, buf, 0)
        if exact and pos != len(buf):
            raise ProtocolError(
                f"{len(buf) - pos} unexpected bytes after the message",
                api_key=cls.API_KEY,
                api_version=version,
                message_name=cls.NAME,
            )
        return message

    @classmethod
    def decode_from(cls, version: int, buf: Buffer, pos: int) -> tuple[Self, int]:
        """Decode one message at ``pos`` and return it with the position after it."""
        decoder = cls._decoder(version)
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        try:
            message, end = decoder(view, pos)
        except ProtocolError as exc:
            raise cls._locate(exc.reason, version, exc.__traceback__, exc.error_code) from None
        except _DECODE_FAULTS as exc:
            reason = "truncated input" if isinstance(exc, (struct.error, IndexError)) else str(exc)
            raise cls._locate(reason, version, exc.__traceback__, None) from None
        except RecursionError:
            raise cls._locate("nesting too deep", version, None, None) from None
        result: Self = message
        return result, end

    def encode(self, version: int) -> bytes:
        """The message as one ``bytes``, record sets copied in."""
        out = bytearray()
        chunks: list[Records] = []
        self._encoder(version)(self, out, chunks)
        if not chunks:
            return bytes(out)
        chunks.append(out)
        if not all(isinstance(chunk, bytes | bytearray | memoryview) for chunk in chunks):
            raise TypeError("a message holding a file region can only be sent with encode_into")
        return b"".join(chunks)  # type: ignore[arg-type]

    def encode_into(self, version: int, out: bytearray) -> list[Records]:
        """Append the message to ``out``; return the buffers to send, in order.

        Large record sets are not copied: they appear in the list as the very objects
        the message holds, between slices of ``out``, ready for ``socket.sendmsg``.
        """
        chunks: list[Records] = []
        self._encoder(version)(self, out, chunks)
        chunks.append(out)
        return chunks

    @classmethod
    def _decoder(cls, version: int) -> Decoder:
        decoder = cls._DECODERS.get(version)
        if decoder is None:
            raise UnsupportedVersionError(
                f"version {version} is not in {_describe(cls.VALID_VERSIONS)}",
                api_key=cls.API_KEY,
                api_version=version,
                message_name=cls.NAME,
            )
        return decoder

    def _encoder(self, version: int) -> Encoder:
        encoder = self._ENCODERS.get(version)
        if encoder is None:
            raise UnsupportedVersionError(
                f"version {version} is not in {_describe(self.VALID_VERSIONS)}",
                api_key=self.API_KEY,
                api_version=version,
                message_name=self.NAME,
            )
        return encoder

    @classmethod
    def _locate(
        cls, reason: str, version: int, tb: TracebackType | None, error_code: int | None
    ) -> ProtocolError:
        return ProtocolError(
            reason,
            api_key=cls.API_KEY,
            api_version=version,
            message_name=cls.NAME,
            field=field_at(cls.__module__, tb),
            error_code=error_code,
        )


def field_at(module_name: str, tb: TracebackType | None) -> str | None:
    """The schema field whose generated code was running deepest in ``tb``."""
    module = sys.modules.get(module_name)
    table: tuple[tuple[int, str], ...] | None = getattr(module, "_FIELD_AT_LINE", None)
    filename = getattr(module, "__file__", None)
    if table is None or filename is None:
        return None
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is None:
        return None
    index = bisect_right(table, (line, "\uffff")) - 1
    return table[index][1] if index >= 0 else None


def write_records(
    out: bytearray, chunks: list[Records], records: Records | None, compact: bool, nullable: bool
) -> None:
    """A record set (or zero-copy bytes): large ones and file regions are handed over."""
    if records is None:
        if not nullable:
            raise ValueError("a non-nullable record set is None")
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
        return
    size = records.nbytes if isinstance(records, memoryview) else len(records)
    if compact:
        write_uvarint(out, size + 1)
    else:
        out += INT32.pack(size)
    if size < ZERO_COPY_THRESHOLD and isinstance(records, bytes | bytearray | memoryview):
        out += records
        return
    chunks.append(bytes(out))
    chunks.append(records)
    out.clear()


def index_by_key(items: Iterable[Any], *keys: str) -> dict[Any, Any]:
    """The schema's ``mapKey`` view of an array: its elements by their key field(s)."""
    if len(keys) == 1:
        (key,) = keys
        return {getattr(item, key): item for item in items}
    return {tuple(getattr(item, key) for key in keys): item for item in items}


def _describe(versions: range) -> str:
    return f"{versions.start}-{versions.stop - 1}" if len(versions) else "no versions"
