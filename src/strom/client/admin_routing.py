"""Where each admin request goes, and how a call is retried when its broker changes.

Kafka's Admin client routes by the kind of call (its ``NodeProvider``s and
``AdminApiLookupStrategy``): topic creation, deletion and new partitions to the
controller; group calls to the group's coordinator (FindCoordinator first, kept
until a coordinator error says it moved); ListOffsets and DeleteRecords to each
partition's leader, one request per leader; a broker's configs to that broker, other
configs to any broker. ``AdminRouter`` owns that choice and the retry loop around
it, so ``AsyncAdmin`` only builds requests and reads answers.

Only the items that failed retriably are sent again, after a metadata refresh and a
backoff of ``retry.backoff.ms`` doubling up to ``retry.backoff.max.ms``, for at most
``request.timeout.ms`` per call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Final, TypeVar

from strom.client.admin_types import (
    AdminBatchError,
    ConfigResource,
    ConfigResourceType,
    TopicPartition,
)
from strom.client.cluster import Cluster, ClusterMetadata
from strom.client.config import AdminConfig
from strom.client.errors import KafkaConnectionError, KafkaError
from strom.client.find_coordinator import find_coordinator
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from strom.protocol.messages.metadata_response import MetadataResponse

logger = logging.getLogger(__name__)

R = TypeVar("R", bound=Message)
K = TypeVar("K")
V = TypeVar("V")

CONTROLLER_ERRORS: Final = frozenset({ErrorCode.NOT_CONTROLLER})
COORDINATOR_ERRORS: Final = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
LEADER_ERRORS: Final = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
                                  ErrorCode.UNKNOWN_LEADER_EPOCH})
ANY_BROKER: Final = -1  # a node id meaning "whichever broker is least loaded"

ItemResults = dict[K, V | KafkaError]


def retry_worthy(error: KafkaError, retry_on: frozenset[ErrorCode]) -> bool:
    return isinstance(error, KafkaConnectionError) or error.error_code in retry_on


class AdminRouter:
    """Sends an admin call's requests to the right brokers, retrying what may pass."""

    def __init__(self, cluster: Cluster, config: AdminConfig) -> None:
        self.cluster = cluster
        self.config = config
        self._coordinators: dict[str, int] = {}  # group id -> coordinator node id

    async def send(self, node: int, response_type: type[R], build: Callable[[int], Message],
                    versions: range | None = None, timeout_ms: int | None = None) -> R:
        """Send the request ``build`` makes for the version chosen with ``node`` (ANY_BROKER: any)."""
        cluster = self.cluster
        if not cluster.metadata.brokers or (node != ANY_BROKER and node not in cluster.metadata.brokers):
            await cluster.refresh()
        if node != ANY_BROKER and node not in cluster.metadata.brokers:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"node {node} is not in the cluster")
        connection = await (cluster.any_connection() if node == ANY_BROKER else cluster.connection(node))
        assert response_type.API_KEY is not None
        version = connection.version_for(response_type.API_KEY, versions or response_type.VALID_VERSIONS)
        response = await connection.send(build(version), version=version, timeout_ms=timeout_ms)
        assert isinstance(response, response_type)
        return response

    async def metadata(self, topics: Collection[str] | None) -> ClusterMetadata:
        """A Metadata answer of our own, for ``topics`` (None: all), that never auto-creates."""
        request = MetadataRequest(allow_auto_topic_creation=False, topics=None if topics is None else tuple(
            MetadataRequestTopic(name=name) for name in topics))
        response = await self.send(ANY_BROKER, MetadataResponse, lambda _: request, versions=range(4, 13))
        return ClusterMetadata.from_response(response)

    async def on_controller(self, names: Iterable[str], response_type: type[R],
                             build: Callable[[int, list[str], int], Message],
                             outcome: Callable[[R], ItemResults[str, V]], timeout_ms: int | None) -> dict[str, V]:
        """A topic call on the controller (any broker if it is unknown), again on NOT_CONTROLLER."""
        broker_timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms

        async def attempt(names: list[str]) -> ItemResults[str, V]:
            if not self.cluster.metadata.brokers:
                await self.cluster.refresh()
            metadata = self.cluster.metadata
            controller = metadata.controller_id if metadata.controller_id in metadata.brokers else ANY_BROKER
            # the broker may wait up to its timeout_ms before answering: ours must be longer
            response = await self.send(controller, response_type, lambda v: build(v, names, broker_timeout),
                                        timeout_ms=broker_timeout + self.config.request_timeout_ms)
            return outcome(response)

        return await self.batch(names, attempt, CONTROLLER_ERRORS)

    async def batch(self, keys: Iterable[K], attempt: Callable[[list[K]], Awaitable[ItemResults[K, V]]],
                     retry_on: frozenset[ErrorCode]) -> dict[K, V]:
        """Run ``attempt`` on the items, then again on those that failed retriably, until the timeout."""
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        backoff = self.config.retry_backoff_ms / 1000
        pending = list(dict.fromkeys(keys))
        results: dict[K, V] = {}
        errors: dict[K, KafkaError] = {}
        while pending:
            try:
                outcome = await attempt(pending)
            except KafkaError as exc:
                if not retry_worthy(exc, retry_on):
                    raise
                outcome = dict.fromkeys(pending, exc)
            retry = []
            for key in pending:
                value = outcome.get(key, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{key!r} missing from the answer"))
                if isinstance(value, KafkaError):
                    errors[key] = value
                    if retry_worthy(value, retry_on):
                        retry.append(key)
                else:
                    results[key] = value
                    errors.pop(key, None)
            if not retry or time.monotonic() + backoff > deadline:
                break
            logger.debug("retrying %d item(s) after %s", len(retry), errors[retry[0]])
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000)
            try:  # leaders or the controller may have moved
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                    await self.cluster.refresh()
            except (KafkaError, TimeoutError):
                pass  # the next attempt says what is wrong
            pending = retry
        if errors:
            raise AdminBatchError(errors, results)
        return results

    async def per_node(self, groups: Mapping[int, list[K]],
                        send: Callable[[int, list[K]], Awaitable[ItemResults[K, V]]]) -> ItemResults[K, V]:
        """One request per node, concurrently; a node's failure is its items' error."""
        async def one(node: int) -> ItemResults[K, V]:
            try:
                return await send(node, groups[node])
            except KafkaError as exc:
                return dict.fromkeys(groups[node], exc)

        outcome: ItemResults[K, V] = {}
        for answer in await asyncio.gather(*(one(node) for node in groups)):
            outcome.update(answer)
        return outcome

    async def on_leaders(self, keys: Iterable[TopicPartition],
                          send: Callable[[int, list[TopicPartition]], Awaitable[ItemResults[TopicPartition, V]]]
                          ) -> dict[TopicPartition, V]:
        """Send each partition's item to its leader, grouped per leader, retrying moved leaders."""
        async def attempt(tps: list[TopicPartition]) -> ItemResults[TopicPartition, V]:
            topics = {tp.topic for tp in tps}
            metadata = self.cluster.metadata
            if self.cluster.stale or not topics <= metadata.topics.keys():
                metadata = await self.cluster.refresh(topics)
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            outcome: ItemResults[TopicPartition, V] = {}
            for tp in tps:
                leader = metadata.leader(*tp)
                if leader is None:
                    info = metadata.topics.get(tp.topic)
                    known = info is not None and tp.partition in info.partitions
                    code = ErrorCode.LEADER_NOT_AVAILABLE if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    outcome[tp] = KafkaError(code, f"{tp.topic}-{tp.partition}")
                else:
                    by_leader[leader].append(tp)
            outcome.update(await self.per_node(by_leader, send))
            return outcome

        return await self.batch(keys, attempt, LEADER_ERRORS)

    async def coordinator(self, group_id: str) -> int:
        """The node id of the group's coordinator, asked once and kept until it moves."""
        node = self._coordinators.get(group_id)
        if node is not None:
            return node
        if not self.cluster.metadata.brokers:
            await self.cluster.refresh()
        node = (await find_coordinator(await self.cluster.any_connection(), group_id)).node_id
        if node not in self.cluster.metadata.brokers:
            await self.cluster.refresh()
        self._coordinators[group_id] = node
        return node

    async def on_coordinator(self, group_id: str, call: Callable[[int], Awaitable[V]]) -> V:
        """``call`` with the group's coordinator, finding it again while it moves or loads."""
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        backoff = self.config.retry_backoff_ms / 1000
        while True:
            try:
                return await call(await self.coordinator(group_id))
            except KafkaError as exc:
                if not retry_worthy(exc, COORDINATOR_ERRORS) or time.monotonic() + backoff > deadline:
                    raise
                self._coordinators.pop(group_id, None)
                logger.debug("group %r: retrying after %s", group_id, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000)

    async def gather(self, keys: Iterable[str], call: Callable[[str], Awaitable[V]]) -> dict[str, V]:
        """``call`` for every key concurrently; any failure raises ``AdminBatchError``."""
        keys = list(dict.fromkeys(keys))
        answers = await asyncio.gather(*(call(key) for key in keys), return_exceptions=True)
        results: dict[str, V] = {}
        errors: dict[str, KafkaError] = {}
        for key, answer in zip(keys, answers, strict=True):
            if isinstance(answer, KafkaError):
                errors[key] = answer
            elif isinstance(answer, BaseException):
                raise answer
            else:
                results[key] = answer
        if errors:
            raise AdminBatchError(errors, results)
        return results




def by_resource_node(resources: Iterable[ConfigResource]) -> dict[int, list[ConfigResource]]:
    """A broker's configs are answered by that broker; any broker answers for a topic."""
    by_node: dict[int, list[ConfigResource]] = defaultdict(list)
    for resource in resources:
        broker = resource.type == ConfigResourceType.BROKER and resource.name.isdigit()
        by_node[int(resource.name) if broker else ANY_BROKER].append(resource)
    return by_node
