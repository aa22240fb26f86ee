"""The dead-letter topic: where a record goes once it has failed ``max.attempts`` times.

A poison record (one the handler can never process) must not hold its partition's
committed offset back forever, nor be silently skipped. Producing it to a dead-letter
topic, with why it failed, lets the offset move on while nothing is lost: someone can
inspect and replay it. Only once the broker has acknowledged the dead letter does the
record count as done, so a crash in between repeats it rather than losing it.

The headers follow Spring Kafka's dead-letter names (``kafka_dlt-original-topic`` …), so
tooling written for those reads these; the record keeps its key, value and headers, so
a replay is a plain re-produce of key and value.
"""

from __future__ import annotations

from collections.abc import Mapping

from strom.client.fetcher import ConsumerRecord
from strom.client.producer import AsyncProducer


def dead_letter_headers(record: ConsumerRecord, error: BaseException | None,
                        attempts: int) -> list[tuple[str, bytes | None]]:
    """The record's own headers, then where it came from and how it failed."""
    headers: list[tuple[str, bytes | None]] = list(record.headers)
    headers += [
        ("kafka_dlt-original-topic", record.topic.encode()),
        ("kafka_dlt-original-partition", str(record.partition).encode()),
        ("kafka_dlt-original-offset", str(record.offset).encode()),
        ("kafka_dlt-original-timestamp", str(record.timestamp).encode()),
        ("kafka_dlt-exception-fqcn", _qualified_name(error).encode()),
        ("kafka_dlt-exception-message", str(error).encode("utf-8", "replace")[:4096]),
        ("strom_alo-attempts", str(attempts).encode()),
    ]
    return headers


def _qualified_name(error: BaseException | None) -> str:
    if error is None:
        return ""
    kind = type(error)
    return f"{kind.__module__}.{kind.__qualname__}"


class DeadLetterPublisher:
    """One producer for the consumer's dead letters, started when the first one is due."""

    def __init__(self, topic: str, producer_properties: Mapping[str, object]) -> None:
        self.topic = topic
        self._properties = dict(producer_properties)
        self._producer: AsyncProducer | None = None

    async def publish(self, record: ConsumerRecord, error: BaseException | None, attempts: int) -> None:
        """Produce the dead letter and wait until the broker has it (acks=all)."""
        if self._producer is None:
            self._producer = AsyncProducer(self._properties)
            await self._producer.start()
        await self._producer.send_and_wait(self.topic, record.value, record.key,
                                           headers=dead_letter_headers(record, error, attempts))

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.close()
            self._producer = None
