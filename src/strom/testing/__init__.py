"""An embedded Kafka broker for testing Kafka applications in Python: no JVM, no Docker.

With Strom installed, pytest loads ``strom.testing.plugin`` by itself (the ``pytest11``
entry point) and every test can ask for a broker::

    def test_orders_are_published(strom_broker):
        strom_broker.create_topic("orders", partitions=3)
        publish_orders(bootstrap_servers=strom_broker.bootstrap_servers)
        assert [r.value for r in strom_broker.read_all("orders")] == [b"order-1"]

Outside pytest, ``EmbeddedBroker.start(data_dir)`` gives the same broker (a context
manager). Importing this package does not import pytest: pytest stays optional.
"""

from strom.testing.embedded import TEST_DEFAULTS, BrokerStartError, EmbeddedBroker, Mode

__all__ = ["TEST_DEFAULTS", "BrokerStartError", "EmbeddedBroker", "Mode"]
