"""``TopicPartition``: the one name for "partition N of topic T", shared by broker, storage and clients.

It is deliberately a plain ``tuple[str, int]`` alias rather than a class: the producer,
the fetcher, the log cleaner and the broker's request handlers build and hash millions
of these, and a bare tuple is the cheapest hashable pair CPython has (no ``__init__``,
no attribute lookups, ``("t", 0)`` literals work as keys). The admin API's named tuple
``strom.client.admin_types.TopicPartition`` is a subclass of this shape, so its values
are accepted wherever this alias is expected.
"""

from __future__ import annotations

TopicPartition = tuple[str, int]

__all__ = ["TopicPartition"]
