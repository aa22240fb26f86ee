"""WriteTxnMarkers (27): write transaction markers on partitions this broker leads.

Thin over ``strom.broker.txn_markers.write_txn_markers``: the request's markers in,
one error per producer id per partition out, grouped as Kafka groups them (by producer
id, then topic), in the request's order. Sent by a
transaction coordinator on another broker, and by admin clients aborting a hanging
transaction straight at the leader (KIP-664). No partition gets
UNSUPPORTED_FOR_MESSAGE_FORMAT: every log is format v2, as Kafka 3.x ignores
``message.format.version``. The CLUSTER_ACTION authorization comes with the
security work. v0-v1 (v1 is flexible), as the codec and Kafka 3.9.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.authorizer import cluster_action_allowed
from strom.broker.txn_markers import TxnMarker, write_txn_markers
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.write_txn_markers_request import WriteTxnMarkersRequest
from strom.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = WriteTxnMarkersRequest
VERSIONS = range(0, 2)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, WriteTxnMarkersRequest)
    markers = [
        TxnMarker(
            marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch,
            tuple((topic.name, index) for topic in marker.topics for index in topic.partition_indexes),
        )
        for marker in body.markers
    ]
    if cluster_action_allowed(broker):
        results = await write_txn_markers(broker, markers)
    else:  # ACLs: ClusterAction on the cluster (the coordinator's request); every partition refused
        results = {(marker.producer_id, tp): ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                   for marker in markers for tp in marker.partitions}
    # As Kafka's answer, built from its errors by producer id and partition: one result per
    # producer id, partitions grouped by topic (a topic or producer named twice is merged).
    by_producer: dict[int, dict[str, dict[int, int]]] = {}
    for (producer_id, (topic, index)), error in results.items():
        by_producer.setdefault(producer_id, {}).setdefault(topic, {})[index] = error
    return WriteTxnMarkersResponse(markers=tuple(
        WritableTxnMarkerResult(producer_id, tuple(
            WritableTxnMarkerTopicResult(topic, tuple(
                WritableTxnMarkerPartitionResult(index, error) for index, error in partitions.items()))
            for topic, partitions in topics.items()
        ))
        for producer_id, topics in by_producer.items()
    ))
