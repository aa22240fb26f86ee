"""Which partition a produced record goes to: the Java client's built-in rules.

A keyed record goes to ``to_positive(murmur2(key)) % num_partitions``. Every Kafka
client that wants to co-partition with Java producers (librdkafka's ``murmur2_random``,
kafka-python, Sarama's ``NewReferenceHashPartitioner``) uses this exact hash, so a key
lands in the same partition whichever client wrote it; the hash is therefore part of
the wire contract, checked against the Java test vectors and against librdkafka.

A record without a key is "sticky" (KIP-480): it goes to the partition the previous
key-less records of its topic went to, until the batch for that partition is closed
(full, or drained for sending); then a new partition is chosen at random among the
available ones. Spreading single records round-robin would make many small batches;
sticking fills one batch at a time. The accumulator reports a closed batch through
``on_new_batch``, the same hand-off the Java client's ``Partitioner.onNewBatch`` makes.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence

Buffer = bytes | bytearray | memoryview
_WORD_READERS: dict[int, Callable[[Buffer], tuple[int, ...]]] = {}


def _word_reader(count: int) -> Callable[[Buffer], tuple[int, ...]]:
    """A cached little-endian ``count``-word unpacker, so a key costs one call to read."""
    reader = _WORD_READERS.get(count)
    if reader is None:
        reader = struct.Struct(f"<{count}I").unpack_from
        if count <= 256:  # longer keys are rare; do not let odd lengths grow the cache
            _WORD_READERS[count] = reader
    return reader


def murmur2(data: Buffer) -> int:
    """The Java client's ``Utils.murmur2``: MurmurHash2, seed 0x9747b28c, signed 32-bit.

    The key's 4-byte little-endian words are read in one ``struct`` call; each step
    then costs a few integer operations, masked to 32 bits where Java's ``int``
    arithmetic wraps. Constants are literals: a global lookup per use costs more.
    """
    length = len(data)
    h = 0x9747B28C ^ length
    word_count = length >> 2
    if word_count:
        reader = _WORD_READERS.get(word_count) or _word_reader(word_count)
        for k in reader(data):
            k = (k * 0x5BD1E995) & 0xFFFFFFFF
            k = ((k ^ (k >> 24)) * 0x5BD1E995) & 0xFFFFFFFF
            h = ((h * 0x5BD1E995) & 0xFFFFFFFF) ^ k
    tail = length & 3
    if tail:
        base = length - tail
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = ((h ^ data[base]) * 0x5BD1E995) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * 0x5BD1E995) & 0xFFFFFFFF
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """The Java client's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: Buffer, num_partitions: int) -> int:
    """The partition the Java client (and librdkafka's murmur2_random) picks for ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class DefaultPartitioner:
    """Kafka's default partitioning: explicit partition, else key hash, else sticky.

    State is one sticky partition per topic. It is meant to be driven from the
    producer's event loop only, as the accumulator is.
    """

    __slots__ = ("_ignore_keys", "_random", "_sticky")

    def __init__(self, *, ignore_keys: bool = False, rng: random.Random | None = None) -> None:
        # ``partitioner.ignore.keys``: key-less placement for every record.
        self._ignore_keys = ignore_keys
        self._random = rng or random.Random()
        self._sticky: dict[str, int] = {}

    def partition(
        self,
        topic: str,
        key: Buffer | None,
        num_partitions: int,
        *,
        available: Sequence[int] | None = None,
        explicit_partition: int | None = None,
    ) -> int:
        """The partition for one record of ``topic``.

        ``available`` lists the partitions that have a leader now (all of them when
        None); only key-less records prefer those, since moving a keyed record would
        break per-key ordering.
        """
        if num_partitions <= 0:
            raise ValueError(f"topic {topic!r} has no partitions")
        if explicit_partition is not None:
            if not 0 <= explicit_partition < num_partitions:
                raise ValueError(
                    f"partition {explicit_partition} is not in the range "
                    f"[0...{num_partitions}) of topic {topic!r}"
                )
            return explicit_partition
        if key is not None and not self._ignore_keys:
            return (murmur2(key) & 0x7FFFFFFF) % num_partitions
        sticky = self._sticky.get(topic)
        if sticky is None or sticky >= num_partitions:
            return self._next_partition(topic, None, num_partitions, available)
        return sticky

    def on_new_batch(
        self,
        topic: str,
        previous_partition: int,
        num_partitions: int,
        *,
        available: Sequence[int] | None = None,
    ) -> None:
        """The batch for ``previous_partition`` was closed: key-less records move on.

        Only a change away from the current sticky partition counts; a closed batch in
        some other partition (a keyed record's) leaves the sticky choice alone.
        """
        if self._sticky.get(topic) == previous_partition:
            self._next_partition(topic, previous_partition, num_partitions, available)

    def sticky_partition(self, topic: str) -> int | None:
        """Where the next key-less record of ``topic`` goes, if chosen already."""
        return self._sticky.get(topic)

    def _next_partition(
        self,
        topic: str,
        previous: int | None,
        num_partitions: int,
        available: Sequence[int] | None,
    ) -> int:
        candidates: Sequence[int] = available if available else range(num_partitions)
        if len(candidates) == 1:
            chosen = candidates[0]
        else:
            chosen = self._random.choice(candidates)
            while chosen == previous:
                chosen = self._random.choice(candidates)
        self._sticky[topic] = chosen
        return chosen
