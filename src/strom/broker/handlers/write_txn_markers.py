"""WriteTxnMarkers (27): write transaction markers on partitions this broker leads.

Thin over ``strom.broker.txn_markers.write_txn_markers``: the request's markers in,
one error per producer id per partition out, in the request's order. Sent by a
transaction coordinator on another broker, and by admin clients aborting a hanging
transaction straight at the leader (KIP-664). No partition gets
UNSUPPORTED_FOR_MESSAGE_FORMAT: every log is format v2, as Kafka 3.x ignores
``message.format.version``. The CLUSTER_ACTION authorization comes with the
security work. v0-v1 (v1 is flexible), as the codec and Kafka 3.9.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.txn_markers import TxnMarker, write_txn_markers
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
    results = await write_txn_markers(broker, markers)
    return WriteTxnMarkersResponse(markers=tuple(
        WritableTxnMarkerResult(marker.producer_id, tuple(
            WritableTxnMarkerTopicResult(topic.name, tuple(
                WritableTxnMarkerPartitionResult(index, results[(marker.producer_id, (topic.name, index))])
                for index in topic.partition_indexes
            ))
            for topic in marker.topics
        ))
        for marker in body.markers
    ))
