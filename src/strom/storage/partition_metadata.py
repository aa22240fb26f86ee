"""``partition.metadata``: the topic id kept in each partition directory, as Kafka writes it.

On disk (``<data-dir>/<topic>-<partition>/partition.metadata``), two text lines::

    version: 0
    topic_id: <the topic's UUID, URL-safe base64 without padding>

Written once when the partition is created (temp file, fsync, rename: a crash leaves
the old file or the new one, never half of one) and read back at start-up.
"""

from __future__ import annotations

import base64
import os
import uuid
from typing import Final

PARTITION_METADATA: Final = "partition.metadata"


def encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def read_topic_id(partition_dir: str) -> uuid.UUID | None:
    """The id in the directory's file; None if it is missing or unreadable."""
    path = os.path.join(partition_dir, PARTITION_METADATA)
    try:
        with open(path, encoding="utf-8") as file:
            fields = dict(line.split(":", 1) for line in file.read().splitlines() if ":" in line)
        return decode_topic_id(fields["topic_id"].strip())
    except (OSError, KeyError, ValueError):
        return None


def write_topic_id(partition_dir: str, topic_id: uuid.UUID) -> None:
    """Write the file unless it already says exactly this."""
    path = os.path.join(partition_dir, PARTITION_METADATA)
    text = f"version: 0\ntopic_id: {encode_topic_id(topic_id)}\n"
    try:
        with open(path, encoding="utf-8") as file:
            if file.read() == text:
                return
    except OSError:
        pass
    temp = path + ".tmp"
    with open(temp, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temp, path)
