"""ControlledShutdown (7): a broker about to stop asks the controller to move its leadership.

Answered by the active controller only (others: NOT_CONTROLLER, and the stopping broker
asks ZooKeeper who the controller is and tries again). The answer lists the partitions the
broker still leads; the broker retries until that list is empty or its retries run out,
then stops either way (``strom.cluster.zk_broker``). Served only in cluster mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import cluster_action_allowed
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.controlled_shutdown_request import ControlledShutdownRequest
from strom.protocol.messages.controlled_shutdown_response import (
    ControlledShutdownResponse,
    RemainingPartition,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = ControlledShutdownRequest
VERSIONS = range(0, 4)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, ControlledShutdownRequest)
    if not cluster_action_allowed(broker):  # ACLs: the controller's requests need ClusterAction on the cluster
        return ControlledShutdownResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = broker.controller
    if controller is None or not controller.is_active:
        return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
    # v0 has no broker epoch: -1, not checked (as Kafka).
    error, remaining = await controller.controlled_shutdown(body.broker_id, body.broker_epoch)
    return ControlledShutdownResponse(
        error_code=error,
        remaining_partitions=tuple(RemainingPartition(topic_name=t, partition_index=p) for t, p in remaining),
    )
