"""DescribeCluster (60): on one node, this broker is the whole cluster and its controller;
in cluster mode, the live brokers and the controller the controller's UpdateMetadata named.

Endpoints are those of the listener the client connected through (a broker without it is left
out, as Kafka's ``getAliveBrokerNodes(listenerName)``). The cluster's authorized operations, when asked for, come from ``authorizer``. v1's endpoint type 2 (controllers) is refused as a broker refuses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from strom.broker.authorizer import cluster_operations
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.describe_cluster_request import DescribeClusterRequest
from strom.protocol.messages.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DescribeClusterRequest
VERSIONS = range(0, 2)

ENDPOINT_TYPE_BROKER: Final = 1


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DescribeClusterRequest)
    if body.endpoint_type != ENDPOINT_TYPE_BROKER:
        return DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"endpoint type {body.endpoint_type} is not served by a broker",
            endpoint_type=body.endpoint_type,
        )
    endpoint = broker.request_endpoint()
    listener = broker.request_listener()
    brokers: tuple[DescribeClusterBroker, ...] = (DescribeClusterBroker(broker.node_id, endpoint.host, endpoint.port, None),)
    controller_id = broker.node_id
    if broker.config.cluster_mode:  # the controller's UpdateMetadata, as Metadata answers
        brokers = tuple(DescribeClusterBroker(live.id, e.host, e.port, live.rack)
                        for live in broker.metadata.live_brokers() if (e := live.endpoint(listener)) is not None)
        controller_id = broker.metadata.controller_id
    return DescribeClusterResponse(
        error_code=0,
        cluster_id=broker.cluster_id,
        controller_id=controller_id,
        brokers=brokers,
        cluster_authorized_operations=cluster_operations(  # Kafka refuses nothing here: 0 without Describe
            broker.authorizer, requested=body.include_cluster_authorized_operations),
    )
