"""Concurrent at-least-once consumption: many workers per group consumer, commits only
what is done. See docs/ALO.md for the design; ``ParallelConsumer`` is the entry point,
``ExactlyOnceParallelConsumer`` its exactly-once mode for read-process-write."""

from __future__ import annotations

from strom.alo.config import ORDERINGS, Ordering, ParallelConsumerConfig
from strom.alo.exactly_once import ExactlyOnceParallelConsumer, OutputRecord
from strom.alo.metadata_codec import decode_offset_map, encode_offset_map
from strom.alo.metrics import PartitionMetrics, ProcessorMetrics
from strom.alo.offset_tracker import OffsetTracker
from strom.alo.processor import ParallelConsumer, ProcessingFailedError

__all__ = [
    "ORDERINGS",
    "ExactlyOnceParallelConsumer",
    "OffsetTracker",
    "Ordering",
    "OutputRecord",
    "ParallelConsumer",
    "ParallelConsumerConfig",
    "PartitionMetrics",
    "ProcessingFailedError",
    "ProcessorMetrics",
    "decode_offset_map",
    "encode_offset_map",
]
