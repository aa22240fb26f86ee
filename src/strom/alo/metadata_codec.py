"""The offset map: finished offsets past the committed one, in the commit's metadata string.

A commit can only say "everything below offset C is done". Records after C that
finished out of order would be processed again after a restart or a rebalance. As
Confluent's Parallel Consumer does, the set of those offsets rides along in the
OffsetCommit's free-form metadata string, and the next owner of the partition skips
them.

Format (an ASCII string, so its length in characters is its length in bytes, which is
what the broker's ``offset.metadata.max.bytes`` counts)::

    "alo1" kind base64url(payload)     no padding
    payload = uvarint(C) body          C: the committed offset it belongs to
    kind "R" (run lengths): body = uvarint runs, alternating not-done, done, not-done, …
                             starting at C (C itself is never done, so the first run >= 1)
    kind "B" (bitset):      body = bit i (LSB first) set when offset C + 1 + i is done
    kind "r" / "b":         the same bodies, zlib-compressed

The encoder writes whichever is shortest: run lengths win for long finished stretches,
the bitset for scattered ones. C inside the payload guards against a map read against
another offset (an offset reset by an operator tool, say): a mismatch decodes to
nothing, never to wrong offsets. A map that does not fit is cut at the highest offset
that fits: offsets past the cut are merely processed again (at-least-once still holds).
"""

from __future__ import annotations

import base64
import binascii
import logging
import zlib
from collections.abc import Collection, Iterable

from strom.protocol.records.varint import encode_unsigned_varint

logger = logging.getLogger(__name__)

MAGIC = "alo1"
_HEADER = len(MAGIC) + 1
# A map never holds more finished offsets than this: a damaged or hostile string must
# not make the decoder build a huge set (a 4096-byte bitset holds ~24k).
MAX_FINISHED = 1 << 20


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _run_lengths(base: int, done: list[int]) -> bytes:
    out = bytearray()
    out += encode_unsigned_varint(base)
    cursor = base  # the first offset not yet covered by a run
    run_start = -1
    previous = -2
    for offset in done:
        if offset != previous + 1:
            if run_start >= 0:
                out += encode_unsigned_varint(previous + 1 - run_start)
                cursor = previous + 1
            out += encode_unsigned_varint(offset - cursor)
            run_start = offset
        previous = offset
    if run_start >= 0:
        out += encode_unsigned_varint(previous + 1 - run_start)
    return bytes(out)


def _bitset(base: int, done: list[int]) -> bytes:
    out = bytearray()
    out += encode_unsigned_varint(base)
    if not done:
        return bytes(out)
    bits = bytearray((done[-1] - base + 7) // 8)
    for offset in done:
        index = offset - base - 1
        bits[index >> 3] |= 1 << (index & 7)
    return bytes(out + bits)


def _text(kind: str, payload: bytes) -> str:
    return MAGIC + kind + base64.urlsafe_b64encode(payload).rstrip(b"=").decode("ascii")


def _encoded_length(payload: bytes) -> int:
    return _HEADER + (len(payload) * 4 + 2) // 3


def _shortest(base: int, done: list[int], max_bytes: int) -> str | None:
    candidates = [("R", _run_lengths(base, done)), ("B", _bitset(base, done))]
    best = min(candidates, key=lambda c: len(c[1]))
    if _encoded_length(best[1]) > max_bytes:
        compressed = [(kind.lower(), zlib.compress(payload, 6)) for kind, payload in candidates]
        best = min([best, *compressed], key=lambda c: len(c[1]))
    if _encoded_length(best[1]) > max_bytes:
        return None
    return _text(*best)


def encode_offset_map(base: int, done: Iterable[int], max_bytes: int = 4096) -> str:
    """The metadata string for a commit of ``base`` with ``done`` finished after it.

    Offsets at or below ``base`` are ignored. Empty string when nothing is done past
    ``base`` (the common case costs nothing on the wire); otherwise at most ``max_bytes``
    characters, cut at the highest offset that fits.
    """
    finished = sorted(offset for offset in done if offset > base)
    if not finished:
        return ""
    text = _shortest(base, finished, max_bytes)
    if text is not None:
        return text
    # Too large: keep the longest prefix of the finished offsets that fits (a binary
    # search; sizes grow with the prefix, near enough, and the result is checked).
    low, high = 0, len(finished)
    best = ""
    while low < high:
        middle = (low + high + 1) // 2
        candidate = _shortest(base, finished[:middle], max_bytes)
        if candidate is None:
            high = middle - 1
        else:
            low, best = middle, candidate
    logger.info("offset map for offset %d: %d finished offsets do not fit in %d bytes; kept %d",
                base, len(finished), max_bytes, low)
    return best


def decode_offset_map(base: int, metadata: str) -> frozenset[int]:
    """Finished offsets after ``base`` recorded in ``metadata``; empty if it holds no map
    of ours, a map for another offset, or a damaged one (the safe reading: redo them)."""
    if not metadata.startswith(MAGIC) or len(metadata) < _HEADER:
        return frozenset()
    kind = metadata[len(MAGIC)]
    encoded = metadata[_HEADER:]
    try:
        payload = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        if kind in "rb":
            inflater = zlib.decompressobj()
            payload = inflater.decompress(payload, MAX_FINISHED // 8 + 16)
            if inflater.unconsumed_tail:
                raise ValueError("the compressed map holds too many offsets")
            kind = kind.upper()
        encoded_base, pos = _read_uvarint(payload, 0)
        if encoded_base != base:
            logger.info("offset map written for offset %d, committed offset is %d: ignored", encoded_base, base)
            return frozenset()
        if kind == "R":
            return _decode_runs(base, payload, pos)
        if kind == "B":
            return _decode_bits(base, payload[pos:])
    except (ValueError, binascii.Error, zlib.error) as exc:
        logger.warning("offset map for offset %d is damaged (%s): ignored", base, exc)
        return frozenset()
    logger.warning("offset map for offset %d has unknown kind %r: ignored", base, kind)
    return frozenset()


def _decode_runs(base: int, payload: bytes, pos: int) -> frozenset[int]:
    done: list[int] = []
    cursor = base
    finished_run = False
    while pos < len(payload):
        length, pos = _read_uvarint(payload, pos)
        if finished_run:
            if len(done) + length > MAX_FINISHED:
                raise ValueError("the map holds too many offsets")
            done.extend(range(cursor, cursor + length))
        cursor += length
        finished_run = not finished_run
    return frozenset(offset for offset in done if offset > base)


def _decode_bits(base: int, bits: bytes) -> frozenset[int]:
    done = []
    for index, byte in enumerate(bits):
        while byte:
            low = byte & -byte
            done.append(base + 1 + index * 8 + low.bit_length() - 1)
            byte ^= low
    return frozenset(done)


def fits(done: Collection[int], base: int, max_bytes: int) -> bool:
    """Whether the whole map for ``done`` fits (used by tests and metrics)."""
    finished = sorted(offset for offset in done if offset > base)
    return not finished or _shortest(base, finished, max_bytes) is not None
