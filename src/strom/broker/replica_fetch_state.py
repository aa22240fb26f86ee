"""What a follower keeps per partition it fetches, and how it decides where to truncate.

Kafka's ``PartitionFetchState`` and ``InitialFetchState`` (``AbstractFetcherThread``,
``AbstractFetcherManager``), the ``replica.*`` settings a fetcher reads, and the two
truncation rules of ``AbstractFetcherThread`` as pure functions, so each case can be
tested with numbers: ``truncation_on_divergence`` (``getOffsetTruncationState``, after a
leader's DivergingEpoch, KIP-101/KIP-279/KIP-595) and ``out_of_range_action``
(``fetchOffsetAndTruncate``, after OFFSET_OUT_OF_RANGE). ``replica_fetcher`` applies them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from strom.broker.config import BrokerConfig

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


# -- the decisions, as pure functions ------------------------------------------------------
class TruncationDecision(NamedTuple):
    """Where to cut the log, and whether that settles the divergence (False: ask again)."""

    offset: int
    complete: bool


def truncation_on_divergence(leader_epoch: int, leader_end_offset: int,
                             follower_end: tuple[int, int] | None, log_end_offset: int) -> TruncationDecision:
    """Kafka's ``getOffsetTruncationState``: the leader says our log diverges after
    ``leader_epoch``, which ends at ``leader_end_offset`` in its log.

    ``follower_end`` is our own answer for ``leader_epoch`` (``Log.end_offset_for_epoch``:
    the largest epoch we know at or below it, and where that ends in our log), None if we
    know no epoch there. The result never passes our log end offset.
    """
    if leader_end_offset == UNDEFINED_OFFSET:
        return TruncationDecision(log_end_offset, True)  # nothing to go by: keep what we have
    if leader_epoch == UNDEFINED_EPOCH or follower_end is None:
        # The leader's offset alone (an old leader, or epochs older than any we track).
        return TruncationDecision(min(leader_end_offset, log_end_offset), True)
    follower_epoch, follower_end_offset = follower_end
    if follower_epoch != leader_epoch:
        # KIP-279: we never had the leader's epoch; cut to the end of our largest epoch
        # below it, then the next fetch asks about that one.
        return TruncationDecision(min(follower_end_offset, log_end_offset), False)
    return TruncationDecision(min(follower_end_offset, leader_end_offset, log_end_offset), True)


class OutOfRange(enum.Enum):
    TRUNCATE_TO = "truncate to the leader's log end"
    START_AT = "empty the log and start at the leader's log start"
    KEEP = "keep the log, fetch from its end"


def out_of_range_action(log_end_offset: int, leader_end_offset: int,
                        leader_start_offset: int | None) -> tuple[OutOfRange, int]:
    """Kafka's ``fetchOffsetAndTruncate`` after OFFSET_OUT_OF_RANGE: (what to do, the offset).

    The leader's log ends below ours (an unclean election): truncate to its end. Else,
    once its log start offset is known (None: not asked yet, since the first rule did not
    apply), a leader whose log starts past our end has deleted what we lack: start over
    there; otherwise keep our log (the leader grew meanwhile) and fetch from its end.
    """
    if leader_end_offset < log_end_offset:
        return OutOfRange.TRUNCATE_TO, leader_end_offset
    if leader_start_offset is not None and leader_start_offset > log_end_offset:
        return OutOfRange.START_AT, leader_start_offset
    return OutOfRange.KEEP, log_end_offset


# -- per-partition state -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class InitialFetchState:
    """What the controller's LeaderAndIsr tells the fetcher of a partition it now follows.

    ``fetch_offset`` < 0 asks the leader where to start (as after OFFSET_OUT_OF_RANGE). A
    log with leader epochs fetches from its end (the leader's DivergingEpoch says what to
    cut); a log without any (empty, or written before epochs) is first truncated to
    ``fetch_offset`` (the high watermark Kafka passes then), as Kafka's ``Truncating``
    state does.
    """

    leader_id: int
    leader_epoch: int
    fetch_offset: int


class FetchPhase(enum.Enum):
    FETCHING = "fetching"
    TRUNCATING = "truncating"  # cut the log to fetch_offset, then fetch
    RESETTING = "resetting"  # ask the leader for its offsets first (fetchOffsetAndTruncate)


@dataclass(slots=True, eq=False)
class PartitionFetchState:
    """Kafka's ``PartitionFetchState``; a new object whenever the partition is (re)added,
    so an answer to a request made for an older one is recognised and dropped."""

    fetch_offset: int
    current_leader_epoch: int
    phase: FetchPhase = FetchPhase.FETCHING
    delayed_until: float = 0.0  # time.monotonic() before which it is not fetched
    lag: int | None = None  # the leader's high watermark minus our log end, as last seen

    def is_delayed(self, now: float) -> bool:
        return now < self.delayed_until


@dataclass(frozen=True, slots=True)
class ReplicaFetcherConfig:
    """The ``replica.*`` settings a fetcher uses (Kafka's names and defaults)."""

    broker_id: int
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    response_max_bytes: int = 10485760  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1048576  # replica.fetch.max.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30000  # replica.socket.timeout.ms

    @classmethod
    def from_broker_config(cls, config: BrokerConfig, broker_id: int) -> ReplicaFetcherConfig:
        return cls(broker_id, config.replica_fetch_wait_max_ms, config.replica_fetch_min_bytes,
                   config.replica_fetch_response_max_bytes, config.replica_fetch_max_bytes,
                   config.replica_fetch_backoff_ms, config.replica_socket_timeout_ms)
