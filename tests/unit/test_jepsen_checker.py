"""The Jepsen-style checker (tests/support/jepsen.py) on synthetic histories: a clean one
passes and each anomaly is found, and only where it is one (timeouts are "maybe", never
lost; duplicates count only for idempotent producers; a new consumer session may rewind).
The drivers themselves run once against a real single broker (marked slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.jepsen import (
    Commit,
    ConsumerSpec,
    History,
    ProducerSpec,
    Send,
    Workload,
    check,
)


def clean_history() -> History:
    """Two producers, two consumer sessions (one rewinds after its rebalance), a final read."""
    history = History()
    history.sent(Send("p0", "p0-0", "ok", 0, 0, idempotent=True))
    history.sent(Send("p0", "p0-1", "ok", 1, 0, idempotent=True))
    history.sent(Send("p1", "p1-0", "ok", 0, 1))
    history.sent(Send("p1", "p1-1", "info", error="REQUEST_TIMED_OUT"))  # maybe: written after all
    history.sent(Send("p1", "p1-2", "info", error="unanswered"))  # maybe: never written
    history.sent(Send("p1", "p1-3", "fail", error="MESSAGE_TOO_LARGE"))
    for session, partition, offset, value in [
        ("c0-1", 0, 0, "p0-0"), ("c0-1", 0, 1, "p1-0"), ("c0-2", 0, 0, "p0-0"), ("c0-2", 0, 1, "p1-0"),
        ("c1-1", 1, 0, "p0-1"), ("c1-1", 1, 1, "p1-1"),
        ("final", 0, 0, "p0-0"), ("final", 0, 1, "p1-0"), ("final", 1, 0, "p0-1"), ("final", 1, 1, "p1-1"),
    ]:
        history.polled(session, partition, offset, value.encode())
    history.committed("c0-1", [(0, 2)], "ok")
    history.committed("c1-1", [(1, 2)], "info")
    history.final_committed = {0: 2, 1: 2}
    return history


def test_a_clean_history_is_valid() -> None:
    report = check(clean_history())
    assert report.valid, report.summary()
    assert report.counts["ok"] == 3 and report.counts["info"] == 2 and report.counts["fail"] == 1
    assert report.counts["final"] == 4
    assert report.summary().startswith("valid")


def test_an_acknowledged_record_missing_from_the_final_read_is_lost() -> None:
    history = clean_history()
    history.polls = [p for p in history.polls if not (p.session == "final" and p.value == "p0-1")]
    report = check(history)
    assert not report.valid
    assert [s.value for s in report.lost] == ["p0-1"]
    assert "lost=1" in report.summary()


def test_a_timed_out_record_never_read_is_not_lost() -> None:
    history = clean_history()
    history.polls = [p for p in history.polls if p.value != "p1-1"]  # info: maybe never written
    assert check(history).valid


def test_a_value_at_two_offsets_is_duplicated_for_an_idempotent_producer_only() -> None:
    history = clean_history()
    history.polled("final", 1, 2, b"p0-0")  # idempotent p0's record written twice
    report = check(history)
    assert not report.valid
    assert report.duplicated == {"p0-0": [(0, 0), (1, 2)]}

    history = clean_history()
    history.polled("final", 1, 2, b"p1-0")  # p1 is not idempotent: a retry may duplicate
    report = check(history)
    assert report.valid, report.summary()
    assert report.duplicated_allowed == {"p1-0": [(0, 1), (1, 2)]}


def test_two_values_at_one_offset_are_inconsistent_across_readers_and_acknowledgements() -> None:
    history = clean_history()
    history.polled("c1-1", 0, 5, b"p0-0")
    history.polled("final", 0, 5, b"p1-0")
    report = check(history)
    assert (0, 5) in report.inconsistent_offsets
    assert report.inconsistent_offsets[(0, 5)] == ["p0-0", "p1-0"]

    history = clean_history()
    history.sends[2] = Send("p1", "p1-0", "ok", 1, 0)  # acknowledged where the readers saw p0-1
    report = check(history)
    assert report.inconsistent_offsets[(1, 0)] == ["p0-1", "p1-0"]
    assert not report.valid


def test_offsets_going_back_within_one_consumer_session_are_nonmonotonic() -> None:
    history = clean_history()
    history.polled("c1-1", 1, 1, b"p1-1")  # the same session reads offset 1 again
    report = check(history)
    assert report.nonmonotonic == [("c1-1", 1, 1, 1)]
    assert not report.valid


def test_a_value_nobody_sent_is_unexpected() -> None:
    history = clean_history()
    history.polled("c0-2", 0, 2, b"p7-0")
    report = check(history)
    assert [p.value for p in report.unexpected] == ["p7-0"]
    assert not report.valid


def test_a_definitely_failed_send_that_is_read_is_an_anomaly() -> None:
    history = clean_history()
    history.polled("final", 1, 2, b"p1-3")
    report = check(history)
    assert [s.value for s in report.failed_but_read] == ["p1-3"]
    assert not report.valid


def test_an_acknowledged_commit_above_the_final_committed_offset_regressed() -> None:
    history = clean_history()
    history.final_committed = {0: 1, 1: 2}
    report = check(history)
    assert report.regressed_commits == [(Commit("c0-1", 0, 2, "ok"), 1)]
    assert not report.valid
    history.final_committed = {0: 1, 1: 0}  # partition 1's commit was "info": no claim
    assert len(check(history).regressed_commits) == 1


def test_a_history_survives_json() -> None:
    history = clean_history()
    again = History.from_json(history.to_json())
    assert (again.sends, again.polls, again.commits, again.final_committed) == (
        history.sends, history.polls, history.commits, history.final_committed)
    assert check(again).counts == check(history).counts


@pytest.mark.slow
def test_the_drivers_record_a_valid_history_against_one_broker(tmp_path: Path) -> None:
    """Both clients' producers and consumers against a single ``strom serve`` without
    faults: everything acknowledged is read, every consumer session moves forward."""
    broker = BrokerProcess(tmp_path / "broker", {"num.partitions": "3", "group.initial.rebalance.delay.ms": "0"})
    broker.data_dir.mkdir(parents=True)
    broker.start(60)
    try:
        workload = Workload(broker.bootstrap, "jepsen", 3, seed=7, producers=[
            ProducerSpec("pc", "confluent", rate=100), ProducerSpec("ps", "strom", rate=100),
            ProducerSpec("pn", "confluent", idempotent=False, acks=1, rate=50),
        ], consumers=[ConsumerSpec("cc", "confluent", commit_every=10), ConsumerSpec("cs", "strom", commit_every=10)])
        report = workload.run(4.0)
        assert report.valid, report.summary()
        assert report.counts["ok"] > 50 and report.counts["info"] == 0 and report.counts["fail"] == 0
        assert {s.process for s in workload.history.sends if s.outcome == "ok"} == {"pc", "ps", "pn"}
        assert any(p.session != "final" for p in workload.history.polls)  # the consumers read too
    finally:
        broker.stop()
