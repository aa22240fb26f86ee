"""``strom group …`` against a real broker: describe's Kafka columns (golden text and JSON),
reset-offsets as a dry run vs ``--execute`` (offsets unchanged vs changed) for each
scenario, ``--export`` CSV, and the refusal to reset or delete a group with members."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from tests.support.broker_process import BrokerProcess
from tests.support.strom_cli import assert_golden, strom

GOLDEN = Path(__file__).parent / "golden"
TOPIC = "events"


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process = BrokerProcess(tmp_path_factory.mktemp("cli-group") / "data",
                            {"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        address = process.bootstrap
        assert strom(address, "topic", "create", TOPIC, "-p", "2").code == 0
        assert strom(address, "produce", TOPIC, "-p", "0", stdin="a\nb\nc\n").code == 0
        assert strom(address, "produce", TOPIC, "-p", "1", stdin="d\ne\n").code == 0
        yield address
    finally:
        process.stop()


def _committed(bootstrap: str, group: str) -> list[tuple[int, int]]:
    rows = strom(bootstrap, "group", "describe", group, "--format", "json").out.splitlines()
    return [(row["partition"], row["current_offset"]) for row in map(json.loads, rows)]


def test_describe_and_list_golden(bootstrap: str) -> None:
    planted = strom(bootstrap, "group", "reset-offsets", "audit", "--topic", TOPIC, "--to-offset", "1", "--execute")
    assert planted.code == 0, planted.err
    described = strom(bootstrap, "group", "describe", "audit")
    assert described.err == "Consumer group 'audit' has no active members.\n"
    assert_golden(GOLDEN, "group_describe.txt", described.out)
    assert_golden(GOLDEN, "group_describe.json", strom(bootstrap, "group", "describe", "audit", "--format", "json").out)
    listed = strom(bootstrap, "group", "list")
    assert "audit" in listed.out and listed.out.startswith("GROUP")
    # a group only committed to, never joined, has no protocol type (Kafka's too)
    assert {"group": "audit", "protocol_type": "", "state": "Empty"} in [
        json.loads(line) for line in strom(bootstrap, "group", "list", "--format", "json").out.splitlines()]


@pytest.mark.parametrize(("scenario", "expected"), [
    (("--to-earliest",), [(0, 0), (1, 0)]),
    (("--to-latest",), [(0, 3), (1, 2)]),
    (("--to-offset", "2"), [(0, 2), (1, 2)]),
    (("--to-offset", "99"), [(0, 3), (1, 2)]),  # kept inside the log, as Kafka does
    (("--shift-by", "1"), [(0, 2), (1, 2)]),
    (("--shift-by", "-5"), [(0, 0), (1, 0)]),
    (("--to-datetime", "2000-01-01T00:00:00Z"), [(0, 0), (1, 0)]),
    (("--to-datetime", "2999-01-01T00:00:00.000+00:00"), [(0, 3), (1, 2)]),
    (("--by-duration", "P7DT1H"), [(0, 0), (1, 0)]),
])
def test_reset_dry_run_then_execute(bootstrap: str, scenario: tuple[str, ...],
                                    expected: list[tuple[int, int]]) -> None:
    group = "reset" + "_".join(scenario)
    assert strom(bootstrap, "group", "reset-offsets", group, "--all-topics", "--to-offset", "1").code == 1  # nothing committed
    assert strom(bootstrap, "group", "reset-offsets", group, "--topic", TOPIC, "--to-offset", "1",
                 "--execute").code == 0
    dry = strom(bootstrap, "group", "reset-offsets", group, "--all-topics", *scenario, "--format", "json")
    assert dry.code == 0, dry.err
    assert [(row["partition"], row["new_offset"]) for row in map(json.loads, dry.out.splitlines())] == expected
    assert _committed(bootstrap, group) == [(0, 1), (1, 1)]  # a dry run changes nothing
    done = strom(bootstrap, "group", "reset-offsets", group, "--all-topics", *scenario, "--execute")
    assert done.code == 0, done.err
    assert _committed(bootstrap, group) == expected


def test_reset_text_and_export_golden(bootstrap: str) -> None:
    assert strom(bootstrap, "group", "reset-offsets", "exported", "--topic", TOPIC, "--to-offset", "1",
                 "--execute").code == 0
    plan = strom(bootstrap, "group", "reset-offsets", "exported", "--topic", f"{TOPIC}:1", "--to-earliest")
    csv = strom(bootstrap, "group", "reset-offsets", "exported", "--all-topics", "--shift-by", "1", "--export")
    assert_golden(GOLDEN, "group_reset.txt", plan.out)
    assert_golden(GOLDEN, "group_reset_export.csv", csv.out)


@pytest.fixture
def member(bootstrap: str) -> Iterator[Consumer]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "busy", "client.id": "cli-test",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 60
    while not consumer.assignment():  # waits for the join's answer, not for time
        assert time.monotonic() < deadline, "the consumer was never assigned partitions"
        consumer.poll(0.5)
    yield consumer
    consumer.close()


def test_group_with_members_is_described_and_refused(bootstrap: str, member: Consumer) -> None:
    described = strom(bootstrap, "group", "describe", "busy")
    assert described.code == 0
    assert_golden(GOLDEN, "group_describe_members.txt", described.out)
    refused = strom(bootstrap, "group", "reset-offsets", "busy", "--all-topics", "--to-earliest", "--execute")
    assert refused.code == 1
    assert refused.err == ("strom group reset-offsets: Assignments can only be reset if the group 'busy' is "
                           "inactive, but the current state is Stable.\n")
    kept = strom(bootstrap, "group", "delete", "busy")
    assert kept.code == 1 and "NON_EMPTY_GROUP" in kept.err and kept.err.count("\n") == 1
    member.close()
    deleted = strom(bootstrap, "group", "delete", "busy")
    assert (deleted.code, deleted.out) == (0, "Deletion of requested consumer groups ('busy') was successful.\n")


@pytest.mark.parametrize(("argv", "code", "error"), [
    (("group", "describe", "no-such-group"), 1, "GROUP_ID_NOT_FOUND"),
    (("group", "reset-offsets", "g", "--topic", TOPIC, "--by-duration", "1h"), 2, "ISO-8601 duration"),
    (("group", "reset-offsets", "g", "--topic", TOPIC, "--to-datetime", "yesterday"), 2, "--to-datetime"),
    (("group", "reset-offsets", "g", "--topic", "nope", "--to-earliest"), 1, "UNKNOWN_TOPIC_OR_PARTITION"),
])
def test_errors_are_one_line(bootstrap: str, argv: tuple[str, ...], code: int, error: str) -> None:
    result = strom(bootstrap, *argv)
    assert result.code == code
    assert result.err.startswith("strom group ") and result.err.count("\n") == 1 and error in result.err
