"""``meta.properties``: which cluster (and, in a cluster, which broker) a data directory belongs to.

On disk, Kafka's Java-properties text at ``<data-dir>/meta.properties``:

    version=1                 # a single node (Kafka's KRaft-era layout: cluster.id only)
    cluster.id=<22-char id>

    version=0                 # a broker of a ZooKeeper cluster (Kafka's ZooKeeper-mode layout)
    cluster.id=<ZooKeeper's /cluster/id>
    broker.id=<node id>

Written once, atomically (temp file, fsync, rename, directory fsync), when the directory is first used, and
only read afterwards: a data directory never changes cluster, so a broker pointed at
another cluster's ZooKeeper refuses to start rather than mixing two clusters' logs.
"""

from __future__ import annotations

import os

from strom.storage.fs import FileSystem, write_file_atomically

FILE_NAME = "meta.properties"


def read_cluster_id(data_dir: str) -> str | None:
    """``cluster.id`` of the data directory, if it has one."""
    try:
        with open(os.path.join(data_dir, FILE_NAME), encoding="utf-8") as file:
            for line in file:
                name, _, value = line.strip().partition("=")
                if name == "cluster.id" and value:
                    return value
    except OSError:
        pass
    return None


def write(data_dir: str, cluster_id: str, broker_id: int | None = None) -> None:
    """Version 1 (cluster id) for a single node, version 0 (with the broker id) in a cluster."""
    text = (f"version=1\ncluster.id={cluster_id}\n" if broker_id is None
            else f"version=0\ncluster.id={cluster_id}\nbroker.id={broker_id}\n")
    write_file_atomically(FileSystem(), os.path.join(data_dir, FILE_NAME), text.encode("utf-8"))
