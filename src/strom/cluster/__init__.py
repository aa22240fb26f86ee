"""Cluster mode (Kafka's ZooKeeper mode): znode codecs, the ZooKeeper client, the controller.

Nothing here is imported by single-node `strom serve`; only cluster mode (``zookeeper.connect``
set) loads this package, and with it kazoo.
"""
