"""``preallocate``: segments fallocate'd to segment.bytes, trimmed on roll/close, zero tail
read as the end of the log by recovery."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from strom.storage import Log, LogConfig
from tests.support.storage import batch, open_log, read_all

SEGMENT_BYTES = 4096


def file_sizes(log: Log) -> list[int]:
    return [os.path.getsize(segment.log_path) for segment in log.segments]


def kill(log: Log) -> None:
    for segment in log.segments:
        segment.close()


def test_config_property() -> None:
    assert LogConfig().preallocate is False
    assert LogConfig().to_properties()["preallocate"] == "false"
    assert LogConfig().with_overrides({"preallocate": "true"}).preallocate is True


def test_new_segments_are_preallocated_and_trimmed_on_roll_and_close(tmp_path: Path) -> None:
    log = open_log(tmp_path, preallocate=True, segment_bytes=SEGMENT_BYTES)
    assert file_sizes(log) == [SEGMENT_BYTES]
    for tag in range(30):
        log.append(batch(2, value_size=200, tag=tag))
    assert len(log.segments) > 2
    *rolled, active = list(log.segments)
    assert file_sizes(log) == [segment.size for segment in rolled] + [SEGMENT_BYTES]
    assert active.size < SEGMENT_BYTES
    written = read_all(log)
    assert log.close()
    assert file_sizes(log) == [segment.size for segment in log.segments]
    reopened = open_log(tmp_path, preallocate=True, segment_bytes=SEGMENT_BYTES)
    assert read_all(reopened) == written and reopened.log_end_offset == 60
    reopened.append(batch(1))
    assert reopened.log_end_offset == 61


def test_plain_segments_are_not_preallocated(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=SEGMENT_BYTES)
    log.append(batch(1))
    assert file_sizes(log) == [log.segments.active.size]


@pytest.mark.parametrize("clean", [False, True])
def test_zero_tail_after_a_crash_is_the_end_of_the_log(
        tmp_path: Path, clean: bool, caplog: pytest.LogCaptureFixture) -> None:
    log = open_log(tmp_path, preallocate=True, segment_bytes=SEGMENT_BYTES)
    for tag in range(3):
        log.append(batch(2, tag=tag))
    written = read_all(log)
    kill(log)  # no trim: the file still ends in preallocated zeros
    assert file_sizes(log) == [SEGMENT_BYTES]
    with caplog.at_level(logging.WARNING):
        reopened = open_log(tmp_path, clean=clean, preallocate=True,
                            segment_bytes=SEGMENT_BYTES)
    assert read_all(reopened) == written and reopened.log_end_offset == 6
    assert not [r for r in caplog.records if "truncated" in r.getMessage()]
    reopened.append(batch(1))
    assert reopened.log_end_offset == 7


def test_torn_batch_in_preallocated_space_is_still_cut_and_warned(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = open_log(tmp_path, preallocate=True, segment_bytes=SEGMENT_BYTES)
    log.append(batch(2))
    end = log.segments.active.size
    torn = bytes(batch(3, tag=9))
    os.pwrite(log.segments.active.fd, torn[: len(torn) // 2], end)  # half a batch
    written = read_all(log)
    kill(log)
    with caplog.at_level(logging.WARNING):
        reopened = open_log(tmp_path, clean=False, preallocate=True,
                            segment_bytes=SEGMENT_BYTES)
    assert read_all(reopened) == written and reopened.log_end_offset == 2
    assert [r for r in caplog.records if "truncated" in r.getMessage()]
