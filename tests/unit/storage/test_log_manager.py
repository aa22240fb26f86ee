"""LogManager, retention, DeleteRecords, checkpoints, topic configs, the lock file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.storage import LogConfig, LogDirLockedError, LogManager, OffsetOutOfRangeError
from strom.storage.checkpoint import (
    CorruptCheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from strom.storage.errors import StorageError
from strom.storage.fs import FileSystem
from strom.storage.leader_epoch import LeaderEpochFileCache
from strom.storage.log_manager import BROKER_CONFIGS_DIR
from tests.support.storage import Clock, batch, read_all

SMALL = LogConfig(segment_bytes=500, file_delete_delay_ms=1000)


def manager(tmp_path: Path, clock: Clock | None = None) -> LogManager:
    logs = LogManager(str(tmp_path), SMALL, clock=clock or Clock())
    logs.startup()
    return logs


def test_discovers_partitions_and_writes_kafka_checkpoints(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    for partition in range(3):
        log = logs.create_log("orders", partition)
        for _ in range(partition + 1):
            log.append(batch(2))
    logs.create_log("my.topic-x", 0).append(batch(1))
    logs.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    text = (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert text == "0\n4\nmy.topic-x 0 1\norders 0 2\norders 1 4\norders 2 6\n"
    again = manager(tmp_path)
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    assert sorted(again.logs) == [("my.topic-x", 0), ("orders", 0), ("orders", 1), ("orders", 2)]
    assert again.logs[("orders", 2)].log_end_offset == 6
    again.close()


def test_lock_file_keeps_a_second_opener_out(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    with pytest.raises(LogDirLockedError):
        LogManager(str(tmp_path)).startup()
    logs.close()
    manager(tmp_path).close()


def test_illegal_topic_names(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    for name in ["", "a/b", "..", "x" * 250, "sp ace"]:
        with pytest.raises(StorageError) as caught:
            logs.create_log(name, 0)
        assert caught.value.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    logs.close()


def test_topic_config_persisted_with_kafka_names(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    log = logs.create_log("t", 0)
    config = logs.set_topic_config("t", {"retention.ms": "1000", "cleanup.policy": "compact"})
    assert log.config is config and config.retention_ms == 1000 and config.compacts
    assert "retention.ms=1000" in (tmp_path / "topic-configs" / "t.properties").read_text()
    with pytest.raises(StorageError) as caught:
        logs.set_topic_config("t", {"no.such.config": "1"})
    assert caught.value.error_code == ErrorCode.INVALID_CONFIG
    logs.close()
    again = manager(tmp_path)
    assert again.logs[("t", 0)].config.retention_ms == 1000
    assert again.topic_config("other") == SMALL
    assert again.topic_config("t").to_properties()["segment.bytes"] == "500"
    again.close()


def test_config_defaults_are_kafkas() -> None:
    properties = LogConfig().to_properties()
    assert properties["segment.bytes"] == str(1 << 30)
    assert properties["segment.index.bytes"] == str(10 << 20)
    assert properties["index.interval.bytes"] == "4096"
    assert properties["retention.ms"] == "604800000"
    assert properties["retention.bytes"] == "-1"
    assert properties["flush.messages"] == properties["flush.ms"] == str(2**63 - 1)
    assert properties["cleanup.policy"] == "delete"
    assert properties["message.timestamp.type"] == "CreateTime"
    with pytest.raises(StorageError):
        LogConfig(message_timestamp_type="Whenever")


def test_retention_by_time_renames_then_deletes_later(tmp_path: Path) -> None:
    clock = Clock(10_000)
    logs = manager(tmp_path, clock)
    logs.set_topic_config("t", {"retention.ms": "5000"})
    log = logs.create_log("t", 0)
    for i in range(12):
        log.append(batch(1, value_size=100, timestamp=1000 * i))
    count = len(log.segments)
    old = log.segments
    deleted = logs.run_retention(12_500)  # segments whose newest record < 7500 expire
    assert 0 < deleted < count
    assert log.log_start_offset == log.segments.first.base_offset > 0
    assert log.segments.first.max_timestamp >= 7_500
    assert list((tmp_path / "t-0").glob("*.deleted"))
    region = old.first.read_batch(old.first.translate_offset(0))  # type: ignore[arg-type]
    assert region  # a reader holding the old list still reads the deleted segment
    logs.run_retention(12_500 + 1000)
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    assert f"t 0 {log.log_start_offset}" in (tmp_path / "log-start-offset-checkpoint").read_text()
    logs.close()


def test_retention_of_everything_rolls_a_fresh_active_segment(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    logs.set_topic_config("t", {"retention.ms": "10"})
    log = logs.create_log("t", 0)
    log.append(batch(1, timestamp=5))
    assert logs.run_retention(10**6) == 1
    assert log.log_start_offset == log.log_end_offset == 1
    assert log.read(1, 100).region is None
    log.append(batch(1))
    assert log.log_end_offset == 2
    logs.close()


def test_retention_by_bytes_keeps_the_active_segment(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    logs.set_topic_config("t", {"retention.bytes": "600"})
    log = logs.create_log("t", 0)
    for _ in range(20):
        log.append(batch(1, value_size=100))
    logs.run_retention(0)
    assert log.size_in_bytes - log.segments.first.size < 600 <= log.size_in_bytes or \
        len(log.segments) == 1
    logs.close()


def test_delete_records_moves_and_persists_log_start(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    log = logs.create_log("t", 0)
    for _ in range(10):
        log.append(batch(2, value_size=100), leader_epoch=3)
    assert logs.delete_records("t", 0, 7) == 7
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 100)
    assert log.read(7, 100).region is not None
    with pytest.raises(OffsetOutOfRangeError):
        logs.delete_records("t", 0, 21)
    assert logs.delete_records("t", 0, 3) == 7  # never moves back
    assert logs.run_retention(0) > 0  # whole segments below 7 go
    assert log.segments.first.base_offset <= 7
    assert log.leader_epoch_cache.entries == [(3, 7)]
    logs.delete_records("t", 0, -1)  # -1: up to the high watermark
    assert log.log_start_offset == 20
    logs.close()
    again = manager(tmp_path)
    assert again.logs[("t", 0)].log_start_offset == 20
    again.close()


def test_delete_log_removes_directory(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    logs.create_log("t", 0).append(batch(1))
    logs.delete_log("t", 0)
    assert not any(p.name.startswith("t-0") for p in tmp_path.iterdir())
    assert logs.get_log("t", 0) is None
    logs.close()


def test_unclean_shutdown_recovers_from_checkpointed_recovery_point(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    log = logs.create_log("t", 0)
    for i in range(20):
        log.append(batch(1, value_size=50, tag=i))
    logs.checkpoint()
    expected = read_all(log)
    logs.fs.unlock(logs._lock_fd)  # type: ignore[arg-type]  # a crash: nothing closed
    again = manager(tmp_path)
    assert read_all(again.logs[("t", 0)]) == expected
    again.close()


def test_offset_checkpoint_format_and_corruption(tmp_path: Path) -> None:
    fs = FileSystem()
    path = str(tmp_path / "cp")
    assert read_offset_checkpoint(fs, path) == {}
    write_offset_checkpoint(fs, path, {("b", 1): 5, ("a", 0): 7})
    assert (tmp_path / "cp").read_text() == "0\n2\na 0 7\nb 1 5\n"
    assert read_offset_checkpoint(fs, path) == {("a", 0): 7, ("b", 1): 5}
    for broken in ["1\n0\n", "0\n2\na 0 7\n", "0\n1\na 0\n", "x"]:
        (tmp_path / "cp").write_text(broken)
        with pytest.raises(CorruptCheckpointError):
            read_offset_checkpoint(fs, path)


def test_leader_epoch_cache_truncation(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(FileSystem(), str(tmp_path / "leader-epoch-checkpoint"))
    assert cache.end_offset_for(0, 10) == (-1, -1)
    cache.assign(1, 0)
    cache.assign(2, 10)
    cache.assign(2, 15)  # not newer: ignored
    cache.assign(5, 20)
    assert cache.end_offset_for(0, 30) == (0, 0)
    assert cache.end_offset_for(3, 30) == (2, 20)
    cache.truncate_from_end(15)
    assert cache.entries == [(1, 0), (2, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(2, 12)]
    reloaded = LeaderEpochFileCache(FileSystem(), str(tmp_path / "leader-epoch-checkpoint"))
    assert reloaded.entries == [(2, 12)]


def test_startup_names_a_new_directory_and_each_kind_of_shutdown(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def startup_line() -> str:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="strom.storage.log_manager"):
            logs.startup()
        return next(line for line in caplog.messages if line.startswith("loaded"))

    logs = LogManager(str(tmp_path / "data"))
    assert startup_line() == f"loaded 0 logs from {tmp_path / 'data'} (a new data directory)"
    logs.create_log("orders", 0).append(batch(1))
    logs.close()
    logs = LogManager(str(tmp_path / "data"))
    assert startup_line().endswith("(clean shutdown)")
    logs.create_log("empty", 0)
    assert logs._lock_fd is not None
    logs.fs.unlock(logs._lock_fd)  # the process dies: no close, no clean-shutdown marker
    logs = LogManager(str(tmp_path / "data"))
    assert startup_line() == f"loaded 2 logs from {tmp_path / 'data'} (unclean shutdown)"
    logs.close()


def test_a_directory_holding_only_configs_is_new_not_an_unclean_shutdown(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Dynamic broker configs set before any log was made, then the broker was killed: no
    # marker, but no log data either, so there was no shutdown to call unclean.
    store = tmp_path / "data" / BROKER_CONFIGS_DIR
    store.mkdir(parents=True)
    (store / "<default>").write_text("log.retention.ms=5000\n")
    logs = LogManager(str(tmp_path / "data"))
    with caplog.at_level(logging.INFO, logger="strom.storage.log_manager"):
        logs.startup()
    assert [line for line in caplog.messages if line.startswith("loaded")] == [
        f"loaded 0 logs from {tmp_path / 'data'} (a new data directory)"]
    logs.close()
