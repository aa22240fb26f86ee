"""DescribeLogDirs (35): the data directory, its partitions' sizes and (v4+) its disk."""

from __future__ import annotations

import os

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.describe_log_dirs_request import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
)
from tests.support.broker_harness import BrokerHarness, BrokerRunner


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_partition_with_its_size(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=2)
        await h.produce("t", 1, [b"x" * 100])
        response = await h.request(DescribeLogDirsRequest(topics=None), version=version)
        (result,) = response.results
        assert result.error_code == ErrorCode.NONE
        assert os.path.samefile(result.log_dir, h.broker.config.data_dir)
        sizes = {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}
        assert sizes[("t", 0)] == 0
        assert sizes[("t", 1)] > 100
        if version >= 4:
            assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes

    broker.run(scenario)


def test_only_the_requested_partitions_this_broker_has(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=3)
        await h.create_topic("other")
        request = DescribeLogDirsRequest(topics=(
            DescribableLogDirTopic("t", (0, 2, 9)), DescribableLogDirTopic("absent", (0,)),
        ))
        response = await h.request(request, version=4)
        (result,) = response.results
        described = sorted((t.name, p.partition_index) for t in result.topics for p in t.partitions)
        assert described == [("t", 0), ("t", 2)]

    broker.run(scenario)
