"""What the broker holds when ``metrics.listener`` is set: its registry, the request-path
metrics, the scrape-time collector and the HTTP server (imported only then)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.config import ConfigError
from strom.metrics.broker_metrics import BrokerMetrics
from strom.metrics.collectors import BrokerCollector
from strom.metrics.http import MetricsServer, bind
from strom.metrics.listener import parse_metrics_listener

if TYPE_CHECKING:
    from strom.broker.broker import Broker


def broker_metrics(broker: Broker) -> tuple[BrokerMetrics, MetricsServer]:
    """The broker's metrics and their server, its socket bound now: a port in use is one
    ``ConfigError`` line at start, as a bad ``metrics.listener`` is."""
    value = broker.config.metrics_listener
    listener = parse_metrics_listener(value)
    assert listener is not None  # checked by BrokerConfig.from_properties; "" never gets here
    metrics = BrokerMetrics()
    metrics.collector = BrokerCollector(broker)
    try:
        sock = bind(listener)
    except OSError as exc:
        raise ConfigError(f"cannot listen on metrics.listener {value}: {exc.strerror or exc}") from None
    return metrics, MetricsServer(metrics.exposition, sock)
