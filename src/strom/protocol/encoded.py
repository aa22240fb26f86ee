"""Messages assembled from already-encoded pieces: an array spliced from encoded elements.

Some answers repeat large parts that change far less often than they are asked for (a
Metadata answer's topics, each with its partitions). Encoding those parts once and
keeping the bytes saves encoding them again for every request; this module lets a
handler put such bytes into a message without knowing the message's layout.

``ArraySlot`` is found by encoding the message with the array empty (the generated
encoder writes everything else) and naming how many bytes follow the array in that
version: an empty array is ``00 00 00 00`` (a non-nullable array's INT32 count) or
``01`` (a compact array's UVARINT count + 1), so the bytes before and after it are the
head and the tail every encoding of the message shares. Elements are the bytes the
generated encoder writes for one element: ``ArraySlot.element`` takes them out of the
message encoded with that one element. The result is the generated encoder's output
byte for byte; ``EncodedMessage`` carries it to ``encode_response`` as any message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from strom.protocol.message import Encoder, Message, UnsupportedVersionError
from strom.protocol.primitives import INT32, Records, write_uvarint

_EMPTY_ARRAY = b"\x00\x00\x00\x00"
_EMPTY_COMPACT_ARRAY = b"\x01"


@dataclass(frozen=True, slots=True)
class ArraySlot:
    """One array of a message: the bytes before its count (``head``) and after it (``tail``)."""

    head: bytes
    tail: bytes
    compact: bool

    @classmethod
    def locate(cls, encoded_empty: bytes, tail_size: int, *, compact: bool) -> ArraySlot:
        """The slot of the array that ends ``tail_size`` bytes before the end of ``encoded_empty``,
        a message encoded with that array empty; ValueError if no empty array ends there."""
        marker = _EMPTY_COMPACT_ARRAY if compact else _EMPTY_ARRAY
        end = len(encoded_empty) - tail_size
        start = end - len(marker)
        if tail_size < 0 or start < 0 or encoded_empty[start:end] != marker:
            raise ValueError(f"no empty {'compact ' if compact else ''}array ends {tail_size} bytes before the end")
        return cls(bytes(encoded_empty[:start]), bytes(encoded_empty[end:]), compact)

    def count(self, count: int) -> bytes:
        """The array's count as this slot writes it."""
        if not self.compact:
            return INT32.pack(count)
        out = bytearray()
        write_uvarint(out, count + 1)
        return bytes(out)

    def element(self, encoded_one: bytes) -> bytes:
        """The one element of ``encoded_one``: the same message encoded with a one-element array
        (ValueError if it does not share this slot's head and tail)."""
        start = len(self.head) + len(self.count(1))
        end = len(encoded_one) - len(self.tail)
        if (end < start or not encoded_one.startswith(self.head) or not encoded_one.endswith(self.tail)
                or encoded_one[len(self.head):start] != self.count(1)):
            raise ValueError("the message does not have this slot's head, tail and one element")
        return bytes(encoded_one[start:end])

    def splice(self, elements: Sequence[bytes]) -> bytes:
        """The message with ``elements`` (each as ``element`` returns it) as the array."""
        return b"".join((self.head, self.count(len(elements)), *elements, self.tail))


class EncodedMessage(Message):
    """A message already encoded in one version; subclasses name the API (``encoded_type``)."""

    __slots__ = ("body", "version")

    def __init__(self, version: int, body: bytes) -> None:
        self.version = version
        self.body = body

    def _encoder(self, version: int) -> Encoder:
        if version != self.version:
            raise UnsupportedVersionError(
                f"encoded in version {self.version}, asked for {version}",
                api_key=self.API_KEY, api_version=version, message_name=self.NAME)
        return _write_body

    def __repr__(self) -> str:
        return f"{type(self).__name__}(version={self.version}, {len(self.body)} bytes)"


def _write_body(message: Any, out: bytearray, chunks: list[Records]) -> None:
    out += message.body


_TYPES: dict[type[Message], type[EncodedMessage]] = {}


def encoded_type(model: type[Message]) -> type[EncodedMessage]:
    """The ``EncodedMessage`` class standing for ``model`` (same API key, name and kind)."""
    found = _TYPES.get(model)
    if found is None:
        attributes: dict[str, Any] = {
            "__slots__": (),
            "API_KEY": model.API_KEY, "NAME": model.NAME, "KIND": model.KIND,
            "VALID_VERSIONS": model.VALID_VERSIONS, "FLEXIBLE_VERSIONS": model.FLEXIBLE_VERSIONS,
        }
        found = type(f"Encoded{model.NAME}", (EncodedMessage,), attributes)
        _TYPES[model] = found
    return found

