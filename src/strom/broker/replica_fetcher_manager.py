"""ReplicaFetcherManager: which fetcher copies which partition this broker follows.

Kafka's ``AbstractFetcherManager`` / ``ReplicaFetcherManager``. A partition is fetched
by the fetcher keyed (its leader's broker id, fetcher index), the index spreading one
leader's partitions over ``num.replica.fetchers`` connections by a stable hash of the
partition (Kafka's ``getFetcherId``). The controller's word drives it, through the
ReplicaManager: ``add_partitions`` when a LeaderAndIsr makes this broker a follower (the
partition leaves the fetcher of its old leader and joins its new leader's, where it
starts at ``InitialFetchState``), ``remove_partitions`` when it leads, stops or deletes
the partition. A fetcher left with no partition is stopped (Kafka's
``shutdownIdleFetcherThreads``); one whose fetching failed for good puts the partition
in ``failed_partitions`` until the controller names it again.

The leader's endpoint is the one on the inter-broker listener, from the MetadataCache
(UpdateMetadata's live brokers), looked up whenever a fetcher connects: a leader not
known yet (UpdateMetadata may come after LeaderAndIsr) keeps its partitions, retried
every ``replica.fetch.backoff.ms``.

Every method runs on the broker's event loop; ``add_partitions``/``remove_partitions``
are synchronous, so a LeaderAndIsr applies them in the same step as the partition's new
role and no fetch touches a log this broker now leads.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from strom.broker.metadata_cache import BrokerEndpoint, MetadataCache
from strom.broker.replica_fetch_state import InitialFetchState, ReplicaFetcherConfig
from strom.broker.replica_fetcher import ReplicaFetcher
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.config import BrokerConfig
    from strom.broker.partition import Partition
    from strom.broker.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)

FetcherKey = tuple[int, int]  # (source broker id, fetcher index)


def fetcher_index(topic_partition: TopicPartition, num_fetchers: int) -> int:
    """Which of a leader's ``num.replica.fetchers`` fetchers copies the partition: stable
    across restarts and processes (Python's ``hash`` of a string is not)."""
    topic, index = topic_partition
    return (31 * zlib.crc32(topic.encode()) + index) % max(num_fetchers, 1)


def inter_broker_listener_name(config: BrokerConfig) -> str:
    """``inter.broker.listener.name``, else Kafka's default: the listener named after
    ``security.inter.broker.protocol`` (PLAINTEXT). The broker's resolved name
    (``Broker.inter_broker_listener``) is passed to the manager instead when there is one."""
    return config.inter_broker_listener_name or "PLAINTEXT"


def initial_fetch_state(partition: Partition) -> InitialFetchState:
    """Where a partition that now follows starts fetching (Kafka's ``makeFollowers``,
    ``initialFetchOffset``): a log with leader epochs from its end (the leader's
    DivergingEpoch says what to cut), one without from its high watermark."""
    log = partition.log
    offset = log.log_end_offset if log.latest_epoch >= 0 else log.high_watermark
    return InitialFetchState(partition.leader_id, partition.leader_epoch, offset)


class ReplicaFetcherManager:
    """The fetchers of one broker; see the module docstring."""

    def __init__(self, replica_manager: ReplicaManager, metadata: MetadataCache, config: BrokerConfig,
                 broker_id: int, broker_epoch_getter: Callable[[], int], *,
                 listener_name: str | None = None) -> None:
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.broker_id = broker_id
        # The broker's registration epoch: Fetch v15+ carries it (KIP-903); v12 does not.
        self.broker_epoch_getter = broker_epoch_getter
        self.listener_name = listener_name or inter_broker_listener_name(config)
        self.num_fetchers = max(config.num_replica_fetchers, 1)
        self.fetcher_config = ReplicaFetcherConfig.from_broker_config(config, broker_id)
        self.failed_partitions: set[TopicPartition] = set()
        self._fetchers: dict[FetcherKey, ReplicaFetcher] = {}
        self._owner: dict[TopicPartition, FetcherKey] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"<ReplicaFetcherManager broker {self.broker_id} fetchers {sorted(self._fetchers)}>"

    @property
    def fetchers(self) -> Mapping[FetcherKey, ReplicaFetcher]:
        return dict(self._fetchers)

    def fetcher_for(self, topic_partition: TopicPartition) -> ReplicaFetcher | None:
        """The fetcher copying the partition now, if any."""
        key = self._owner.get(topic_partition)
        fetcher = None if key is None else self._fetchers.get(key)
        return fetcher if fetcher is not None and topic_partition in fetcher.partitions else None

    def endpoint_of(self, broker_id: int) -> BrokerEndpoint | None:
        """The broker's endpoint on the inter-broker listener, None while it is not known."""
        broker = self.metadata.live_broker(broker_id)
        return None if broker is None else broker.endpoint(self.listener_name)

    def add_partitions(self, states: Mapping[TopicPartition, InitialFetchState]) -> None:
        """Fetch each partition from ``states[tp].leader_id`` (Kafka's ``addFetcherForPartitions``);
        a partition without a leader (-1: offline) is fetched by none until it has one."""
        groups: dict[FetcherKey, dict[TopicPartition, InitialFetchState]] = {}
        offline = [tp for tp, state in states.items() if state.leader_id < 0]
        if offline:
            self.remove_partitions(offline)
        for tp, state in states.items():
            if state.leader_id < 0:
                continue
            key = (state.leader_id, fetcher_index(tp, self.num_fetchers))
            old = self._owner.get(tp)
            if old is not None and old != key and old in self._fetchers:
                self._fetchers[old].remove_partitions([tp])
            self._owner[tp] = key
            self.failed_partitions.discard(tp)
            groups.setdefault(key, {})[tp] = state
        for key, group in groups.items():
            fetcher = self._fetchers.get(key)
            if fetcher is None:
                fetcher = ReplicaFetcher(key[0], key[1], self.replica_manager, self.fetcher_config,
                                         self.endpoint_of, self.failed_partitions)
                self._fetchers[key] = fetcher
                fetcher.start()
            fetcher.add_partitions(group)
            logger.info("broker %d follows %s from broker %d (fetcher %d)", self.broker_id,
                        ", ".join(f"{t}-{p}@{s.fetch_offset}" for (t, p), s in sorted(group.items())),
                        key[0], key[1])
        self._stop_idle_fetchers()

    def remove_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching the partitions (Kafka's ``removeFetcherForPartitions``); at once:
        no fetch in flight touches their logs afterwards."""
        for tp in partitions:
            key = self._owner.pop(tp, None)
            fetcher = None if key is None else self._fetchers.get(key)
            if fetcher is not None:
                fetcher.remove_partitions([tp])
            self.failed_partitions.discard(tp)
        self._stop_idle_fetchers()

    async def shutdown(self) -> None:
        """Stop every fetcher and close its connection."""
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        self._owner.clear()
        for fetcher in fetchers:
            await fetcher.shutdown()
        while self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

    def _stop_idle_fetchers(self) -> None:
        for key, fetcher in list(self._fetchers.items()):
            if not fetcher.partitions:
                del self._fetchers[key]
                task = asyncio.get_running_loop().create_task(fetcher.shutdown(), name=f"stop-{fetcher.name}")
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)
