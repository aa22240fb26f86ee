"""``strom produce`` and ``strom consume`` against a real broker: lines with keys and
headers, JSON input, a file; consume from offsets, times and a group (golden kcat-style
JSON and text), ``--count``, ``--follow`` in a real subprocess, and the error lines."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.commands.progress import Progress
from tests.support.broker_process import BrokerProcess
from tests.support.strom_cli import assert_golden, strom

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process = BrokerProcess(tmp_path_factory.mktemp("cli-produce") / "data",
                            {"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        address = process.bootstrap
        for topic in ("lines", "json", "follow"):
            assert strom(address, "topic", "create", topic, "-p", "1").code == 0
        yield address
    finally:
        process.stop()


def test_lines_with_keys_and_headers(bootstrap: str) -> None:
    produced = strom(bootstrap, "produce", "lines", "-K", ":", "-H", "source=cli", stdin="k1:one\nk2:two\nk3:three\n")
    assert (produced.code, produced.err) == (0, "Produced 3 records to lines.\n")
    as_json = strom(bootstrap, "consume", "lines", "--format", "json")
    assert as_json.code == 0
    assert_golden(GOLDEN, "consume_lines.json", as_json.out)
    as_text = strom(bootstrap, "consume", "lines", "-K", "=", "--offset", "1", "--count", "1")
    assert (as_text.code, as_text.out) == (0, "k2=two\n")
    assert strom(bootstrap, "consume", "lines", "--offset", "end").out == ""
    assert strom(bootstrap, "consume", "lines", "--offset", "@0").out == "one\ntwo\nthree\n"


def test_json_input_from_a_file(bootstrap: str, tmp_path: Path) -> None:
    source = tmp_path / "records.jsonl"
    source.write_text('{"key": "a", "value": {"n": 1}, "headers": {"h": "x"}}\n'
                      '{"value": "plain"}\n\n'
                      '{"key": "c", "value": null}\n')
    produced = strom(bootstrap, "produce", "json", "--input", "json", "--file", str(source), "--format", "json")
    assert produced.code == 0
    assert json.loads(produced.out) == {"topic": "json", "records": 3, "partitions": {"0": 3}}
    consumed = strom(bootstrap, "consume", "json", "--format", "json")
    assert_golden(GOLDEN, "consume_json_input.json", consumed.out)


def test_group_consume_commits_what_it_read(bootstrap: str) -> None:
    first = strom(bootstrap, "consume", "lines", "-g", "reader", "--count", "2")
    assert (first.code, first.out) == (0, "one\ntwo\n")
    rest = strom(bootstrap, "consume", "lines", "-g", "reader")
    assert (rest.code, rest.out) == (0, "three\n")
    lag = [json.loads(row) for row in strom(bootstrap, "group", "describe", "reader", "--format", "json").out.splitlines()]
    assert [(row["current_offset"], row["log_end_offset"], row["lag"]) for row in lag] == [(3, 3, 0)]


def test_follow_waits_for_new_records(bootstrap: str) -> None:
    """Without --follow consume stops at the end; with it, the record produced later is read."""
    assert strom(bootstrap, "produce", "follow", stdin="early\n").code == 0
    assert strom(bootstrap, "consume", "follow").out == "early\n"
    follower = subprocess.Popen([sys.executable, "-m", "strom", "consume", "follow", "--follow", "--count", "2",
                                 "--bootstrap-server", bootstrap], stdout=subprocess.PIPE, text=True)
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == "early\n"  # it is at the end of the log now
        assert strom(bootstrap, "produce", "follow", stdin="late\n").code == 0
        out, _ = follower.communicate(timeout=120)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert (follower.returncode, out) == (0, "late\n")


@pytest.mark.parametrize(("argv", "stdin", "code", "error"), [
    (("produce", "missing"), "x\n", 1, "UNKNOWN_TOPIC_OR_PARTITION"),
    (("consume", "missing"), "", 1, "UNKNOWN_TOPIC_OR_PARTITION"),
    (("produce", "lines", "-K", ":"), "no separator\n", 2, "line 1 has no key separator"),
    (("produce", "lines", "--input", "json"), "{not json\n", 2, "line 1 is not JSON"),
    (("produce", "lines", "--file", "/nonexistent/records"), "", 1, "No such file"),
    (("consume", "lines", "--offset", "middle"), "", 2, "--offset 'middle'"),
    (("consume", "lines", "-g", "g", "--offset", "0"), "", 2, "--group reads from the group's offsets"),
])
def test_errors_are_one_line(bootstrap: str, argv: tuple[str, ...], stdin: str, code: int, error: str) -> None:
    result = strom(bootstrap, *argv, stdin=stdin)
    assert result.code == code
    assert result.err.startswith("strom ") and result.err.count("\n") == 1 and error in result.err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stream", [_Terminal(), io.StringIO()], ids=["terminal", "pipe"])
def test_progress_shows_only_on_a_terminal(stream: io.StringIO) -> None:
    progress = Progress("produce t", total=200, stream=stream)
    for _ in range(50):
        progress.advance(1, amount=2)
    progress.close()
    if stream.isatty():
        assert stream.getvalue().startswith("\rproduce t: 50 records, ") and ", 50%, ETA " in stream.getvalue()
        assert stream.getvalue().endswith("\n")
    else:
        assert stream.getvalue() == ""
