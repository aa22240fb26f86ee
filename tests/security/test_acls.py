"""ACL authorization end to end: a broker process running the ACL authorizer, two SASL PLAIN
principals — ``User:alice``, granted what each API needs, and ``User:bob``, granted nothing —
and for every API the broker serves, alice's answer and bob's, exactly Kafka's (TOPIC 29,
GROUP 30, CLUSTER 31, TRANSACTIONAL_ID 53, or a filtered answer where Kafka filters).
Requests go raw through the codec; produce, consume and commit also with confluent-kafka.
Then the semantics through the wire: DENY over ALLOW, PREFIXED and ``*`` patterns, implied
Describe (and a DENY Read that does not deny it), super users, Metadata hiding a topic from
an all-topics answer but answering 29 for it by name (an absent one too, and not created).

One broker for the module (the ACL APIs' own details and ``allow.everyone.if.no.acl.found``
with a restart are in test_acl_apis.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode as E
from strom.protocol.message import Message
from strom.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from strom.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from strom.protocol.messages.alter_client_quotas_request import AlterClientQuotasRequest
from strom.protocol.messages.alter_client_quotas_request import EntityData as QuotaEntity
from strom.protocol.messages.alter_client_quotas_request import EntryData as QuotaEntry
from strom.protocol.messages.alter_client_quotas_request import OpData as QuotaOp
from strom.protocol.messages.alter_configs_request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from strom.protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from strom.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from strom.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from strom.protocol.messages.delete_groups_request import DeleteGroupsRequest
from strom.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from strom.protocol.messages.delete_topics_request import DeleteTopicsRequest
from strom.protocol.messages.describe_acls_request import DescribeAclsRequest
from strom.protocol.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from strom.protocol.messages.describe_cluster_request import DescribeClusterRequest
from strom.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from strom.protocol.messages.describe_groups_request import DescribeGroupsRequest
from strom.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from strom.protocol.messages.describe_producers_request import DescribeProducersRequest
from strom.protocol.messages.describe_producers_request import TopicRequest as ProducersTopic
from strom.protocol.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from strom.protocol.messages.describe_topic_partitions_request import (
    TopicRequest as PartitionsTopic,
)
from strom.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from strom.protocol.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from strom.protocol.messages.end_txn_request import EndTxnRequest
from strom.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.heartbeat_request import HeartbeatRequest
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig as IncrementalConfig,
)
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterConfigsResource as IncrementalResource,
)
from strom.protocol.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from strom.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from strom.protocol.messages.list_groups_request import ListGroupsRequest
from strom.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from strom.protocol.messages.list_transactions_request import ListTransactionsRequest
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from strom.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from strom.protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from strom.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from strom.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from strom.protocol.messages.sync_group_request import SyncGroupRequest
from strom.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from strom.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from strom.protocol.records import build_record_batch
from strom.security.acl.model import AclOperation as Op
from strom.security.acl.model import AclPermissionType, PatternType
from strom.security.acl.model import ResourceType as R
from tests.support.acl import acl_broker, allow, create_acls, create_topics, deny, request_as
from tests.support.sasl import SaslBroker

TOPIC, GROUP, TXN = "acl-t", "acl-g", "acl-tx"
JOINING = "acl-gj"  # the group membership requests' (a pending member there delays no consumer)
HIDDEN = "acl-hidden"  # a topic alice has no ACL on
TIMEOUT_S = 60.0
ALICE_ACLS = [
    *(allow("User:alice", op, R.TOPIC, TOPIC) for op in (Op.READ, Op.WRITE, Op.ALTER, Op.DESCRIBE_CONFIGS,
                                                           Op.ALTER_CONFIGS)),
    allow("User:alice", Op.DELETE, R.TOPIC, "acl-d", PatternType.PREFIXED),  # acl-del, acl-drop
    allow("User:alice", Op.CREATE, R.TOPIC, "acl-new-", PatternType.PREFIXED),
    allow("User:alice", Op.DESCRIBE, R.TOPIC, "acl-new-", PatternType.PREFIXED),
    allow("User:alice", Op.READ, R.GROUP, "acl-g", PatternType.PREFIXED),  # acl-g, acl-gj, acl-gdel-*
    allow("User:alice", Op.DELETE, R.GROUP, "acl-gdel", PatternType.PREFIXED),
    allow("User:alice", Op.WRITE, R.TRANSACTIONAL_ID, TXN),
    *(allow("User:alice", op, R.CLUSTER, "kafka-cluster") for op in (Op.DESCRIBE, Op.ALTER, Op.CLUSTER_ACTION,
                                                                     Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)),
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    with acl_broker(tmp_path_factory.mktemp("acls") / "data") as running:
        create_topics(running, [TOPIC, HIDDEN, "acl-del", "acl-drop", "acl-deny", "acl-implied", "acl-open"])
        assert create_acls(running, ALICE_ACLS) == [0] * len(ALICE_ACLS)
        for key, key_type in ((GROUP, 0), (TXN, 1)):  # the internal topics, made once as admin
            found = request_as(running, "admin", FindCoordinatorRequest(coordinator_keys=(key,), key_type=key_type), 4)
            assert found.coordinators[0].error_code == 0  # type: ignore[attr-defined]
        yield running


# -- the per-API matrix ---------------------------------------------------------------------------
def _batch(producer_id: int = -1) -> bytes:
    return bytes(build_record_batch([(None, b"v", (), None)], producer_id=producer_id))


def _partition_errors(response: Any, topics: str = "topics", partitions: str = "partitions") -> list[int]:
    return [p.error_code for t in getattr(response, topics) for p in getattr(t, partitions)]


@dataclass(frozen=True)
class Case:
    api: str
    version: int
    request: Callable[[], Message]
    codes: Callable[[Any], list[int]]
    alice: list[int]  # alice's answer, exactly
    bob: list[int]


def _txn(response: Any) -> list[int]:
    return [response.error_code]


CASES = [
    Case("Produce", 9, lambda: ProduceRequest(acks=1, timeout_ms=5000, topic_data=(
        TopicProduceData(TOPIC, (PartitionProduceData(0, _batch()),)),)),
         lambda r: _partition_errors(r, "responses", "partition_responses"), [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("Fetch", 12, lambda: FetchRequest(max_wait_ms=0, topics=(FetchTopic(TOPIC, partitions=(
        FetchPartition(0, fetch_offset=0, partition_max_bytes=1024),)),)),
         lambda r: _partition_errors(r, "responses"), [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("ListOffsets", 7, lambda: ListOffsetsRequest(replica_id=-1, topics=(ListOffsetsTopic(TOPIC, (
        ListOffsetsPartition(0, timestamp=-1),)),)),
         _partition_errors, [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("Metadata", 12, lambda: MetadataRequest(topics=(MetadataRequestTopic(name=TOPIC),)),
         lambda r: [t.error_code for t in r.topics], [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("OffsetForLeaderEpoch", 4, lambda: OffsetForLeaderEpochRequest(topics=(OffsetForLeaderTopic(TOPIC, (
        OffsetForLeaderPartition(0, leader_epoch=0),)),)),
         _partition_errors, [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("DescribeProducers", 0, lambda: DescribeProducersRequest((ProducersTopic(TOPIC, (0,)),)),
         _partition_errors, [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("DeleteRecords", 2, lambda: DeleteRecordsRequest((DeleteRecordsTopic("acl-del", (
        DeleteRecordsPartition(0, 0),)),), timeout_ms=5000),
         _partition_errors, [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("CreatePartitions", 3, lambda: CreatePartitionsRequest((CreatePartitionsTopic(TOPIC, 2, None),),
                                                                timeout_ms=5000, validate_only=True),
         lambda r: [t.error_code for t in r.results], [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("CreateTopics", 7, lambda: CreateTopicsRequest((CreatableTopic("acl-new-" + uuid.uuid4().hex[:6], 1, 1),),
                                                        validate_only=True),
         lambda r: [t.error_code for t in r.topics], [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("DescribeConfigs topic", 4, lambda: DescribeConfigsRequest((DescribeConfigsResource(2, TOPIC, None),)),
         lambda r: [x.error_code for x in r.results], [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("DescribeConfigs broker", 4, lambda: DescribeConfigsRequest((DescribeConfigsResource(4, "1", None),)),
         lambda r: [x.error_code for x in r.results], [0], [E.CLUSTER_AUTHORIZATION_FAILED]),
    Case("AlterConfigs", 2, lambda: AlterConfigsRequest((AlterConfigsResource(2, TOPIC, (
        AlterableConfig("retention.ms", "86400000"),)),), validate_only=True),
         lambda r: [x.error_code for x in r.responses], [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("IncrementalAlterConfigs", 1, lambda: IncrementalAlterConfigsRequest((IncrementalResource(2, TOPIC, (
        IncrementalConfig("retention.ms", 0, "86400000"),)), IncrementalResource(4, "", (
            IncrementalConfig("log.cleaner.backoff.ms", 0, "15000"),))), validate_only=True),
         lambda r: [x.error_code for x in r.responses], [0, 0],
         [E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]),
    Case("DescribeTopicPartitions", 0, lambda: DescribeTopicPartitionsRequest((PartitionsTopic(TOPIC),)),
         lambda r: [t.error_code for t in r.topics], [0], [E.TOPIC_AUTHORIZATION_FAILED]),
    Case("OffsetCommit", 8, lambda: OffsetCommitRequest(GROUP, topics=(OffsetCommitRequestTopic(TOPIC, (
        OffsetCommitRequestPartition(0, 0),)), OffsetCommitRequestTopic(HIDDEN, (OffsetCommitRequestPartition(0, 0),)))),
         _partition_errors, [0, E.TOPIC_AUTHORIZATION_FAILED], [E.GROUP_AUTHORIZATION_FAILED] * 2),
    Case("OffsetFetch", 7, lambda: OffsetFetchRequest(GROUP, (OffsetFetchRequestTopic(TOPIC, (0,)),
                                                              OffsetFetchRequestTopic(HIDDEN, (0,)))),
         lambda r: [r.error_code, *_partition_errors(r)], [0, 0, E.TOPIC_AUTHORIZATION_FAILED],
         [E.GROUP_AUTHORIZATION_FAILED]),
    Case("FindCoordinator group", 4, lambda: FindCoordinatorRequest(coordinator_keys=(GROUP,)),
         lambda r: [c.error_code for c in r.coordinators], [0], [E.GROUP_AUTHORIZATION_FAILED]),
    Case("FindCoordinator transaction", 4, lambda: FindCoordinatorRequest(coordinator_keys=(TXN,), key_type=1),
         lambda r: [c.error_code for c in r.coordinators], [0], [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]),
    Case("JoinGroup", 5, lambda: JoinGroupRequest(JOINING, 10000, 10000, "", None, "consumer", (
        JoinGroupRequestProtocol("range", b""),)),
         _txn, [E.MEMBER_ID_REQUIRED], [E.GROUP_AUTHORIZATION_FAILED]),
    Case("SyncGroup", 3, lambda: SyncGroupRequest(JOINING, 1, "nobody"),
         _txn, [E.UNKNOWN_MEMBER_ID], [E.GROUP_AUTHORIZATION_FAILED]),
    Case("Heartbeat", 3, lambda: HeartbeatRequest(JOINING, 1, "nobody"),
         _txn, [E.UNKNOWN_MEMBER_ID], [E.GROUP_AUTHORIZATION_FAILED]),
    Case("LeaveGroup", 3, lambda: LeaveGroupRequest(JOINING, members=(MemberIdentity("nobody"),)),
         lambda r: [r.error_code, *(m.error_code for m in r.members)], [0, E.UNKNOWN_MEMBER_ID],
         [E.GROUP_AUTHORIZATION_FAILED]),
    Case("DescribeGroups", 5, lambda: DescribeGroupsRequest((GROUP,)),
         lambda r: [g.error_code for g in r.groups], [0], [E.GROUP_AUTHORIZATION_FAILED]),
    Case("InitProducerId transactional", 4, lambda: InitProducerIdRequest(TXN, 60000),
         _txn, [0], [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]),
    Case("InitProducerId idempotent", 4, lambda: InitProducerIdRequest(None, 60000),
         _txn, [0], [E.CLUSTER_AUTHORIZATION_FAILED]),
    Case("AddPartitionsToTxn", 3, lambda: AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TXN, v3_and_below_producer_id=999_999, v3_and_below_producer_epoch=0,
        v3_and_below_topics=(AddPartitionsToTxnTopic(TOPIC, (0,)),)),
         lambda r: [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition],
         [E.INVALID_PRODUCER_ID_MAPPING], [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]),
    Case("AddOffsetsToTxn", 3, lambda: AddOffsetsToTxnRequest(TXN, 999_999, 0, GROUP),
         _txn, [E.INVALID_PRODUCER_ID_MAPPING], [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]),
    Case("EndTxn", 3, lambda: EndTxnRequest(TXN, 999_999, 0, False),
         _txn, [E.INVALID_PRODUCER_ID_MAPPING], [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]),
    Case("TxnOffsetCommit", 3, lambda: TxnOffsetCommitRequest(TXN, GROUP, 999_999, 0, topics=(
        TxnOffsetCommitRequestTopic(HIDDEN, (TxnOffsetCommitRequestPartition(0, 0),)),)),
         _partition_errors, [E.TOPIC_AUTHORIZATION_FAILED], [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]),
    Case("WriteTxnMarkers", 1, lambda: WriteTxnMarkersRequest((WritableTxnMarker(999_998, 0, False, (
        WritableTxnMarkerTopic(TOPIC, (0,)),), 0),)),
         lambda r: [p.error_code for m in r.markers for t in m.topics for p in t.partitions],
         [0], [E.CLUSTER_AUTHORIZATION_FAILED]),
    Case("DescribeTransactions", 0, lambda: DescribeTransactionsRequest((TXN,)),
         lambda r: [s.error_code for s in r.transaction_states], [0], [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]),
    Case("DescribeAcls", 3, lambda: DescribeAclsRequest(1, None, 1, None, None, 1, 1),
         _txn, [0], [E.CLUSTER_AUTHORIZATION_FAILED]),
    Case("CreateAcls", 3, lambda: CreateAclsRequest((AclCreation(2, "acl-made", 3, "User:carol", "*", 3, 3),)),
         lambda r: [x.error_code for x in r.results], [0], [E.CLUSTER_AUTHORIZATION_FAILED]),
    Case("DeleteAcls", 3, lambda: DeleteAclsRequest((DeleteAclsFilter(2, "acl-made", 3, None, None, 1, 1),)),
         lambda r: [x.error_code for x in r.filter_results], [0], [E.CLUSTER_AUTHORIZATION_FAILED]),
    Case("DescribeUserScramCredentials", 0, lambda: DescribeUserScramCredentialsRequest(None),
         _txn, [0], [E.CLUSTER_AUTHORIZATION_FAILED]),
    Case("DescribeClientQuotas", 1, lambda: DescribeClientQuotasRequest(()),
         _txn, [0], [E.CLUSTER_AUTHORIZATION_FAILED]),
    Case("AlterClientQuotas", 1, lambda: AlterClientQuotasRequest((QuotaEntry(
        (QuotaEntity("client-id", "acl-app"),), (QuotaOp("producer_byte_rate", 1048576.0, False),)),),
        validate_only=True),
         lambda r: [e.error_code for e in r.entries], [0], [E.CLUSTER_AUTHORIZATION_FAILED]),
    Case("DescribeLogDirs", 4, lambda: DescribeLogDirsRequest(None),
         lambda r: [r.error_code, len(r.results)], [0, 1], [E.CLUSTER_AUTHORIZATION_FAILED, 0]),
    Case("ApiVersions", 3, lambda: ApiVersionsRequest("acl-test", "1"), _txn, [0], [0]),  # never checked
]


@pytest.mark.parametrize("case", CASES, ids=[case.api for case in CASES])
def test_each_api_allowed_and_denied(broker: SaslBroker, case: Case) -> None:
    assert case.codes(request_as(broker, "bob", case.request(), case.version)) == case.bob
    assert case.codes(request_as(broker, "alice", case.request(), case.version)) == case.alice


def test_deleting_topics(broker: SaslBroker) -> None:
    """DeleteTopics needs Delete on the topic (PREFIXED "acl-d" for alice); bob is refused and
    the topic stays."""
    def delete(user: str) -> list[int]:
        response = request_as(broker, user, DeleteTopicsRequest(topic_names=("acl-drop",), timeout_ms=5000), 5)
        return [t.error_code for t in response.responses]  # type: ignore[attr-defined]
    assert delete("bob") == [E.TOPIC_AUTHORIZATION_FAILED]
    assert delete("alice") == [0]
    assert delete("alice") == [E.UNKNOWN_TOPIC_OR_PARTITION]


def test_deleting_offsets_and_groups(broker: SaslBroker) -> None:
    """OffsetDelete needs Delete on the group and Read on the topic, DeleteGroups Delete on the
    group (alice: PREFIXED "acl-gdel")."""
    group = "acl-gdel-" + uuid.uuid4().hex[:6]
    commit = OffsetCommitRequest(group, topics=(OffsetCommitRequestTopic(TOPIC, (OffsetCommitRequestPartition(0, 0),)),))
    assert _partition_errors(request_as(broker, "alice", commit, 8)) == [0]
    delete_offsets = OffsetDeleteRequest(group, (OffsetDeleteRequestTopic(TOPIC, (OffsetDeleteRequestPartition(0),)),
                                                 OffsetDeleteRequestTopic(HIDDEN, (OffsetDeleteRequestPartition(0),))))
    refused: Any = request_as(broker, "bob", delete_offsets, 0)
    assert (refused.error_code, refused.topics) == (E.GROUP_AUTHORIZATION_FAILED, ())
    deleted: Any = request_as(broker, "alice", delete_offsets, 0)
    assert [deleted.error_code, *_partition_errors(deleted)] == [0, 0, E.TOPIC_AUTHORIZATION_FAILED]

    def delete_group(user: str) -> list[int]:
        response: Any = request_as(broker, user, DeleteGroupsRequest((group,)), 2)
        return [result.error_code for result in response.results]
    assert delete_group("bob") == [E.GROUP_AUTHORIZATION_FAILED]
    assert delete_group("alice") == [0]
    assert delete_group("alice") == [E.GROUP_ID_NOT_FOUND]


def test_filtered_listings(broker: SaslBroker) -> None:
    """ListGroups, ListTransactions and Metadata for all topics never refuse: they leave out what
    the principal may not Describe (alice Describes the cluster, so ListGroups lists every group)."""
    commit = OffsetCommitRequest(GROUP, topics=(OffsetCommitRequestTopic(TOPIC, (OffsetCommitRequestPartition(0, 0),)),))
    assert _partition_errors(request_as(broker, "alice", commit, 8)) == [0]
    assert _txn(request_as(broker, "alice", InitProducerIdRequest(TXN, 60000), 4)) == [0]

    def listed(user: str) -> tuple[set[str], set[str], set[str]]:
        groups = request_as(broker, user, ListGroupsRequest(), 4)
        transactions = request_as(broker, user, ListTransactionsRequest(), 1)
        metadata = request_as(broker, user, MetadataRequest(topics=None), 12)
        assert groups.error_code == transactions.error_code == 0  # type: ignore[attr-defined]
        return ({g.group_id for g in groups.groups},  # type: ignore[attr-defined]
                {t.transactional_id for t in transactions.transaction_states},  # type: ignore[attr-defined]
                {t.name for t in metadata.topics})  # type: ignore[attr-defined]
    groups, transactions, topics = listed("alice")
    assert GROUP in groups and TXN in transactions
    assert TOPIC in topics and HIDDEN not in topics and "__consumer_offsets" not in topics
    bob_groups, bob_transactions, bob_topics = listed("bob")
    assert (bob_groups, bob_transactions) == (set(), set()) and not bob_topics & {TOPIC, HIDDEN, "__consumer_offsets"}
    admin_topics = listed("admin")[2]
    assert {TOPIC, HIDDEN, "__consumer_offsets"} <= admin_topics  # a super user sees everything


def test_metadata_answers_29_by_name_whether_the_topic_exists_or_not(broker: SaslBroker) -> None:
    absent = "acl-absent-" + uuid.uuid4().hex[:6]
    request = MetadataRequest(topics=(MetadataRequestTopic(name=HIDDEN), MetadataRequestTopic(name=absent)),
                              allow_auto_topic_creation=True, include_topic_authorized_operations=True)
    response: Any = request_as(broker, "alice", request, 12)
    assert sorted((t.name, t.error_code, t.partitions) for t in response.topics) == sorted(
        [(HIDDEN, E.TOPIC_AUTHORIZATION_FAILED, ()), (absent, E.TOPIC_AUTHORIZATION_FAILED, ())])
    assert all(t.topic_id == uuid.UUID(int=0) for t in response.topics)
    as_admin: Any = request_as(broker, "admin", MetadataRequest(topics=(MetadataRequestTopic(name=absent),),
                                                                allow_auto_topic_creation=False), 12)
    assert as_admin.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION  # not created


def test_metadata_auto_creates_only_with_create(broker: SaslBroker) -> None:
    """alice may Describe and Create "acl-new-*" (PREFIXED), so asking for one creates it; bob
    may do neither and is answered 29."""
    name = "acl-new-" + uuid.uuid4().hex[:6]
    request = MetadataRequest(topics=(MetadataRequestTopic(name=name),), allow_auto_topic_creation=True,
                              include_topic_authorized_operations=True, include_cluster_authorized_operations=True)
    assert [t.error_code for t in request_as(broker, "bob", request, 10).topics] == [  # type: ignore[attr-defined]
        E.TOPIC_AUTHORIZATION_FAILED]
    response: Any = request_as(broker, "alice", request, 10)
    assert [(t.name, t.error_code, len(t.partitions)) for t in response.topics] == [(name, 0, 1)]
    assert response.topics[0].topic_authorized_operations == (1 << Op.CREATE) | (1 << Op.DESCRIBE)
    cluster_ops = {Op.DESCRIBE, Op.ALTER, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
    assert response.cluster_authorized_operations == sum(1 << op for op in cluster_ops)
    cluster: Any = request_as(broker, "bob", DescribeClusterRequest(include_cluster_authorized_operations=True), 1)
    assert (cluster.error_code, cluster.cluster_authorized_operations) == (0, 0)  # Kafka: 0, no error


def _describable(broker: SaslBroker, user: str | None, topic: str) -> int:
    response: Any = request_as(broker, user, MetadataRequest(topics=(MetadataRequestTopic(name=topic),)), 12)
    return int(response.topics[0].error_code)


def _readable(broker: SaslBroker, user: str | None, topic: str) -> int:
    response: Any = request_as(broker, user, FetchRequest(max_wait_ms=0, topics=(FetchTopic(topic, partitions=(
        FetchPartition(0, fetch_offset=0, partition_max_bytes=1024),)),)), 12)
    return int(response.responses[0].partitions[0].error_code)


def test_patterns_and_precedence(broker: SaslBroker) -> None:
    acls = [
        # DENY beats ALLOW: everyone may read acl-deny, but not dave
        allow("User:*", Op.READ, R.TOPIC, "acl-deny"), deny("User:dave", Op.READ, R.TOPIC, "acl-deny"),
        # implied Describe: carol may do ALL on acl-implied but not Read; Describe stays allowed
        allow("User:carol", Op.ALL, R.TOPIC, "acl-implied"), deny("User:carol", Op.READ, R.TOPIC, "acl-implied"),
        # the wildcard resource: carol may Describe every topic
        allow("User:carol", Op.DESCRIBE, R.TOPIC, "*"),
        # the wildcard principal on one topic
        allow("User:*", Op.DESCRIBE, R.TOPIC, "acl-open"),
    ]
    assert create_acls(broker, acls) == [0] * len(acls)
    assert _readable(broker, "carol", "acl-deny") == 0
    assert _readable(broker, "dave", "acl-deny") == E.TOPIC_AUTHORIZATION_FAILED
    assert _describable(broker, "dave", "acl-deny") == 0  # Read implies Describe, and only Read is denied
    assert _readable(broker, "carol", "acl-implied") == E.TOPIC_AUTHORIZATION_FAILED
    assert _describable(broker, "carol", "acl-implied") == 0
    assert _describable(broker, "carol", HIDDEN) == 0  # through "*"
    assert _describable(broker, "dave", HIDDEN) == E.TOPIC_AUTHORIZATION_FAILED
    assert _describable(broker, "dave", "acl-open") == 0  # through User:*
    assert _describable(broker, "bob", "acl-open") == 0


def test_hosts(broker: SaslBroker) -> None:
    """An ACL's host is the client's IP (the connection's "/127.0.0.1" without its slash) or "*"."""
    create_topics(broker, ["acl-host"])
    made = CreateAclsRequest((
        AclCreation(R.TOPIC, "acl-host", PatternType.LITERAL, "User:dave", "127.0.0.1", Op.DESCRIBE,
                    AclPermissionType.ALLOW),
        AclCreation(R.TOPIC, "acl-host", PatternType.LITERAL, "User:carol", "10.9.9.9", Op.DESCRIBE,
                    AclPermissionType.ALLOW),
        AclCreation(R.TOPIC, "acl-host", PatternType.LITERAL, "User:carol", "127.0.0.1", Op.ALL,
                    AclPermissionType.DENY)))
    assert [r.error_code for r in request_as(broker, "admin", made, 3).results] == [0, 0, 0]  # type: ignore[attr-defined]
    assert _describable(broker, "dave", "acl-host") == 0
    # carol: allowed from another host only, and denied from this one (her "*" Describe does not help)
    assert _describable(broker, "carol", "acl-host") == E.TOPIC_AUTHORIZATION_FAILED


def test_super_users_and_anonymous(broker: SaslBroker) -> None:
    """admin (super.users) passes every check with no ACL; the PLAINTEXT listener's User:ANONYMOUS
    is a principal like another: nothing without ACLs, what its ACLs allow with them."""
    assert _readable(broker, "admin", HIDDEN) == 0
    assert _describable(broker, None, HIDDEN) == E.TOPIC_AUTHORIZATION_FAILED
    assert create_acls(broker, [allow("User:ANONYMOUS", Op.DESCRIBE, R.TOPIC, HIDDEN)]) == [0]
    assert _describable(broker, None, HIDDEN) == 0
    assert _readable(broker, None, HIDDEN) == E.TOPIC_AUTHORIZATION_FAILED
    made = CreateAclsRequest((AclCreation(2, "x", 3, "User:bob", "*", 3, 3),))
    assert [r.error_code for r in request_as(broker, None, made, 3).results] == [  # type: ignore[attr-defined]
        E.CLUSTER_AUTHORIZATION_FAILED]


# -- real clients ---------------------------------------------------------------------------------
def _confluent(broker: SaslBroker, user: str, **extra: object) -> dict[str, object]:
    from tests.support.acl import USERS
    return {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user], **extra}


