"""Retention: how many of a log's oldest segments may be deleted (Kafka's
``deleteRetentionMsBreachedSegments``, ``deleteRetentionSizeBreachedSegments`` and
``deleteLogStartOffsetBreachedSegments`` in one pass).

Rules, for each segment from the oldest: never one holding an offset at or above the
high watermark, never an empty one; otherwise deletable when wholly below the log
start offset, when older than ``retention.ms`` (by its largest record timestamp, or
the file's mtime if no record has one), or, for any but the active segment, while the
log exceeds ``retention.bytes``. The first segment that fails stops the prefix: a log
only ever loses its oldest segments. ``retention.ms``/``retention.bytes`` apply only
with ``cleanup.policy`` including ``delete``.
"""

from __future__ import annotations

from strom.storage.config import LogConfig
from strom.storage.fs import FileSystem
from strom.storage.log_segments import LogSegments


def deletable_prefix(fs: FileSystem, segments: LogSegments, config: LogConfig, *,
                     high_watermark: int, log_start_offset: int, now_ms: int) -> int:
    """How many segments, from the oldest, retention deletes now."""
    excess = segments.size_in_bytes - config.retention_bytes
    last = len(segments) - 1
    for count, segment in enumerate(segments):
        if segment.next_offset > high_watermark or segment.size == 0:
            return count
        below_start = segment.next_offset <= log_start_offset
        largest = segment.max_timestamp if segment.max_timestamp >= 0 \
            else fs.mtime_ms(segment.log_path)
        expired = config.deletes and 0 <= config.retention_ms < now_ms - largest
        oversize = config.deletes and config.retention_bytes >= 0 and count != last \
            and excess >= segment.size
        if not (below_start or expired or oversize):
            return count
        excess -= segment.size
    return len(segments)
