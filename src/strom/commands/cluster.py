"""``strom cluster describe``: the cluster id, the controller, and each broker, from Metadata.

The broker's software version is not on Kafka's wire (ApiVersions carries only the
client's name and version), so ``VERSION`` is what the wire does say: the range of
API keys the bootstrap broker serves and its highest Metadata version.
"""

from __future__ import annotations

import argparse
from typing import Any

from strom.commands.common import (
    add_client_options,
    client_properties,
    print_json,
    print_table,
    run,
)


def add_parser(commands: Any) -> None:
    cluster = commands.add_parser("cluster", help="the cluster's brokers and controller")
    verbs = cluster.add_subparsers(dest="verb", required=True)
    describe = verbs.add_parser("describe", help="cluster id, controller, brokers, protocol versions")
    add_client_options(describe)
    describe.set_defaults(run=lambda args: run("cluster describe", lambda: _describe(args)))


async def _describe(args: argparse.Namespace) -> int:
    from strom.client.cluster import Cluster
    from strom.client.config import AdminConfig
    from strom.protocol.messages.metadata_request import MetadataRequest

    cluster = Cluster(AdminConfig.from_properties(client_properties(args)))
    try:
        metadata = await cluster.refresh([])
        connection = await cluster.any_connection()
        api_keys = len(connection.api_versions)
        metadata_max = connection.api_versions.get(MetadataRequest.API_KEY, (0, 0))[1]
    finally:
        await cluster.close()
    brokers = sorted(metadata.brokers.values(), key=lambda b: b.node_id)
    if args.format == "json":
        print_json({"cluster_id": metadata.cluster_id, "controller": metadata.controller_id,
                    "api_keys": api_keys, "metadata_version": metadata_max,
                    "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                                 "controller": b.node_id == metadata.controller_id} for b in brokers]})
        return 0
    print(f"CLUSTER-ID: {metadata.cluster_id or '-'}")
    print(f"CONTROLLER: {metadata.controller_id}")
    print(f"VERSION:    {api_keys} API keys, Metadata v{metadata_max}")
    print()
    print_table(("ID", "HOST", "PORT", "RACK", "CONTROLLER"),
                [(b.node_id, b.host, b.port, b.rack, "*" if b.node_id == metadata.controller_id else None)
                 for b in brokers])
    return 0
