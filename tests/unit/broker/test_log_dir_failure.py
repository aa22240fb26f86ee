"""A failed disk under the log dir (ENOSPC on an append) reaches ``ReplicaManager``'s log dir
failure handler once (a cluster broker halts there, as Kafka's LogManager does when no log dir
is left); the producer still gets KAFKA_STORAGE_ERROR, and a log that is only closed is no
disk failure."""

from __future__ import annotations

import asyncio
import errno
import time

from strom.protocol.error_codes import ErrorCode
from strom.storage.errors import KafkaStorageError
from tests.support.broker_harness import BrokerHarness, BrokerRunner, batch, produce_request
from tests.support.broker_harness import broker as broker
from tests.support.storage import FaultyFileSystem


def test_an_append_that_meets_a_full_disk_tells_the_handler_once(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", 1)
        await h.produce("t", 0, [b"before"])
        failures: list[str] = []
        h.broker.replica_manager.log_dir_failure_handler = failures.append
        faulty = FaultyFileSystem()
        faulty.fail_writes_after = 0
        faulty.write_errno = errno.ENOSPC
        h.broker.replica_manager.partitions[("t", 0)].log.segments.active.fs = faulty
        for _ in range(2):
            response = await h.request(produce_request("t", 0, batch([b"after"])), version=9)
            (partition,) = response.responses[0].partition_responses
            assert partition.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert len(failures) == 1  # the second failure is the same one
        assert "appending to t-0" in failures[0] and "No space left on device" in failures[0]

    broker.run(scenario)


def test_a_closed_log_is_no_disk_failure(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        failures: list[str] = []
        h.broker.replica_manager.log_dir_failure_handler = failures.append
        h.broker.replica_manager.log_dir_failed("appending to t-0", KafkaStorageError("Log(t-0) is offline or closed"))
        assert failures == []
        try:
            raise KafkaStorageError("append failed") from OSError(errno.EIO, "I/O error")
        except KafkaStorageError as exc:
            h.broker.replica_manager.log_dir_failed("appending to t-0", exc)
        assert failures == ["appending to t-0: append failed"]

    broker.run(scenario)


def test_a_checkpoint_that_meets_a_full_disk_is_a_log_dir_failure(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", 1)
        failures: list[str] = []
        h.broker.replica_manager.log_dir_failure_handler = failures.append
        faulty = FaultyFileSystem()
        faulty.fail_writes_after = 0
        healthy, h.broker.log_manager.fs = h.broker.log_manager.fs, faulty  # checkpoints are written through it
        try:
            deadline = time.monotonic() + 30
            while not failures and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        finally:
            h.broker.log_manager.fs = healthy  # the shutdown's own checkpoint
        assert len(failures) == 1
        assert failures[0].startswith("writing checkpoints: ") and "No space left on device" in failures[0]

    broker.run(scenario, {"log.flush.offset.checkpoint.interval.ms": "100"})
