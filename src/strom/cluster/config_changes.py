"""Following ``/config/changes``: how each broker learns that an entity's config changed
(Kafka's ``ZkConfigManager`` over ``ZkNodeChangeNotificationListener``).

Invariants:

- **Who writes:** whoever changes ``/config/<entity path>`` (any broker answering
  IncrementalAlterConfigs, AlterClientQuotas or AlterUserScramCredentials, or Kafka's own
  tools) then appends a persistent sequential ``config_change_<seq>`` znode naming the entity
  (``KafkaZkClient``'s ``update_entity_config``, ``set_topic_config``). Nobody else writes
  there; only the purge of old notices deletes them.
- **Who reads:** each follower (the topic configs, the SCRAM credentials, the client quotas)
  keeps the highest sequence it has applied, and on every change of the children applies the
  newer notices in sequence order, one batch at a time, on the broker's event loop; the
  entity itself is re-read, the notice only names it. A follower that starts ``from_now``
  reads every entity of its kind itself first, so notices older than that are skipped.
- A ZooKeeper failure while applying leaves the sequence where the last applied notice put
  it: the next change of the children retries the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from strom.cluster import zk_data

if TYPE_CHECKING:
    from strom.cluster.zk_client import KafkaZkClient

logger = logging.getLogger(__name__)


class ConfigChangeFollower:
    """Calls ``apply(entity_path)`` for each config-change notice newer than the last one seen."""

    def __init__(self, zk: KafkaZkClient, apply: Callable[[str], Awaitable[None]], what: str) -> None:
        self._zk = zk
        self._apply = apply
        self._what = what  # for the log: "SCRAM credential", "client quota", ...
        self._last = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._applying: asyncio.Task[None] | None = None
        self._again = False
        self._stopped = False

    def start(self, *, from_now: bool, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Watch from now on; ``from_now``: skip the notices already there (the caller reads every
        entity itself). Blocking reads of ZooKeeper: on the event loop at start, or in a thread
        given the ``loop`` the notices are to be applied on."""
        self._loop = loop or asyncio.get_running_loop()
        if from_now:
            self._last = max((sequence for sequence, _ in self._zk.get_config_changes()), default=-1)
        self._zk.watch_children(zk_data.CONFIG_CHANGES, self._changed)

    def stop(self) -> None:
        self._stopped = True

    def _changed(self, children: list[str]) -> bool:  # on kazoo's thread
        loop = self._loop
        if loop is not None and not loop.is_closed() and not self._stopped:
            loop.call_soon_threadsafe(self._schedule)
        return not self._stopped

    def _schedule(self) -> None:
        if self._applying is not None and not self._applying.done():
            self._again = True  # one more pass once this one ends: notices stay in order
            return
        self._applying = asyncio.ensure_future(self._apply_new())

    async def _apply_new(self) -> None:
        while True:
            self._again = False
            try:
                for sequence, entity_path in await asyncio.to_thread(self._zk.get_config_changes, self._last):
                    await self._apply(entity_path)
                    self._last = max(self._last, sequence)
            except Exception as exc:  # ZooKeeper unreachable: the next change of the children retries
                logger.warning("%s changes not read from ZooKeeper: %s", self._what, exc)
                return
            if not self._again or self._stopped:
                return
