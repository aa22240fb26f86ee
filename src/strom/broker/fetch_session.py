"""Incremental fetch sessions (KIP-227): the broker remembers what a consumer fetches.

A client with many partitions would otherwise resend every partition in every Fetch
and get every partition back. With a session, the first (full) request creates it,
later (incremental) requests carry only partitions that changed or are forgotten, and
the answer carries only partitions with news: records, an error, or a moved high
watermark, last stable offset or log start offset.

Epochs: -1 with session id 0 = no session (full request, full answer); 0 = create a
session (full request; the answer names the new id); n > 0 = the n-th incremental
request of that session. A wrong epoch gets INVALID_FETCH_SESSION_EPOCH, an unknown
id FETCH_SESSION_ID_NOT_FOUND, and the client then starts over with a full request.
Sessions live in an LRU of ``max.incremental.fetch.session.cache.slots`` entries.
"""

from __future__ import annotations

import itertools
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
DEFAULT_SLOTS = 1000


@dataclass(slots=True)
class FetchTarget:
    """One partition a fetch reads, with the last state the client was told about."""

    topic: str | None  # None: a topic id this broker does not know
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # Fetch v12+: the epoch of the last batch the follower has (-1: unknown, not checked).
    last_fetched_epoch: int = -1

    @property
    def key(self) -> tuple[str | uuid.UUID, int]:
        return (self.topic if self.topic is not None else self.topic_id, self.partition)


@dataclass(slots=True)
class FetchSession:
    session_id: int
    next_epoch: int
    partitions: OrderedDict[tuple[str | uuid.UUID, int], FetchTarget] = field(default_factory=OrderedDict)


class FetchSessionError(KafkaException):
    """A fetch session refused (unknown id, stale epoch, no free slot) with its error code."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message, error_code)


class FetchSessionCache:
    """Sessions by id; the event loop is the only caller, so no locks."""

    def __init__(self, slots: int = DEFAULT_SLOTS) -> None:
        self.slots = slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, targets: list[FetchTarget]) -> FetchSession | None:
        """A new session for a full request (epoch 0), or None if sessions are off."""
        if self.slots <= 0:
            return None
        while len(self._sessions) >= self.slots:
            self._sessions.popitem(last=False)  # least recently used
        session = FetchSession(self._new_id(), 1)
        for target in targets:
            session.partitions[target.key] = target
        self._sessions[session.session_id] = session
        return session

    def _new_id(self) -> int:
        while True:
            session_id = next(self._ids) % 0x7FFFFFFF + 1  # positive int32, wrapping
            if session_id not in self._sessions:
                return session_id

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def incremental(
        self, session_id: int, epoch: int, updates: list[FetchTarget], forgotten: list[tuple[str | uuid.UUID, int]]
    ) -> FetchSession:
        """Apply an incremental request to its session; raise on an unknown id or epoch."""
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, f"no fetch session {session_id}")
        if epoch != session.next_epoch:
            raise FetchSessionError(
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                f"fetch session {session_id} expected epoch {session.next_epoch}, got {epoch}",
            )
        self._sessions.move_to_end(session_id)
        for key in forgotten:
            session.partitions.pop(key, None)
        for target in updates:
            known = session.partitions.get(target.key)
            if known is None:
                session.partitions[target.key] = target
            else:
                known.fetch_offset = target.fetch_offset
                known.max_bytes = target.max_bytes
                known.current_leader_epoch = target.current_leader_epoch
                known.last_fetched_epoch = target.last_fetched_epoch
        session.next_epoch = session.next_epoch + 1 if session.next_epoch < 0x7FFFFFFF else 1
        return session


def has_news(target: FetchTarget, error: int, record_bytes: int, hw: int, lso: int, log_start: int) -> bool:
    """Whether an incremental answer must include this partition; updates what was told."""
    changed = (
        record_bytes > 0
        or error != 0
        or hw != target.high_watermark
        or lso != target.last_stable_offset
        or log_start != target.log_start_offset
    )
    target.high_watermark, target.last_stable_offset, target.log_start_offset = hw, lso, log_start
    return changed
