"""The broker: its parts, its lifecycle, and the dispatch of one request to its handler.

``Broker`` owns the storage (``LogManager``), the hosted partitions and the requests
waiting on them (``ReplicaManager``), the topic table handlers read (``MetadataCache``)
and the one component that changes it (``AdminManager``), the group and transaction
coordinators, the periodic work Kafka's scheduler does
(retention, ``flush.ms``, checkpoints) and the compaction threads (``LogCleaner``).
``handle`` turns one request frame into the response buffers; the network layer (``server``) only moves bytes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from strom.broker import request_context
from strom.broker.admin_manager import AdminManager, TopicAdmin
from strom.broker.authorizer import build_authorizer, start_cluster_acls
from strom.broker.config import BrokerConfig
from strom.broker.connection_errors import CloseConnection
from strom.broker.dynamic_config import DynamicBrokerConfig, FileConfigStore
from strom.broker.fetch_session import FetchSessionCache
from strom.broker.group.coordinator import GroupCoordinator
from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.broker.handlers import (
    API_VERSIONS,
    CLUSTER_API_VERSIONS,
    CLUSTER_HANDLERS,
    HANDLERS,
    Handler,
)
from strom.broker.metadata_cache import MetadataCache
from strom.broker.periodic import every, isr_expiration_interval_ms
from strom.broker.producer_ids import ProducerIdManager, ProducerIdSource
from strom.broker.quota import REQUEST_QUOTA_EXEMPT, ClientQuotas, FileQuotaStore
from strom.broker.replica_manager import ReplicaManager
from strom.broker.transaction.marker_writer import BrokerMarkerWriter
from strom.broker.transaction.transaction_coordinator import TransactionCoordinator
from strom.broker.transaction.verification import TransactionVerifier
from strom.compaction.log_cleaner import CleanerConfig, LogCleaner
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.headers import UnsupportedRequestError, decode_request, encode_response
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.api_versions_response import ApiVersionsResponse
from strom.protocol.primitives import Records
from strom.protocol.topic_partition import TopicPartition
from strom.storage import meta_properties
from strom.storage.errors import KafkaStorageError
from strom.storage.log_manager import LogManager
from strom.storage.producer_state import ProducerStateManagerConfig

if TYPE_CHECKING:
    from strom.broker.alter_partition_manager import AlterPartitionManager
    from strom.broker.transaction.add_partitions_manager import AddPartitionsToTxnManager
    from strom.cluster.zk_broker import ZkBroker
    from strom.metrics.broker_metrics import BrokerMetrics
    from strom.metrics.http import MetricsServer
    from strom.protocol.messages.alter_partition_request import AlterPartitionRequest
    from strom.protocol.messages.alter_partition_response import AlterPartitionResponse
    from strom.security.acl.authorizer import AclAuthorizer
    from strom.security.authenticator import Authenticator

logger = logging.getLogger(__name__)

# How long a broker whose log dir failed serves on before halting: the answers already made
# (the producer's KAFKA_STORAGE_ERROR) go out first, as Kafka's failure handler thread halts
# after the request thread has answered.
LOG_DIR_FAILURE_HALT_DELAY_S = 1.0


def _halt_on_log_dir_failure(reason: str) -> None:
    """Kafka's ``LogManager.handleLogDirFailure`` once no log dir is left: a cluster broker
    has one, so it halts (exit code 1, no shutdown: no clean-shutdown marker on a disk that
    failed, the next start recovers). Its ZooKeeper session ends as a crashed broker's does,
    and the controller moves leadership to in-sync followers; a broker serving on would keep
    leading partitions it cannot append to."""
    logger.critical("the log dir failed (%s): halting, as no log dir is left", reason)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        os._exit(1)
    loop.call_later(LOG_DIR_FAILURE_HALT_DELAY_S, os._exit, 1)


UNKNOWN_BROKER_EPOCH = -1  # Kafka's AbstractControlRequest.UNKNOWN_BROKER_EPOCH



@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


class ActiveController(Protocol):
    """What the broker asks of the cluster's controller component (strom.cluster wires it)."""

    @property
    def is_active(self) -> bool: ...

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int
                                  ) -> tuple[ErrorCode, tuple[TopicPartition, ...]]:
        """ControlledShutdown (7): (error, the partitions the broker still leads)."""
        ...

    async def alter_partition(self, request: AlterPartitionRequest, version: int) -> AlterPartitionResponse:
        """AlterPartition (56): a partition leader's ISR change, answered."""
        ...


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log_manager = LogManager(
            config.data_dir,
            config.log,
            producer_state_config=ProducerStateManagerConfig(config.producer_id_expiration_ms),
            hw_follows_leo=False,  # each Partition moves its high watermark (ISR's lowest LEO)
        )
        self.log_cleaner = LogCleaner(self.log_manager, CleanerConfig(
            enable=config.log_cleaner_enable, threads=config.log_cleaner_threads,
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
            io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
            backoff_ms=config.log_cleaner_backoff_ms))
        self.dynamic_config = DynamicBrokerConfig(config, FileConfigStore(config.data_dir), self.log_manager,
                                                  self.log_cleaner)
        self.metadata = MetadataCache()
        # Listeners (strom.broker.listeners): the inter-broker one is what replica fetchers,
        # the controller and ISR changes use; the endpoints are set when the server binds.
        self.listener_settings = config.listener_settings()
        self.inter_broker_listener: str = self.listener_settings.inter_broker_listener
        self.advertised_endpoints: dict[str, Endpoint] = {}
        self.replica_manager = ReplicaManager(self.log_manager, config.node_id, self.metadata)
        # Cluster mode: leaders propose ISR changes to the controller (KIP-497); none on one node.
        self.alter_partition_manager: AlterPartitionManager | None = None
        if config.cluster_mode:
            from strom.broker.alter_partition_manager import AlterPartitionManager

            self.alter_partition_manager = AlterPartitionManager.for_broker(self)
            self.replica_manager.enable_isr_changes(self.alter_partition_manager, config.replica_lag_time_max_ms)
            from strom.broker.replica_fetcher_manager import ReplicaFetcherManager

            # Followers copy their leaders' logs on the inter-broker listener.
            self.replica_manager.replica_fetcher_manager = ReplicaFetcherManager(
                self.replica_manager, self.metadata, config, config.node_id, lambda: self.broker_epoch,
                listener_name=self.inter_broker_listener)
            self.replica_manager.log_dir_failure_handler = _halt_on_log_dir_failure
        # A cluster's broker: its ZooKeeper half (strom.cluster, imported only then) places
        # topics in ZooKeeper and hands out producer ids from ZooKeeper's blocks.
        self.cluster: ZkBroker | None = None
        self.admin_manager: TopicAdmin
        self.producer_ids: ProducerIdSource
        if config.cluster_mode:
            from strom.cluster.zk_broker import ZkBroker

            self.cluster = ZkBroker(self)
            self.admin_manager = self.cluster.admin_manager
            self.producer_ids = self.cluster.producer_ids
        else:
            self.admin_manager = AdminManager(self.metadata, self.replica_manager, self.log_manager)
            self.producer_ids = ProducerIdManager(config.data_dir)  # one node: a file
        self.group_coordinator = GroupCoordinator.build(config, self.metadata, self.admin_manager, self.replica_manager)
        self.transaction_coordinator = TransactionCoordinator.build(
            config, self.metadata, self.admin_manager, self.replica_manager, self.producer_ids,
            BrokerMarkerWriter(self))
        # KIP-890 part 1: transactional Produce and TxnOffsetCommit verified with the coordinator.
        self.transaction_verifier = TransactionVerifier(
            self.transaction_coordinator, self.replica_manager,
            lambda group_id: (OFFSETS_TOPIC, self.group_coordinator.manager.partition_for(group_id)),
            enabled=config.transaction_partition_verification_enable, remote=self._verification_sender(config))
        if self.transaction_verifier.enabled:
            self.group_coordinator.txn_offset_verifier = self.transaction_verifier.verify_txn_offset_commit
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        # Client quotas (issue 20, strom.broker.quota): with none configured, a test per request.
        self.quotas = ClientQuotas(config, FileQuotaStore(config.data_dir))
        # ACLs (issue 20, strom.security.acl): None unless authorizer.class.name is set; while None
        # a handler's authorization costs one attribute test.
        self.authorizer: AclAuthorizer | None = build_authorizer(config)
        self.cluster_id = config.cluster_id
        # A cluster's broker also serves the controller's requests (LeaderAndIsr, StopReplica, UpdateMetadata).
        cluster = config.cluster_mode
        self.handlers: Mapping[int, Handler] = CLUSTER_HANDLERS if cluster else HANDLERS
        self.api_versions = CLUSTER_API_VERSIONS if cluster else API_VERSIONS  # what ApiVersions answers
        # Cluster mode: the registration znode's czxid (KIP-380; control requests carrying an
        # older one are refused) and the controller component, both set by strom.cluster.
        self.broker_epoch = -1
        self.controller: ActiveController | None = self.cluster.controller if self.cluster is not None else None
        self.advertised: Endpoint = Endpoint("127.0.0.1", 9092)  # the first advertised endpoint (the clients')
        # SASL listeners (issue 20, strom.security.sasl): their settings and the SCRAM credentials.
        from strom.security.sasl.server_authenticator import SaslAuthenticators

        self.sasl = SaslAuthenticators.for_broker(self)
        self._tasks: list[asyncio.Task[None]] = []
        # Prometheus metrics (issue 21, strom.metrics): None unless metrics.listener is set (then its
        # socket is bound here); while None the request path pays one attribute test.
        self.metrics: BrokerMetrics | None = None
        self.metrics_server: MetricsServer | None = None
        if config.metrics_listener:
            from strom.metrics.broker_wiring import broker_metrics

            self.metrics, self.metrics_server = broker_metrics(self)

    # -- lifecycle -----------------------------------------------------------------------
    def startup(self) -> None:
        """Open (and recover) the logs and the topic table; no sockets yet."""
        self.dynamic_config.load()  # dynamic topic defaults first: the logs load with them
        self.log_manager.startup()
        self.log_cleaner.startup()
        if not self.config.cluster_mode:  # a cluster's broker hosts what the controller tells it to
            self.replica_manager.startup()
        self.admin_manager.load()
        self.quotas.load()
        self.group_coordinator.load()
        self.producer_ids.load()
        self.transaction_coordinator.load()
        if not self.config.cluster_mode:  # a cluster's id is ZooKeeper's (strom.cluster.zk_broker)
            self.cluster_id = self.cluster_id or _cluster_id(self.config.data_dir)

    def start_background_work(self) -> None:
        if self.metrics_server is not None:  # /metrics (issue 21)
            self.metrics_server.start()
        self.sasl.start(self)  # a cluster's SCRAM credentials, from ZooKeeper (strom.security.sasl)
        self.quotas.start(self)  # a cluster's client quotas, from ZooKeeper (strom.broker.quota)
        start_cluster_acls(self)  # a cluster's ACLs, from ZooKeeper (strom.security.acl.zk_store)
        self.group_coordinator.start()
        self.transaction_coordinator.start()  # completes Prepare* transactions found on load
        self.log_cleaner.start()
        cfg = self.config
        work: list[tuple[int, Callable[[], object], str]] = [
            (cfg.log_retention_check_interval_ms, self.log_manager.run_retention, "retention"),
            (cfg.log_flush_scheduler_interval_ms, self._on_disk(self.log_manager.flush_due_logs, "flushing logs"),
             "flush.ms"),
            (cfg.log_flush_offset_checkpoint_interval_ms, self._on_disk(self.log_manager.checkpoint,
                                                                        "writing checkpoints"), "checkpoints"),
            (cfg.producer_id_expiration_check_interval_ms, self.log_manager.remove_expired_producers,
             "producer-id expiration"),
        ]
        if cfg.cluster_mode:  # followers that stopped catching up leave the ISR (Kafka's isr-expiration)
            work.append((isr_expiration_interval_ms(cfg.replica_lag_time_max_ms), self.replica_manager.maybe_shrink_isr,
                         "isr expiration"))
        self._tasks = [asyncio.create_task(every(interval, job, name)) for interval, job, name in work]

    def _on_disk(self, job: Callable[[], object], what: str) -> Callable[[], object]:
        """``job`` whose disk failure (a flush's, a checkpoint's, as an append's) is the log
        dir's (``ReplicaManager.log_dir_failed``: a cluster broker halts, as Kafka's does)."""
        def run() -> object:
            try:
                return job()
            except KafkaStorageError as exc:
                self.replica_manager.log_dir_failed(what, exc)
                raise
            except OSError as exc:
                failure = KafkaStorageError(f"{exc}")
                failure.__cause__ = exc
                self.replica_manager.log_dir_failed(what, failure)
                raise
        return run

    def _verification_sender(self, config: BrokerConfig) -> AddPartitionsToTxnManager | None:
        """A cluster's broker asks remote transaction coordinators (AddPartitionsToTxn v4)."""
        if not config.cluster_mode:
            return None
        from strom.broker.transaction.add_partitions_manager import AddPartitionsToTxnManager

        return AddPartitionsToTxnManager.for_broker(self)

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        fetchers = self.replica_manager.replica_fetcher_manager
        if fetchers is not None:  # before the logs close: no follower append after this
            await fetchers.shutdown()
        if self.alter_partition_manager is not None:
            await self.alter_partition_manager.shutdown()
        if self.transaction_verifier.remote is not None:
            await self.transaction_verifier.remote.shutdown()
        await self.transaction_coordinator.shutdown()  # its markers may still call the group coordinator
        await self.group_coordinator.shutdown()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        await asyncio.to_thread(self.log_cleaner.shutdown)
        self.log_manager.close()

    # -- requests ------------------------------------------------------------------------
    def new_authenticator(self, listener: str, client_host: str) -> Authenticator | None:
        """The authenticator of a new connection on ``listener`` (its name, "" for the first):
        one per connection on a SASL listener, None where the listener needs none."""
        return self.sasl.new_authenticator(listener, client_host)

    async def handle(self, frame: bytes) -> list[Records] | None:
        """Answer one request frame: the response's buffers, or None (acks=0 Produce).

        Raises ``CloseConnection`` where Kafka would drop the connection.
        """
        try:
            request = decode_request(frame)
        except UnsupportedRequestError as exc:
            return self._unsupported(exc)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed request: {exc}") from None
        handler = self.handlers.get(request.api_key)
        if handler is None or request.api_version not in handler.VERSIONS:
            header = request.header
            return self._unsupported(UnsupportedRequestError(f"unsupported {request.api.name} v{request.api_version}", header))
        answer = handler.handle(self, request)
        if self.metrics is not None:  # Prometheus (issue 21): requests, errors and time per API
            answer = self.metrics.observe(answer, request)
        if self.quotas.request.enabled and request.api_key not in REQUEST_QUOTA_EXEMPT:  # request_percentage
            return await self.quotas.handle_timed(answer, request)
        response = await answer
        if response is None:
            return None
        return encode_response(response, request.api_version, request.correlation_id)

    def request_listener(self) -> str:
        """The listener the request being handled came through (Kafka's ``request.context.listenerName``);
        outside a connection (a handler called directly) the first advertised one."""
        return request_context.listener_name.get() or self.listener_settings.advertised[0].name

    def request_endpoint(self) -> Endpoint:
        """This broker's advertised endpoint on the request's listener; the first advertised one if
        that listener is bound but not advertised (one node answers with itself rather than with no
        broker, which Kafka's cluster of one would do)."""
        return self.advertised_endpoints.get(self.request_listener(), self.advertised)

    def is_controller(self) -> bool:
        """May this broker create, delete and grow topics? One node is its own controller;
        in a cluster only the active controller (others answer NOT_CONTROLLER, as Kafka)."""
        if not self.config.cluster_mode:
            return True
        return self.controller is not None and self.controller.is_active

    def is_broker_epoch_stale(self, request_broker_epoch: int) -> bool:
        """KIP-380 (Kafka's ``isBrokerEpochStale``): a control request made for an earlier
        registration of this broker is refused. -1 (a request version without the field)
        is not checked; a newer epoch is accepted (the controller may learn of the new
        registration before this broker does)."""
        return request_broker_epoch != UNKNOWN_BROKER_EPOCH and request_broker_epoch < self.broker_epoch

    def _unsupported(self, exc: UnsupportedRequestError) -> list[Records]:
        header = exc.header
        if header.request_api_key != ApiVersionsRequest.API_KEY:
            raise CloseConnection(f"{exc} (client {header.client_id})")
        # An ApiVersions version we do not know: answer in v0 with the versions we do,
        # so the client can retry with one of them (KIP-511).
        response = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=self.api_versions)
        return encode_response(response, 0, header.correlation_id)



def _cluster_id(data_dir: str) -> str:
    """Kafka's ``meta.properties``: the cluster id is made once and kept with the data."""
    cluster_id = meta_properties.read_cluster_id(data_dir)
    if cluster_id is None:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        meta_properties.write(data_dir, cluster_id)
    return cluster_id
