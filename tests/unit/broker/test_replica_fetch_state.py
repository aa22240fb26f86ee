"""The follower's truncation rules (Kafka's ``getOffsetTruncationState`` and
``fetchOffsetAndTruncate``) with numbers, the follower's own side of each case computed by a
real ``LeaderEpochFileCache`` as ``Log.end_offset_for_epoch`` computes it; and which
fetcher copies a partition."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.config import BrokerConfig
from strom.broker.replica_fetch_state import (
    OutOfRange,
    TruncationDecision,
    out_of_range_action,
    truncation_on_divergence,
)
from strom.broker.replica_fetcher_manager import fetcher_index, inter_broker_listener_name
from strom.storage.fs import FileSystem
from strom.storage.leader_epoch import LeaderEpochFileCache


def follower(tmp_path: Path, epochs: list[tuple[int, int]], log_end_offset: int, asked_epoch: int
             ) -> tuple[int, int] | None:
    """What a follower whose log has these (epoch, start offset) entries answers for
    ``asked_epoch``: None when it knows no epoch there (``Log.end_offset_for_epoch``'s -1)."""
    cache = LeaderEpochFileCache(FileSystem(), str(tmp_path / "leader-epoch-checkpoint"))
    for epoch, start in epochs:
        cache.assign(epoch, start)
    found = cache.end_offset_for(asked_epoch, log_end_offset)
    return None if found[1] == -1 else found


def test_the_same_epoch_ends_earlier_on_the_leader(tmp_path: Path) -> None:
    # Both wrote epoch 1 from offset 5; the leader's ends at 8, ours ran on to 12.
    ours = follower(tmp_path, [(0, 0), (1, 5)], 12, 1)
    assert ours == (1, 12)
    assert truncation_on_divergence(1, 8, ours, 12) == TruncationDecision(8, True)


def test_the_same_epoch_ends_earlier_here_than_on_the_leader(tmp_path: Path) -> None:
    # We had epoch 1 up to 7, then our own epoch 2 from 7 (a leadership the leader never
    # saw); the leader's epoch 1 runs to 9: cut to our end of epoch 1.
    ours = follower(tmp_path, [(0, 0), (1, 5), (2, 7)], 10, 1)
    assert ours == (1, 7)
    assert truncation_on_divergence(1, 9, ours, 10) == TruncationDecision(7, True)


def test_an_epoch_we_never_had_cuts_to_the_end_of_our_previous_one_and_asks_again(tmp_path: Path) -> None:
    # KIP-279: the leader answers epoch 3 (ending at 20); we jumped from epoch 1 to 4.
    ours = follower(tmp_path, [(0, 0), (1, 5), (4, 9)], 14, 3)
    assert ours == (1, 9)
    assert truncation_on_divergence(3, 20, ours, 14) == TruncationDecision(9, False)


def test_epochs_older_than_any_we_track_go_by_the_leaders_offset(tmp_path: Path) -> None:
    assert follower(tmp_path, [], 6, 2) is None
    assert truncation_on_divergence(2, 4, None, 6) == TruncationDecision(4, True)
    assert truncation_on_divergence(2, 9, None, 6) == TruncationDecision(6, True)


def test_an_undefined_leader_epoch_goes_by_the_leaders_offset(tmp_path: Path) -> None:
    ours = follower(tmp_path, [(3, 0)], 10, 3)
    assert truncation_on_divergence(-1, 4, ours, 10) == TruncationDecision(4, True)


def test_an_undefined_leader_offset_keeps_the_log() -> None:
    assert truncation_on_divergence(2, -1, (2, 7), 10) == TruncationDecision(10, True)


@pytest.mark.parametrize(("leader_epoch", "leader_end", "ours", "log_end"), [
    (1, 50, (1, 30), 20), (3, 50, (1, 40), 20), (3, 50, None, 20), (-1, 50, (1, 30), 20),
])
def test_truncation_never_goes_past_our_log_end(leader_epoch: int, leader_end: int,
                                                ours: tuple[int, int] | None, log_end: int) -> None:
    assert truncation_on_divergence(leader_epoch, leader_end, ours, log_end).offset <= log_end


def test_out_of_range_behind_an_unclean_leader_truncates_to_its_end() -> None:
    assert out_of_range_action(log_end_offset=12, leader_end_offset=9, leader_start_offset=None) \
        == (OutOfRange.TRUNCATE_TO, 9)


def test_out_of_range_below_the_leaders_log_start_starts_over_there() -> None:
    assert out_of_range_action(3, 40, None) == (OutOfRange.KEEP, 3)  # its start is asked next
    assert out_of_range_action(3, 40, 25) == (OutOfRange.START_AT, 25)


def test_out_of_range_when_the_leader_caught_up_keeps_the_log() -> None:
    assert out_of_range_action(10, 15, 2) == (OutOfRange.KEEP, 10)
    assert out_of_range_action(10, 10, 10) == (OutOfRange.KEEP, 10)


def test_fetcher_index_is_stable_in_range_and_spreads() -> None:
    partitions = [(topic, index) for topic in ("orders", "payments", "__consumer_offsets") for index in range(20)]
    indexes = [fetcher_index(tp, 3) for tp in partitions]
    assert indexes == [fetcher_index(tp, 3) for tp in partitions]
    assert set(indexes) == {0, 1, 2}
    assert {fetcher_index(tp, 1) for tp in partitions} == {0}


@pytest.mark.parametrize(("properties", "expected"), [
    ({}, "PLAINTEXT"),
    ({"listeners": "INTERNAL://127.0.0.1:9093,CLIENT://127.0.0.1:9092",
      "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CLIENT:PLAINTEXT",
      "inter.broker.listener.name": "CLIENT"}, "CLIENT"),
])
def test_the_inter_broker_listener(tmp_path: Path, properties: dict[str, str], expected: str) -> None:
    config = BrokerConfig.from_properties({"log.dirs": str(tmp_path), **properties})
    assert inter_broker_listener_name(config) == expected
