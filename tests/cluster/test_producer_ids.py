"""Producer ids across brokers, on a real ZooKeeper: three ZkProducerIdManagers (three
broker ids, three sessions) draw 3,000 ids at once and never hand out the same one,
because each block is claimed by a write conditional on ``/latest_producer_id_block``'s
version (every successful claim is one version step, so the claims can be counted)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from strom.cluster import zk_data
from strom.cluster.producer_id_manager import ZkProducerIdManager
from strom.cluster.zk_client import KafkaZkClient
from tests.support.zookeeper import zk_connect as zk_connect
from tests.support.zookeeper import zookeeper as zookeeper

BROKERS = (1, 2, 3)
IDS_PER_BROKER = 1000
TIMEOUT = 120.0


@pytest.fixture
def clients(zk_connect: str) -> Iterator[list[KafkaZkClient]]:
    started: list[KafkaZkClient] = []
    try:
        for _ in BROKERS:
            client = KafkaZkClient(zk_connect, session_timeout_ms=6000, connection_timeout_ms=30000)
            client.connect()
            started.append(client)
        started[0].create_top_level_paths()
        yield started
    finally:
        for client in started:
            client.close()


def test_three_brokers_drawing_at_once_never_share_an_id(clients: list[KafkaZkClient]) -> None:
    managers = [ZkProducerIdManager(broker_id, client) for broker_id, client in zip(BROKERS, clients, strict=True)]

    async def draw() -> list[list[int]]:
        # Every broker's requests at once, interleaved: the brokers' block claims race.
        per_broker = [[manager.generate() for _ in range(IDS_PER_BROKER)] for manager in managers]
        drawn = await asyncio.wait_for(
            asyncio.gather(*(asyncio.gather(*calls) for calls in per_broker)), TIMEOUT)
        for manager in managers:
            await manager.shutdown()
        return [list(ids) for ids in drawn]

    drawn = asyncio.run(draw())
    every_id = [producer_id for ids in drawn for producer_id in ids]
    assert len(every_id) == len(BROKERS) * IDS_PER_BROKER
    assert len(set(every_id)) == len(every_id)

    # Each claim moved the znode one version on; the blocks run back to back from 0.
    data, stat = clients[0].kazoo.get(zk_data.PRODUCER_ID_BLOCK)
    latest = zk_data.decode_producer_id_block(data)
    claims = sum(manager.claims for manager in managers)
    assert latest is not None and stat.version == claims
    assert latest.block_end + 1 == claims * zk_data.PRODUCER_ID_BLOCK_SIZE
    assert max(every_id) <= latest.block_end
    # A broker's ids come from its own blocks: each broker's ids fall in whole blocks no other touched.
    owners = {producer_id // zk_data.PRODUCER_ID_BLOCK_SIZE: broker_index
              for broker_index, ids in enumerate(drawn) for producer_id in ids}
    for broker_index, ids in enumerate(drawn):
        assert all(owners[producer_id // zk_data.PRODUCER_ID_BLOCK_SIZE] == broker_index for producer_id in ids)
