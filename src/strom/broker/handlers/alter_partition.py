"""AlterPartition (56): a partition leader asks the controller to change its ISR (KIP-497).

Answered by the active controller only; any other broker says NOT_CONTROLLER at the top
level and the leader's AlterPartitionManager looks for the controller again. The checks,
the write and the answer are the controller's (``strom.cluster.controller_replication``
and ``strom.cluster.alter_partition``), on its event queue; an unexpected failure there
is UNKNOWN_SERVER_ERROR at the top level, as Kafka answers. Served only in cluster mode.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from strom.broker.authorizer import cluster_action_allowed
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.alter_partition_request import AlterPartitionRequest
from strom.protocol.messages.alter_partition_response import AlterPartitionResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = AlterPartitionRequest
VERSIONS = range(0, 4)
logger = logging.getLogger(__name__)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, AlterPartitionRequest)
    if not cluster_action_allowed(broker):  # ACLs: the controller's requests need ClusterAction on the cluster
        return AlterPartitionResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = broker.controller
    if controller is None or not controller.is_active:
        return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
    try:
        return await controller.alter_partition(body, request.api_version)
    except Exception:
        logger.exception("AlterPartition from broker %d failed", body.broker_id)
        return AlterPartitionResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
