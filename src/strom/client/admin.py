"""The admin client: topics, configs, consumer groups and offsets, as Kafka's Admin API.

Every request goes where Kafka routes it (``admin_routing.AdminRouter``): topic
creation, deletion and new partitions to the controller; group calls to the group's
coordinator (FindCoordinator first); ListOffsets and DeleteRecords to each partition's
leader, one request per leader; a broker's configs to that broker. Requests are built
for the version the broker picks, so the client works with brokers that speak only
older shapes (Tansu).

Batch calls return a dict keyed by item. If any item fails, they raise
``AdminBatchError``: a ``KafkaError`` with the first failure's code whose ``errors``
and ``results`` hold every item's outcome, so nothing is lost to a partial failure.

Retriable errors are retried with ``retry.backoff.ms`` doubling up to
``retry.backoff.max.ms``, for at most ``request.timeout.ms`` per call: items whose
leader moved (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION
just after creation) after a metadata refresh, group calls after finding the
coordinator again (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS), controller calls on NOT_CONTROLLER, and any call whose
connection dropped. Only the failed items are sent again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Self

from strom.client.admin_routing import (
    COORDINATOR_ERRORS,
    AdminRouter,
    ItemResults,
    by_resource_node,
)
from strom.client.admin_types import (
    AdminBatchError,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    CreatedTopic,
    GroupDescription,
    GroupListing,
    Lag,
    ListOffsetsResult,
    MemberDescription,
    NewTopic,
    OffsetSpec,
    PartitionDescription,
    TopicDescription,
    TopicListing,
    TopicPartition,
    decode_assignment,
)
from strom.client.cluster import Cluster
from strom.client.config import AdminConfig
from strom.client.errors import KafkaError, UnsupportedVersionError, raise_for
from strom.client.offsets import OffsetAndMetadata
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages import create_partitions_request as cpq
from strom.protocol.messages import create_topics_request as ctq
from strom.protocol.messages import delete_records_request as drq
from strom.protocol.messages import describe_configs_request as dcq
from strom.protocol.messages import incremental_alter_configs_request as iacq
from strom.protocol.messages import list_offsets_request as loq
from strom.protocol.messages import offset_commit_request as ocq
from strom.protocol.messages import offset_delete_request as odq
from strom.protocol.messages import offset_fetch_request as ofq
from strom.protocol.messages.create_partitions_response import CreatePartitionsResponse
from strom.protocol.messages.create_topics_response import CreateTopicsResponse
from strom.protocol.messages.delete_groups_request import DeleteGroupsRequest
from strom.protocol.messages.delete_groups_response import DeleteGroupsResponse
from strom.protocol.messages.delete_records_response import DeleteRecordsResponse
from strom.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from strom.protocol.messages.delete_topics_response import DeleteTopicsResponse
from strom.protocol.messages.describe_configs_response import DescribeConfigsResponse
from strom.protocol.messages.describe_groups_request import DescribeGroupsRequest
from strom.protocol.messages.describe_groups_response import DescribeGroupsResponse
from strom.protocol.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from strom.protocol.messages.list_groups_request import ListGroupsRequest
from strom.protocol.messages.list_groups_response import ListGroupsResponse
from strom.protocol.messages.list_offsets_response import ListOffsetsResponse
from strom.protocol.messages.offset_commit_response import OffsetCommitResponse
from strom.protocol.messages.offset_delete_response import OffsetDeleteResponse
from strom.protocol.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
)

logger = logging.getLogger(__name__)

# ListOffsets' special timestamps (KIP-79, KIP-734).
_SPEC_TIMESTAMPS = {"latest": -1, "earliest": -2, "max-timestamp": -3}


def _error(code: int, message: str | None, what: str) -> KafkaError:
    return KafkaError(code, f"{what}: {message}" if message else what)


class AsyncAdmin:
    """Kafka's Admin API over asyncio; use as ``async with AsyncAdmin({...}) as admin``."""

    def __init__(self, config: AdminConfig | Mapping[str, object] | None = None, **overrides: object) -> None:
        if isinstance(config, AdminConfig):
            config = config.with_overrides(None, **overrides) if overrides else config
        else:
            config = AdminConfig.from_properties(config, **overrides)
        # An admin inspects topics; asking about one must never create it.
        self.config = replace(config, allow_auto_create_topics=False)
        self._cluster = Cluster(self.config)
        self._router = AdminRouter(self._cluster, self.config)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await self._cluster.close()

    # -- topics --------------------------------------------------------------------------
    async def create_topics(self, topics: Sequence[NewTopic], validate_only: bool = False,
                            timeout_ms: int | None = None) -> dict[str, CreatedTopic]:
        """Create ``topics`` (or only check them, ``validate_only``); name -> what was created.

        ``timeout_ms`` is how long the controller may wait for the creation to complete
        (default ``request.timeout.ms``); the client waits that plus ``request.timeout.ms``.
        """
        wanted = {topic.name: topic for topic in topics}

        def build(_: int, names: list[str], broker_timeout: int) -> Message:
            return ctq.CreateTopicsRequest(topics=tuple(_creatable(wanted[name]) for name in names),
                                           timeout_ms=broker_timeout, validate_only=validate_only)

        def outcome(response: CreateTopicsResponse) -> ItemResults[str, CreatedTopic]:
            return {r.name: _error(r.error_code, r.error_message, f"topic {r.name!r}") if r.error_code
                    else CreatedTopic(r.name, r.topic_id, r.num_partitions, r.replication_factor)
                    for r in response.topics}

        return await self._router.on_controller(wanted, CreateTopicsResponse, build, outcome, timeout_ms)

    async def delete_topics(self, names: Collection[str], timeout_ms: int | None = None) -> None:
        """Delete topics by name; UNKNOWN_TOPIC_OR_PARTITION for one that does not exist (not retried)."""
        def build(version: int, names: list[str], broker_timeout: int) -> Message:
            if version >= 6:  # KIP-516: topics by name or id
                return DeleteTopicsRequest(topics=tuple(DeleteTopicState(name=n) for n in names),
                                           timeout_ms=broker_timeout)
            return DeleteTopicsRequest(topic_names=tuple(names), timeout_ms=broker_timeout)

        def outcome(response: DeleteTopicsResponse) -> ItemResults[str, None]:
            return {r.name or "": _error(r.error_code, r.error_message, f"topic {r.name!r}") if r.error_code
                    else None for r in response.responses}

        await self._router.on_controller(names, DeleteTopicsResponse, build, outcome, timeout_ms)

    async def list_topics(self, include_internal: bool = False) -> dict[str, TopicListing]:
        """Every topic, from one Metadata answer (never cached: an admin wants the current list)."""
        metadata = await self._router.metadata(None)
        return {name: TopicListing(name, info.topic_id, info.internal)
                for name, info in sorted(metadata.topics.items())
                if not info.error_code and (include_internal or not info.internal)}

    async def describe_topics(self, names: Collection[str]) -> dict[str, TopicDescription]:
        """Partitions with leader, replicas and ISR; waits out a leader election in progress."""
        async def attempt(names: list[str]) -> ItemResults[str, TopicDescription]:
            topics = (await self._router.metadata(names)).topics
            outcome: ItemResults[str, TopicDescription] = {}
            for name in names:
                info = topics.get(name)
                if info is None or info.error_code:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if info is None else info.error_code
                    outcome[name] = KafkaError(code, f"topic {name!r}")
                    continue
                partitions = tuple(
                    PartitionDescription(p.partition, p.leader, p.leader_epoch, p.replicas, p.isr)
                    for _, p in sorted(info.partitions.items()))
                outcome[name] = TopicDescription(name, info.topic_id, info.internal, partitions)
            return outcome

        return await self._router.batch(names, attempt, frozenset({ErrorCode.LEADER_NOT_AVAILABLE}))

    async def create_partitions(self, new_totals: Mapping[str, int], validate_only: bool = False,
                                timeout_ms: int | None = None) -> None:
        """Grow each topic to the given total number of partitions."""
        def build(_: int, names: list[str], broker_timeout: int) -> Message:
            return cpq.CreatePartitionsRequest(
                topics=tuple(cpq.CreatePartitionsTopic(name=n, count=new_totals[n], assignments=None)
                             for n in names),
                timeout_ms=broker_timeout, validate_only=validate_only)

        def outcome(response: CreatePartitionsResponse) -> ItemResults[str, None]:
            return {r.name: _error(r.error_code, r.error_message, f"topic {r.name!r}") if r.error_code
                    else None for r in response.results}

        await self._router.on_controller(new_totals, CreatePartitionsResponse, build, outcome, timeout_ms)

    # -- configs -------------------------------------------------------------------------
    async def describe_configs(self, resources: Collection[ConfigResource]
                               ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Each resource's configs by name; a broker's are asked of that broker."""
        async def ask(node: int, resources: list[ConfigResource]
                      ) -> ItemResults[ConfigResource, dict[str, ConfigEntry]]:
            request = dcq.DescribeConfigsRequest(resources=tuple(
                dcq.DescribeConfigsResource(resource_type=r.type, resource_name=r.name, configuration_keys=None)
                for r in resources))
            response = await self._router.send(node, DescribeConfigsResponse, lambda _: request)
            outcome: ItemResults[ConfigResource, dict[str, ConfigEntry]] = {}
            for result in response.results:
                resource = ConfigResource(ConfigResourceType(result.resource_type), result.resource_name)
                if result.error_code:
                    outcome[resource] = _error(result.error_code, result.error_message, f"{resource}")
                    continue
                outcome[resource] = {entry.name: ConfigEntry(
                    entry.name, entry.value, ConfigSource.from_wire(entry.config_source),
                    entry.is_default or entry.config_source == ConfigSource.DEFAULT_CONFIG,
                    entry.read_only, entry.is_sensitive) for entry in result.configs}
            return outcome

        return await self._router.batch(resources, lambda pending: self._router.per_node(by_resource_node(pending), ask),
                                 frozenset())

    async def incremental_alter_configs(self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
                                        validate_only: bool = False) -> None:
        """Apply SET / DELETE / APPEND / SUBTRACT operations to each resource's configs."""
        async def alter(node: int, resources: list[ConfigResource]) -> ItemResults[ConfigResource, None]:
            request = iacq.IncrementalAlterConfigsRequest(validate_only=validate_only, resources=tuple(
                iacq.AlterConfigsResource(resource_type=r.type, resource_name=r.name, configs=tuple(
                    iacq.AlterableConfig(name=op.name, config_operation=op.op, value=op.value)
                    for op in changes[r])) for r in resources))
            response = await self._router.send(node, IncrementalAlterConfigsResponse, lambda _: request)
            outcome: ItemResults[ConfigResource, None] = {}
            for result in response.responses:
                resource = ConfigResource(ConfigResourceType(result.resource_type), result.resource_name)
                outcome[resource] = (_error(result.error_code, result.error_message, f"{resource}")
                                     if result.error_code else None)
            return outcome

        await self._router.batch(changes, lambda pending: self._router.per_node(by_resource_node(pending), alter), frozenset())

    # -- consumer groups -----------------------------------------------------------------
    async def list_groups(self) -> list[GroupListing]:
        """Every group on every broker (each coordinator knows only its own)."""
        await self._router.metadata(None)

        async def ask(node: int, _: list[int]) -> ItemResults[int, list[GroupListing]]:
            response = await self._router.send(node, ListGroupsResponse, lambda _: ListGroupsRequest())
            if response.error_code:
                return {node: KafkaError(response.error_code, f"ListGroups on node {node}")}
            return {node: [GroupListing(g.group_id, g.protocol_type, g.group_state) for g in response.groups]}

        nodes = list(self._cluster.metadata.brokers)
        listed = await self._router.batch(nodes, lambda pending: self._router.per_node({n: [n] for n in pending}, ask),
                                   COORDINATOR_ERRORS)
        return sorted((g for groups in listed.values() for g in groups), key=lambda g: g.group_id)

    async def describe_groups(self, group_ids: Collection[str]) -> dict[str, GroupDescription]:
        """State, protocol and members (with their decoded assignments) of each group."""
        async def describe(group_id: str, node: int) -> GroupDescription:
            response = await self._router.send(node, DescribeGroupsResponse,
                                        lambda _: DescribeGroupsRequest(groups=(group_id,)))
            group = next((g for g in response.groups if g.group_id == group_id), None)
            if group is None:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"group {group_id!r} missing from the answer")
            raise_for(group.error_code, f"group {group_id!r}")
            consumer = group.protocol_type == "consumer"
            members = tuple(MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                decode_assignment(m.member_assignment) if consumer else ()) for m in group.members)
            return GroupDescription(group_id, group.group_state, group.protocol_type, group.protocol_data, members)

        return await self._router.gather(group_ids, lambda g: self._router.on_coordinator(g, lambda node: describe(g, node)))

    async def delete_groups(self, group_ids: Collection[str]) -> None:
        """Delete empty groups with their committed offsets (NON_EMPTY_GROUP otherwise)."""
        async def delete(group_id: str, node: int) -> None:
            response = await self._router.send(node, DeleteGroupsResponse,
                                        lambda _: DeleteGroupsRequest(groups_names=(group_id,)))
            result = next((r for r in response.results if r.group_id == group_id), None)
            if result is None:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"group {group_id!r} missing from the answer")
            raise_for(result.error_code, f"group {group_id!r}")

        await self._router.gather(group_ids, lambda g: self._router.on_coordinator(g, lambda node: delete(g, node)))

    async def list_consumer_group_offsets(self, group_id: str, partitions: Collection[TopicPartition] | None = None,
                                          *, require_stable: bool = False,
                                          ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all, or of ``partitions``); uncommitted ones are absent.

        ``require_stable`` (Java's ``ListConsumerGroupOffsetsOptions.requireStable``, v7+):
        a partition with a transactional commit pending raises UNSTABLE_OFFSET_COMMIT
        (retriable: ask again) instead of answering the offset committed before it."""
        by_topic = None if partitions is None else _by_topic(partitions)

        def build(version: int) -> Message:
            if version >= 8:  # KIP-709: groups batched
                topics = None if by_topic is None else tuple(
                    ofq.OffsetFetchRequestTopics(name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items())
                return ofq.OffsetFetchRequest(groups=(ofq.OffsetFetchRequestGroup(group_id=group_id, topics=topics),),
                                              require_stable=require_stable)
            old_topics = None if by_topic is None else tuple(
                ofq.OffsetFetchRequestTopic(name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items())
            return ofq.OffsetFetchRequest(group_id=group_id, topics=old_topics,
                                          require_stable=require_stable and version >= 7)

        async def fetch(node: int) -> dict[TopicPartition, OffsetAndMetadata]:
            # v2+: a null topic list means every topic the group committed
            response = await self._router.send(node, OffsetFetchResponse, build,
                                               versions=range(7, 10) if require_stable else range(2, 10))
            group = response.groups[0] if response.groups else response
            raise_for(group.error_code, f"group {group_id!r}")
            rows: list[tuple[str, OffsetFetchResponsePartition | OffsetFetchResponsePartitions]] = [
                (t.name, p) for t in group.topics for p in t.partitions]
            offsets: dict[TopicPartition, OffsetAndMetadata] = {}
            for topic, p in rows:
                raise_for(p.error_code, f"group {group_id!r} {topic}-{p.partition_index}")
                if p.committed_offset >= 0:
                    offsets[TopicPartition(topic, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.metadata or "",
                        p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None)
            return offsets

        return await self._router.on_coordinator(group_id, fetch)

    async def group_lag(self, group_id: str) -> dict[TopicPartition, Lag]:
        """Committed offset, end offset and their distance for each partition the group committed."""
        committed = await self.list_consumer_group_offsets(group_id)
        ends = await self.list_offsets(dict.fromkeys(committed, "latest"))
        return {tp: Lag(c.offset, ends[tp].offset, max(ends[tp].offset - c.offset, 0))
                for tp, c in sorted(committed.items())}

    async def alter_consumer_group_offsets(self, group_id: str,
                                           offsets: Mapping[TopicPartition, int | OffsetAndMetadata]) -> None:
        """Commit offsets for a group with no active members (as a reset tool does)."""
        by_topic: dict[str, list[ocq.OffsetCommitRequestPartition]] = defaultdict(list)
        for tp, value in offsets.items():
            value = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            by_topic[tp.topic].append(ocq.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=value.offset,
                committed_leader_epoch=-1 if value.leader_epoch is None else value.leader_epoch,
                committed_metadata=value.metadata))
        request = ocq.OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                                          topics=tuple(ocq.OffsetCommitRequestTopic(name=t, partitions=tuple(ps))
                                                       for t, ps in by_topic.items()))

        async def commit(node: int) -> None:
            response = await self._router.send(node, OffsetCommitResponse, lambda _: request, versions=range(2, 10))
            _raise_partition_errors({TopicPartition(t.name, p.partition_index): p.error_code
                                     for t in response.topics for p in t.partitions}, group_id)

        await self._router.on_coordinator(group_id, commit)

    async def delete_consumer_group_offsets(self, group_id: str, partitions: Collection[TopicPartition]) -> None:
        """Forget the group's committed offsets of ``partitions`` (not of subscribed topics)."""
        request = odq.OffsetDeleteRequest(group_id=group_id, topics=tuple(
            odq.OffsetDeleteRequestTopic(name=t, partitions=tuple(odq.OffsetDeleteRequestPartition(p) for p in ps))
            for t, ps in _by_topic(partitions).items()))

        async def delete(node: int) -> None:
            response = await self._router.send(node, OffsetDeleteResponse, lambda _: request)
            raise_for(response.error_code, f"group {group_id!r}")
            _raise_partition_errors({TopicPartition(t.name, p.partition_index): p.error_code
                                     for t in response.topics for p in t.partitions}, group_id)

        await self._router.on_coordinator(group_id, delete)

    # -- offsets and records -------------------------------------------------------------
    async def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec],
                           isolation_level: str = "read_uncommitted") -> dict[TopicPartition, ListOffsetsResult]:
        """Offsets by position ("earliest", "latest", "max-timestamp") or by timestamp (ms).

        For a timestamp, the offset is that of the first record at or after it, or -1
        when there is none.
        """
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolation_level {isolation_level!r} is not read_uncommitted or read_committed")
        timestamps = {TopicPartition(*tp): _SPEC_TIMESTAMPS[s] if isinstance(s, str) else s
                      for tp, s in specs.items()}

        def build(version: int, tps: list[TopicPartition]) -> Message:
            if version < 7 and any(timestamps[tp] == -3 for tp in tps):
                raise UnsupportedVersionError(f"max-timestamp needs ListOffsets v7; the broker chose v{version}")
            return loq.ListOffsetsRequest(
                replica_id=-1, isolation_level=int(isolation_level == "read_committed"),
                timeout_ms=self.config.request_timeout_ms if version >= 10 else 0,
                topics=tuple(loq.ListOffsetsTopic(name=t, partitions=tuple(
                    loq.ListOffsetsPartition(partition_index=p, timestamp=timestamps[TopicPartition(t, p)])
                    for p in ps)) for t, ps in _by_topic(tps).items()))

        async def ask(node: int, tps: list[TopicPartition]) -> ItemResults[TopicPartition, ListOffsetsResult]:
            response = await self._router.send(node, ListOffsetsResponse, lambda v: build(v, tps), versions=range(1, 11))
            return {TopicPartition(t.name, p.partition_index):
                    KafkaError(p.error_code, f"{t.name}-{p.partition_index}") if p.error_code
                    else ListOffsetsResult(p.offset, p.timestamp, p.leader_epoch)
                    for t in response.topics for p in t.partitions}

        return await self._router.on_leaders(timestamps, ask)

    async def delete_records(self, before: Mapping[TopicPartition, int],
                             timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """Delete each partition's records below the offset (-1: the high watermark); new low watermarks."""
        broker_timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        offsets = {TopicPartition(*tp): offset for tp, offset in before.items()}

        async def delete(node: int, tps: list[TopicPartition]) -> ItemResults[TopicPartition, int]:
            request = drq.DeleteRecordsRequest(timeout_ms=broker_timeout, topics=tuple(
                drq.DeleteRecordsTopic(name=t, partitions=tuple(
                    drq.DeleteRecordsPartition(partition_index=p, offset=offsets[TopicPartition(t, p)]) for p in ps))
                for t, ps in _by_topic(tps).items()))
            response = await self._router.send(node, DeleteRecordsResponse, lambda _: request,
                                        timeout_ms=broker_timeout + self.config.request_timeout_ms)
            return {TopicPartition(t.name, p.partition_index):
                    KafkaError(p.error_code, f"{t.name}-{p.partition_index}") if p.error_code else p.low_watermark
                    for t in response.topics for p in t.partitions}

        return await self._router.on_leaders(offsets, delete)


def _creatable(topic: NewTopic) -> ctq.CreatableTopic:
    return ctq.CreatableTopic(
        name=topic.name, num_partitions=topic.num_partitions, replication_factor=topic.replication_factor,
        assignments=tuple(ctq.CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(brokers))
                          for p, brokers in sorted(topic.replica_assignment.items())),
        configs=tuple(ctq.CreatableTopicConfig(name=k, value=v) for k, v in topic.configs.items()))


def _by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in partitions:
        by_topic[topic].append(partition)
    return {topic: sorted(ps) for topic, ps in by_topic.items()}


def _raise_partition_errors(codes: Mapping[TopicPartition, int], group_id: str) -> None:
    errors = {tp: KafkaError(code, f"group {group_id!r} {tp.topic}-{tp.partition}")
              for tp, code in codes.items() if code}
    coordinator = next((e for e in errors.values() if e.error_code in COORDINATOR_ERRORS), None)
    if coordinator is not None:
        raise coordinator  # the whole call goes to the coordinator again
    if errors:
        raise AdminBatchError(errors, {tp: None for tp, code in codes.items() if not code})
