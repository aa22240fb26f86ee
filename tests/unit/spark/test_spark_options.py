"""Option parsing and planning of the ``strom`` data source, without Spark or a broker."""

from __future__ import annotations

import itertools

import pytest

from strom.spark.manifest import DataFile, Manifest
from strom.spark.options import OptionError, parse_sink_options, parse_source_options
from strom.spark.planning import (
    DataLossError,
    OffsetRange,
    check_data_loss,
    from_json,
    rate_limit,
    split_ranges,
    to_json,
)

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_options_are_case_insensitive_and_typed() -> None:
    opts = parse_source_options({**BOOT, "Subscribe": "a, b", "startingOffsets": '{"a": {"0": 5, "1": -2}}',
                                 "maxOffsetsPerTrigger": "100", "includeHeaders": "TRUE",
                                 "kafka.isolation.level": "read_committed"}, streaming=True)
    assert opts.subscribe == ("a", "b")
    assert opts.starting == ("offsets", {("a", 0): 5, ("a", 1): -2})
    assert opts.max_offsets_per_trigger == 100 and opts.include_headers
    assert opts.client.client == {"isolation.level": "read_committed"}


def test_strom_bootstrap_alias_and_assign() -> None:
    opts = parse_source_options({"strom.bootstrap.servers": "h:1", "assign": '{"t": [2, 0]}'}, streaming=False)
    assert opts.client.bootstrap_servers == "h:1" and opts.assign == (("t", 0), ("t", 2))


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({"subscribe": "a"}, False, "kafka.bootstrap.servers"),
    ({**BOOT}, False, "exactly one"),
    ({**BOOT, "subscribe": "a", "assign": '{"a": [0]}'}, False, "exactly one"),
    ({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, True, "not valid in a streaming query"),
    ({**BOOT, "subscribe": "a", "endingOffsets": "earliest"}, False, "not valid in a batch query"),
    ({**BOOT, "subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, False, "-1"),
    ({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "10"}, False, "only applies to a streaming"),
    ({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, True, ">= 1"),
    ({**BOOT, "subscribe": "a", "minPartitions": "x"}, False, "integer"),
    ({**BOOT, "subscribe": "a", "failOnDataLoss": "maybe"}, False, "true or false"),
    ({**BOOT, "subscribe": "a", "minOffsetsPerTrigger": "5"}, True, "not supported"),
    ({**BOOT, "subscribePattern": "("}, False, "not a valid regex"),
    ({**BOOT, "assign": '{"a": 0}'}, False, "must be like"),
    ({**BOOT, "subscribe": "a", "kafka.enable.auto.commit": "true"}, False, "not supported"),
    ({**BOOT, "subscribe": "a", "startingOffsetsByTimestamp": "{}", "startingTimestamp": "5"}, False, "conflict"),
])
def test_bad_options(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_source_options(options, streaming=streaming)


def test_sink_options() -> None:
    assert parse_sink_options({**BOOT, "topic": "t"}).topic == "t"
    with pytest.raises(OptionError, match="unknown option 'subscribe'"):
        parse_sink_options({**BOOT, "subscribe": "t"})
    with pytest.raises(OptionError, match="invalid kafka"):
        parse_sink_options({**BOOT, "kafka.lingerms": "5"})


def test_transactional_sink_options() -> None:
    assert not parse_sink_options({**BOOT, "topic": "t"}).transactional
    opts = parse_sink_options({**BOOT, "Transactional": "TRUE", "transactionalIdPrefix": "orders-copy",
                               "kafka.transaction.timeout.ms": "120000"})
    assert (opts.transactional, opts.transactional_id_prefix) == (True, "orders-copy")
    assert opts.client.client == {"transaction.timeout.ms": "120000"}


@pytest.mark.parametrize(("options", "message"), [
    ({"transactional": "yes"}, "true or false"),
    ({"transactionalIdPrefix": "p"}, "only applies with transactional=true"),
    ({"transactional": "true", "transactionalIdPrefix": " "}, "must not be empty"),
    ({"transactional": "true", "kafka.transactional.id": "x"}, "each task derives its own"),
    ({"transactional": "true", "kafka.enable.idempotence": "false"}, "requires enable.idempotence"),
])
def test_bad_transactional_sink_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_sink_options({**BOOT, **options})


def test_split_ranges_honours_min_partitions_and_max_records() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 50, 60), OffsetRange("t", 2, 7, 7)]
    pieces = split_ranges(ranges, 10, None)
    assert len(pieces) >= 10
    for p in (0, 1):
        mine = sorted((r.start, r.end) for r in pieces if r.partition == p)
        assert mine[0][0] == ranges[p].start and mine[-1][1] == ranges[p].end
        assert all(a[1] == b[0] for a, b in itertools.pairwise(mine))
    assert not [r for r in pieces if r.partition == 2]  # empty ranges make no task
    capped = split_ranges(ranges, None, 30)
    assert max(r.size for r in capped) <= 30 and sum(r.size for r in capped) == 110


def test_rate_limit_is_proportional_and_always_progresses() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 10}
    latest = {("t", 0): 900, ("t", 1): 100, ("t", 2): 11}
    end = rate_limit(start, latest, 100)
    assert end[("t", 2)] == 11  # a tiny backlog still moves
    assert sum(end[tp] - start[tp] for tp in start) <= 101
    assert end[("t", 0)] - start[("t", 0)] > end[("t", 1)] - start[("t", 1)] > 0
    assert rate_limit(start, latest, 10_000) == latest


def test_data_loss_is_an_error_or_skipped() -> None:
    ranges = [OffsetRange("t", 0, 0, 50)]
    with pytest.raises(DataLossError, match="failOnDataLoss=false"):
        check_data_loss(ranges, {("t", 0): 20}, {("t", 0): 50}, fail=True)
    assert check_data_loss(ranges, {("t", 0): 20}, {("t", 0): 50}, fail=False) == [OffsetRange("t", 0, 20, 50)]
    assert check_data_loss(ranges, {("t", 0): 80}, {("t", 0): 90}, fail=False)[0].size == 0


def test_offset_json_round_trip() -> None:
    offsets = {("a", 0): 5, ("a", 10): 7, ("b", 1): 0}
    assert to_json(offsets) == {"a": {"0": 5, "10": 7}, "b": {"1": 0}}
    assert from_json(to_json(offsets)) == offsets


def test_manifest_round_trip_and_file_ranges() -> None:
    f = DataFile("topic=a%3Ab/date=2026-11-23/part-0.parquet", 10, 1000, (0, 1), (5, 14), staged="_strom/x")
    m = Manifest(3, 123, {"a:b": {0: 15, 1: 9}}, (f,), ("topic=a%3Ab/old.parquet",))
    assert Manifest.from_json(m.to_json()) == m
    assert f.topic == "a:b"
    assert f.may_hold("a:b", {1: 14}) and not f.may_hold("a:b", {1: 15}) and not f.may_hold("a:b", {2: 0})
