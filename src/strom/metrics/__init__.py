"""Prometheus metrics for the broker (issue 21): ``/metrics`` on ``metrics.listener``.

Names follow what the Prometheus JMX exporter and Strimzi make of Kafka's MBeans
(``kafka_server_brokertopicmetrics_bytesin_total{topic}``, ``kafka_network_requestmetrics_*``,
``kafka_server_replicamanager_*``, ``kafka_controller_kafkacontroller_*``), and consumer lag
in kafka_exporter's form (``kafka_consumergroup_lag``), so their dashboards and alert rules
work unchanged.

- ``listener``: the ``metrics.listener`` URL parsed (no prometheus_client: the config imports it).
- ``broker_metrics``: the counters and histograms the request path updates, children cached.
- ``collectors``: the gauges computed at scrape time (partitions, log sizes, lag, connections).
- ``http``: the small asyncio HTTP server in the broker's own loop.

prometheus_client is imported only by ``broker_metrics``, ``collectors`` and ``http``, which
the broker imports only when ``metrics.listener`` is set.
"""
