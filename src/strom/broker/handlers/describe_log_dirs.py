"""DescribeLogDirs (35): the one data directory, its partitions' sizes and (v4+) its disk.

Strom keeps every log in one directory, so the answer is one result; there is no
replication or log-dir move, so offset lag is 0 and no replica is a "future" one.
Requested partitions this broker does not have are left out, as in Kafka.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, allowed_on_cluster
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from strom.protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DescribeLogDirsRequest
VERSIONS = range(0, 5)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DescribeLogDirsRequest)
    if (authorizer := broker.authorizer) is not None and not allowed_on_cluster(authorizer, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)  # no results, as Kafka
    hosted = broker.replica_manager.partitions
    if body.topics is None:
        wanted = sorted(hosted)
    else:
        wanted = [(t.topic, p) for t in body.topics for p in t.partitions if (t.topic, p) in hosted]
    by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
    for topic, index in wanted:
        size = hosted[(topic, index)].log.size_in_bytes
        by_topic.setdefault(topic, []).append(DescribeLogDirsPartition(index, size, 0, False))
    log_dir = os.path.abspath(broker.log_manager.data_dir)
    disk = os.statvfs(log_dir)
    result = DescribeLogDirsResult(
        error_code=ErrorCode.NONE,
        log_dir=log_dir,
        topics=tuple(DescribeLogDirsTopic(name, tuple(parts)) for name, parts in by_topic.items()),
        total_bytes=disk.f_blocks * disk.f_frsize,
        usable_bytes=disk.f_bavail * disk.f_frsize,
    )
    return DescribeLogDirsResponse(results=(result,))
