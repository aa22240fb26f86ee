"""``OffsetTracker``: per partition, the newest offset below which every record is done.

This is the article's offset manager. Workers finish records in any order; Kafka
stores one offset per partition, read as "everything before it is processed". So the
tracker answers one question: the smallest offset handed out and not finished (or,
when everything handed out is finished, the one after the newest) — the contiguous
prefix. Committing that offset and never more is what makes the consumer
at-least-once: a crash can repeat work, never skip it.

Finished offsets past that point are kept too: they go into the commit's metadata as
an offset map (``metadata_codec``), and a tracker built from a commit with a map skips
them when they are fetched again (``add`` answers False).

State, all touched only from the event loop: ``_seen`` holds offsets handed out, in
offset order (a partition's records arrive in order); ``_done`` those of them finished
out of order; the head of ``_seen`` is popped as soon as it is finished, so the
committable offset is ``_seen[0]`` and the cost per record is O(1) amortised.
"""

from __future__ import annotations

from collections import deque

from strom.alo.metadata_codec import decode_offset_map, encode_offset_map
from strom.protocol.topic_partition import TopicPartition


class OffsetTracker:
    """Offsets of one partition: handed out, finished, committable, committed."""

    __slots__ = (
        "_committed_metadata",
        "_dirty",
        "_done",
        "_restored",
        "_seen",
        "committed",
        "highest",
        "revoked",
        "topic_partition",
    )

    def __init__(self, topic_partition: TopicPartition, committed: int | None = None,
                 metadata: str = "") -> None:
        self.topic_partition = topic_partition
        self.committed = committed  # the group's offset as last committed or fetched
        self._committed_metadata = metadata
        self.highest = -1  # the newest offset handed out
        self._seen: deque[int] = deque()
        self._done: set[int] = set()
        # Finished in an earlier life of the partition (the committed offset map), not
        # fetched again yet: skipped when they arrive, and kept in later maps meanwhile.
        self._restored: set[int] = set(decode_offset_map(committed, metadata)) if committed is not None else set()
        self._dirty = False
        self.revoked = False  # set on revocation: results of records in progress are ignored

    # -- records ---------------------------------------------------------------------------
    def add(self, offset: int) -> bool:
        """A fetched record; False when it must not be processed (done before, or a repeat)."""
        if offset <= self.highest or (self.committed is not None and offset < self.committed):
            return False
        self.highest = offset
        if self._restored and offset in self._restored:
            self._restored.discard(offset)
            self._seen.append(offset)
            self.complete(offset)
            return False
        self._seen.append(offset)
        return True

    def complete(self, offset: int) -> None:
        """``offset`` is done; moves the committable offset when it was the oldest."""
        seen = self._seen
        self._dirty = True
        if seen and seen[0] == offset:
            seen.popleft()
            done = self._done
            while seen and seen[0] in done:
                done.remove(seen.popleft())
        else:
            self._done.add(offset)

    # -- what to commit ---------------------------------------------------------------------
    def committable(self) -> int | None:
        """The newest offset below which every handed-out record is done (None: nothing known)."""
        if self._seen:
            return self._seen[0]
        if self.highest >= 0:
            return self.highest + 1
        return self.committed

    def finished_after(self, offset: int) -> list[int]:
        """Finished offsets past ``offset``, restored ones included: the offset map's content."""
        done = [o for o in self._done if o > offset]
        if self._restored:
            done.extend(o for o in self._restored if o > offset)
        return done

    def commit_point(self, *, encode: bool = True, max_bytes: int = 4096) -> tuple[int, str] | None:
        """``(offset, metadata)`` to commit, or None when it would say nothing new."""
        offset = self.committable()
        if offset is None:
            return None
        metadata = encode_offset_map(offset, self.finished_after(offset), max_bytes) if encode else ""
        if offset == self.committed and metadata == self._committed_metadata:
            return None
        return offset, metadata

    def mark_committed(self, offset: int, metadata: str) -> None:
        """The broker stored ``offset``: restored offsets below it are no longer needed."""
        self.committed = offset
        self._committed_metadata = metadata
        if self._restored:
            self._restored = {o for o in self._restored if o > offset}

    def take_changed(self) -> bool:
        """Whether anything finished since the last call: the periodic commit skips the
        partitions where nothing did, and their offset maps are not rebuilt."""
        changed, self._dirty = self._dirty, False
        return changed

    def touch(self) -> None:
        """A commit failed: look at this partition again next time."""
        self._dirty = True

    # -- numbers for flow control and metrics -----------------------------------------------
    @property
    def incomplete(self) -> int:
        """Records handed out and not finished (buffered, in progress or waiting to retry)."""
        return len(self._seen) - len(self._done)

    @property
    def uncommitted_span(self) -> int:
        """Offsets from the oldest unfinished record to the newest handed out: what an
        offset map must cover, and what a stuck record lets grow."""
        return self.highest - self._seen[0] + 1 if self._seen else 0

    def restored(self) -> frozenset[int]:
        return frozenset(self._restored)

