"""The connection layer against real brokers: negotiation, pipelining, metadata, failures."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from strom.client.cluster import Cluster
from strom.client.config import ClientConfig
from strom.client.connection import BrokerConnection
from strom.client.errors import KafkaConnectionError, KafkaTimeoutError
from strom.protocol.messages.metadata_request import MetadataRequest
from strom.protocol.messages.metadata_response import MetadataResponse
from tests.support.broker_process import BrokerProcess
from tests.support.clients import Kafka
from tests.support.tansu import free_port


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def test_versions_are_negotiated(kafka: Kafka) -> None:
    async def main() -> None:
        connection = await BrokerConnection.open(*_host_port(kafka.bootstrap))
        try:
            assert 3 in connection.api_versions and 0 in connection.api_versions
            version = connection.version_for(3, MetadataRequest.VALID_VERSIONS)
            low, high = connection.api_versions[3]
            assert version == min(high, MetadataRequest.VALID_VERSIONS.stop - 1) and version >= low
        finally:
            connection.close()
            await connection.wait_closed()

    asyncio.run(main())


def test_pipelined_requests_are_answered_in_order(kafka: Kafka) -> None:
    async def main() -> None:
        connection = await BrokerConnection.open(*_host_port(kafka.bootstrap))
        version = connection.version_for(3, MetadataRequest.VALID_VERSIONS)
        futures = [connection.send_nowait(MetadataRequest(topics=None), version=version) for _ in range(200)]
        answers = await asyncio.gather(*futures)
        assert all(isinstance(a, MetadataResponse) and a.brokers for a in answers)
        connection.close()

    asyncio.run(main())


def test_metadata_refresh_sees_an_auto_created_topic(kafka: Kafka) -> None:
    topic = kafka.topic("auto")

    async def main() -> None:
        cluster = Cluster(ClientConfig(bootstrap_servers=kafka.bootstrap))
        try:
            info = await cluster.wait_for_topic(topic, 15_000)
            assert info.partitions and all(p.leader >= 0 for p in info.partitions.values())
            leader = cluster.metadata.leader(topic, 0)
            assert leader is not None and leader in cluster.metadata.brokers
            connection = await cluster.connection(leader)
            assert connection.node_id == leader
        finally:
            await cluster.close()

    asyncio.run(main())


def test_unreachable_broker_is_a_clear_error() -> None:
    async def main() -> None:
        with pytest.raises(KafkaConnectionError, match="cannot connect"):
            await BrokerConnection.open("127.0.0.1", free_port())
        cluster = Cluster(ClientConfig(bootstrap_servers=f"127.0.0.1:{free_port()}", request_timeout_ms=300))
        with pytest.raises(KafkaTimeoutError, match="no metadata"):
            await cluster.refresh()
        await cluster.close()

    asyncio.run(main())


def test_outstanding_requests_fail_when_the_broker_goes_away(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()

    async def main() -> None:
        connection = await BrokerConnection.open(*_host_port(broker.bootstrap))
        broker.kill()
        with pytest.raises(KafkaConnectionError):
            version = connection.version_for(3, MetadataRequest.VALID_VERSIONS)
            for _ in range(50):
                await connection.send(MetadataRequest(topics=None), version=version)
        assert connection.closed

    asyncio.run(main())


def test_close_ends_a_background_refresh(kafka: Kafka) -> None:
    """A refresh started by ``refresh_soon`` is over when ``close`` returns: its failure is not
    left behind as a "Task exception was never retrieved" on a loop that is about to end."""
    problems: list[dict[str, object]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: problems.append(context))
        cluster = Cluster(ClientConfig(bootstrap_servers=kafka.bootstrap))
        await cluster.refresh()
        called: list[bool] = []
        cluster.refresh_soon(lambda: called.append(True))
        await cluster.close()
        cluster.refresh_soon(lambda: called.append(True))  # closed: does nothing

    loop = asyncio.new_event_loop()
    loop.run_until_complete(main())
    loop.close()
    import gc
    gc.collect()
    assert problems == []
