"""Gauges computed when Prometheus scrapes, from the broker's own state: nothing on the
request path keeps them up to date.

The collector runs in the broker's event loop (the HTTP handler calls ``generate_latest``
there), the one owner of the broker's state, so it reads partitions, logs and groups
without locks. Each broker reports what it hosts: its partitions, its logs, the groups it
coordinates, and lag only for partitions whose log it holds (kafka_exporter, which asks
the whole cluster, sees every partition).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from strom.metrics.exposition import Family, render

if TYPE_CHECKING:
    from strom.broker.broker import Broker

# Each open connection's listener name ("" is the broker's first), counted at scrape.
ConnectionListeners = Callable[[], Iterable[str]]


class BrokerCollector(Collector):
    """ReplicaManager, controller, log, cleaner, socket-server and consumer-group gauges."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.connection_listeners: ConnectionListeners | None = None  # set by the network layer

    def families(self) -> Iterator[Family]:
        yield from self._replica_manager()
        yield from self._controller()
        yield from self._cleaner()
        yield from self._connections()
        yield from self._consumer_lag()

    def collect(self) -> Iterator[Metric]:
        """The Collector protocol, for a registry that wants these gauges among its own."""
        return (family.metric() for family in self.families())

    def exposition(self) -> bytes:
        """The gauges in the Prometheus text format, as ``generate_latest`` would write them."""
        return render(self.families())

    def _replica_manager(self) -> Iterator[Family]:
        broker = self.broker
        partitions = broker.replica_manager.partitions
        leaders = under_replicated = under_min_isr = 0
        sizes = Family("kafka_log_log_size", "Bytes of a partition's log on this broker (Log Size)",
                                  labels=["topic", "partition"])
        for (topic, index), partition in partitions.items():
            sizes.add_metric([topic, str(index)], partition.log.size_in_bytes)
            if partition.leader_id != broker.node_id:
                continue
            leaders += 1
            isr = len(partition.isr)
            under_replicated += isr < len(partition.replicas)
            under_min_isr += isr < partition.log.config.min_insync_replicas
        yield sizes
        for name, value, what in (
                ("partitioncount", len(partitions), "Partitions hosted by this broker"),
                ("leadercount", leaders, "Partitions this broker leads"),
                ("underreplicatedpartitions", under_replicated, "Led partitions whose ISR is smaller than their replicas"),
                ("underminisrpartitioncount", under_min_isr, "Led partitions whose ISR is below min.insync.replicas")):
            yield Family(f"kafka_server_replicamanager_{name}", what, value=value)

    def _controller(self) -> Iterator[Family]:
        broker = self.broker
        active = broker.is_controller()
        offline = 0
        if active and broker.config.cluster_mode:  # one node leads all its partitions itself
            metadata = broker.metadata
            for topic in metadata.topics():
                for index in range(topic.partitions):
                    state = metadata.partition_state(topic.name, index)
                    offline += state is not None and state.leader < 0
        yield Family("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the active controller (a single node is its own)", value=int(active))
        yield Family("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a leader, as the active controller sees them", value=offline)

    def _cleaner(self) -> Iterator[Family]:
        cleaner = self.broker.log_cleaner
        yield Family("kafka_log_logcleanermanager_max_dirty_percent",
                                "The highest dirty ratio of a compacted log at the cleaner's last look, in percent",
                                value=100.0 * cleaner.max_dirty_ratio)
        last_run_ms = cleaner.last_run_ms
        if last_run_ms is not None:
            yield Family("kafka_log_logcleaner_time_since_last_run_ms",
                                    "Milliseconds since the cleaner last looked for a log to compact",
                                    value=max(self.broker.log_manager.clock() - last_run_ms, 0))

    def _connections(self) -> Iterator[Family]:
        if self.connection_listeners is None:
            return
        counts = Tally(self.connection_listeners())
        first = self.broker.listener_settings.listeners[0].name
        family = Family("kafka_server_socket_server_metrics_connection_count",
                                   "Open client connections per listener", labels=["listener"])
        for listener in self.broker.listener_settings.listeners:
            family.add_metric([listener.name], counts[listener.name] + (counts[""] if listener.name == first else 0))
        yield family

    def _consumer_lag(self) -> Iterator[Family]:
        """kafka_exporter's gauges: lag is the partition's high watermark (what a consumer can
        read to) minus the group's committed offset."""
        lag = Family("kafka_consumergroup_lag", "High watermark minus the committed offset",
                                labels=["consumergroup", "topic", "partition"])
        current = Family("kafka_consumergroup_current_offset", "The group's committed offset",
                                    labels=["consumergroup", "topic", "partition"])
        lag_sum = Family("kafka_consumergroup_lag_sum", "The group's lag summed over a topic",
                                    labels=["consumergroup", "topic"])
        partitions = self.broker.replica_manager.partitions
        for group_id, group in list(self.broker.group_coordinator.groups.items()):
            sums: dict[str, int] = {}
            for (topic, index), committed in group.offsets.items():
                partition = partitions.get((topic, index))
                if partition is None:  # not hosted here: another broker's to report
                    continue
                labels = [group_id, topic, str(index)]
                behind = max(partition.high_watermark - committed.offset, 0)
                current.add_metric(labels, committed.offset)
                lag.add_metric(labels, behind)
                sums[topic] = sums.get(topic, 0) + behind
            for topic, total in sums.items():
                lag_sum.add_metric([group_id, topic], total)
        yield from (lag, current, lag_sum)