def test_confluent_kafka_produce_consume_commit(broker: SaslBroker) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    outcomes: list[tuple[str, int | None]] = []

    def delivered(user: str) -> Callable[[Any, Any], None]:
        return lambda error, _message: outcomes.append((user, None if error is None else error.code()))

    for user in ("alice", "bob"):
        idempotent = user == "alice"  # InitProducerId allowed by her Write on a topic (KIP-679)
        producer = Producer(_confluent(broker, user, **{"enable.idempotence": idempotent, "message.timeout.ms": 20000}))
        for value in range(3):
            producer.produce(TOPIC, f"{user}-{value}".encode(), on_delivery=delivered(user))
        assert producer.flush(TIMEOUT_S) == 0
    assert outcomes[:3] == [("alice", None)] * 3
    assert outcomes[3:] == [("bob", KafkaError.TOPIC_AUTHORIZATION_FAILED)] * 3

    consumer = Consumer(_confluent(broker, "alice", **{"group.id": GROUP, "auto.offset.reset": "earliest",
                                                       "enable.auto.commit": False}))
    consumer.subscribe([TOPIC])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while not any(v.startswith(b"alice-2") for v in values) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    assert [v for v in values if v.startswith(b"alice")] == [b"alice-0", b"alice-1", b"alice-2"]
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(TOPIC, 0)], timeout=TIMEOUT_S)
    assert committed[0].offset > 0
    consumer.close()

    refused = Consumer(_confluent(broker, "bob", **{"group.id": GROUP, "auto.offset.reset": "earliest"}))
    refused.subscribe([TOPIC])
    error_code = None
    deadline = time.monotonic() + TIMEOUT_S
    while error_code is None and time.monotonic() < deadline:
        try:
            message = refused.poll(0.5)
        except KafkaException as exc:
            error_code = exc.args[0].code()
            break
        if message is not None and message.error() is not None:
            error_code = message.error().code()
    refused.close()
    assert error_code in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)


def test_acls_are_kept_with_kafkas_names(broker: SaslBroker) -> None:
    """What alice's ACLs look like through DescribeAcls (MATCH finds the literal, prefixed and
    wildcard patterns that apply to a name)."""
    response: Any = request_as(broker, "admin", DescribeAclsRequest(
        2, "acl-drop", PatternType.MATCH, "User:alice", None, Op.ANY, AclPermissionType.ANY), 3)
    assert response.error_code == 0
    assert [(r.resource_name, r.pattern_type, [(a.principal, a.operation, a.permission_type) for a in r.acls])
            for r in response.resources] == [("acl-d", PatternType.PREFIXED, [("User:alice", Op.DELETE,
                                                                             AclPermissionType.ALLOW)])]
