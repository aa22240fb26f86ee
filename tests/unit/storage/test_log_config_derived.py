"""``LogConfig.bounds_timestamps``: derived once per config (every produce reads it), from
message.timestamp.type and the KIP-937 bounds, and never listed as a setting."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from strom.storage import LogConfig


@pytest.mark.parametrize(("overrides", "bounded"), [
    ({}, False),
    ({"message.timestamp.before.max.ms": "3600000"}, True),
    ({"message.timestamp.after.max.ms": "0"}, True),
    ({"message.timestamp.difference.max.ms": "60000"}, True),  # the deprecated bound, both sides
    ({"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "1000"}, False),
    ({"message.timestamp.before.max.ms": str(2**63 - 1)}, False),
])
def test_bounds_timestamps_follows_the_settings(overrides: dict[str, str], bounded: bool) -> None:
    assert LogConfig().with_overrides(overrides).bounds_timestamps is bounded


def test_a_changed_config_derives_it_again() -> None:
    bounded = LogConfig().with_overrides({"message.timestamp.after.max.ms": "1000"})
    assert dataclasses.replace(bounded, message_timestamp_after_max_ms=2**63 - 1).bounds_timestamps is False
    assert dataclasses.replace(bounded, message_timestamp_type="LogAppendTime").bounds_timestamps is False
    assert dataclasses.replace(LogConfig(), message_timestamp_before_max_ms=5).bounds_timestamps is True


def test_it_survives_copies_and_pickling() -> None:
    bounded = LogConfig().with_overrides({"message.timestamp.before.max.ms": "1000"})
    for twin in (copy.copy(bounded), copy.deepcopy(bounded), pickle.loads(pickle.dumps(bounded))):
        assert twin.bounds_timestamps is True
        assert twin == bounded


def test_it_is_not_a_setting() -> None:
    bounded = LogConfig().with_overrides({"message.timestamp.before.max.ms": "1000"})
    assert bounded == dataclasses.replace(LogConfig(), message_timestamp_before_max_ms=1000)
    assert bounded.overrides_against(LogConfig()) == {"message.timestamp.before.max.ms": "1000"}
    assert "bounds_timestamps" not in repr(bounded)
    assert not any("bounds" in name for name in LogConfig().to_properties())
    with pytest.raises(Exception, match="unknown topic config"):
        LogConfig().with_overrides({"": "true"})
    with pytest.raises(TypeError):
        LogConfig(bounds_timestamps=True)  # type: ignore[call-arg]
