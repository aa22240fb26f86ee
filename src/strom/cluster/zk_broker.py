"""ZkBroker: a broker's life in a ZooKeeper cluster — join, stay registered, leave cleanly.

The ZooKeeper-mode half of Kafka's ``KafkaServer``: connect (creating the chroot), agree
on the cluster id, register ``/brokers/ids/<id>`` (the broker epoch is that znode's czxid),
start the ``Controller`` (which stands for election), follow topic config changes
(``/config/changes``), and on SIGTERM ask the controller to move this broker's
leadership away (ControlledShutdown) before the socket server stops.

Invariants:

- The cluster id is ZooKeeper's (``/cluster/id``); a data directory that belongs to another
  cluster (``meta.properties``) is refused at start, as Kafka's InconsistentClusterIdException,
  so a broker pointed at the wrong ensemble cannot mix two clusters' logs.
- The broker epoch changes only by registering: after a lost session kazoo reconnects with
  a new session, the ephemeral is gone, and the broker registers again (new czxid), so the
  controller sees a bounced broker and control requests for the old incarnation are refused.
- kazoo's state listener only hands events to the event loop; registration and the
  controller's work happen there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from kazoo.protocol.states import KazooState

from strom.cluster.config_changes import ConfigChangeFollower
from strom.cluster.controller import Controller
from strom.cluster.producer_id_manager import ZkProducerIdManager
from strom.cluster.zk_admin_manager import ZkAdminManager
from strom.cluster.zk_client import KafkaZkClient, ZooKeeperError
from strom.cluster.zk_data import BrokerInfo, EndPoint
from strom.protocol.error_codes import ErrorCode
from strom.storage import meta_properties

if TYPE_CHECKING:
    from strom.broker.broker import Broker

logger = logging.getLogger(__name__)

T = TypeVar("T")
ZK_CALL_TIMEOUT_S = 10.0  # how long a request handler waits on ZooKeeper for a topic's config


class ClusterStartupError(RuntimeError):
    """The broker cannot join the cluster; the message is one line for the operator."""


class ZkBroker:
    def __init__(self, broker: Broker) -> None:
        config = broker.config
        self.broker = broker
        self.zk = KafkaZkClient(config.zookeeper_connect, session_timeout_ms=config.zookeeper_session_timeout_ms,
                                connection_timeout_ms=config.zookeeper_connection_timeout)
        self.controller = Controller(  # a topic without its own unclean.leader.election.enable: the broker's
            config.node_id, self.zk, listener_name=broker.inter_broker_listener,
            unclean_leader_election_enable=lambda: broker.log_manager.default_config.unclean_leader_election_enable)
        self.admin_manager = ZkAdminManager(
            self.zk, broker.metadata, lambda: broker.log_manager.default_config,
            lambda: sorted(broker.metadata.live_brokers(), key=lambda b: b.id), config.default_replication_factor)
        self.producer_ids = ZkProducerIdManager(config.node_id, self.zk)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session_lost = False
        # Every topic-config notice, from the first (a restarted broker re-reads the topics named).
        self._topic_configs = ConfigChangeFollower(self.zk, self._topic_config_changed, "topic config")
        self._stopping = False

    # -- start -----------------------------------------------------------------------------
    async def startup(self) -> None:
        """Join the cluster: the socket server is bound, so the endpoint is known."""
        self._loop = asyncio.get_running_loop()
        broker = self.broker
        try:
            await asyncio.to_thread(self.zk.connect)
        except Exception as exc:
            raise ClusterStartupError(f"cannot reach ZooKeeper at {broker.config.zookeeper_connect}: {exc}") from None
        await asyncio.to_thread(self.zk.create_top_level_paths)
        own = meta_properties.read_cluster_id(broker.config.data_dir)
        # A new id is proposed even when the data directory has one (as Kafka): an empty
        # ZooKeeper must not quietly adopt another cluster's data.
        cluster_id = await asyncio.to_thread(self.zk.get_or_create_cluster_id, new_cluster_id())
        if own is not None and own != cluster_id:
            raise ClusterStartupError(
                f"the data directory {broker.config.data_dir} belongs to cluster {own}, but ZooKeeper at "
                f"{broker.config.zookeeper_connect} holds cluster {cluster_id}: wrong zookeeper.connect?")
        if own is None:
            meta_properties.write(broker.config.data_dir, cluster_id, broker.node_id)
        broker.cluster_id = cluster_id
        await self._register()
        self.zk.add_state_listener(self._state_changed)
        await asyncio.to_thread(self._topic_configs.start, from_now=False, loop=self._loop)
        await self.controller.startup()
        logger.info("broker %d joined cluster %s (epoch %d)", broker.node_id, cluster_id, broker.broker_epoch)

    async def _register(self) -> None:
        broker = self.broker
        protocols = {listener.name: listener.security_protocol for listener in broker.listener_settings.advertised}
        endpoints = tuple(EndPoint(endpoint.host, endpoint.port, name, protocols[name])
                          for name, endpoint in broker.advertised_endpoints.items())  # every advertised listener
        info = BrokerInfo(broker.node_id, endpoints, broker.config.broker_rack or None)
        broker.broker_epoch = await asyncio.to_thread(self.zk.register_broker, info)

    def _state_changed(self, state: str) -> None:
        """kazoo's thread: remember a lost session; re-register once a new one is up."""
        if state == KazooState.LOST:
            self._session_lost = True
            self.controller.session_expired()
        elif state == KazooState.CONNECTED and self._session_lost and self._loop is not None:
            self._session_lost = False
            self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._on_new_session()))

    async def _on_new_session(self) -> None:
        """Kafka's ``RegisterBrokerAndReelect``: a new session, a new broker epoch, an election."""
        if self._stopping:
            return
        logger.warning("broker %d: the ZooKeeper session expired; registering again", self.broker.node_id)
        try:
            await self._register()
        except Exception:
            logger.exception("broker %d: registering again failed", self.broker.node_id)
            return
        self.controller.put_elect()

    # -- topic configs -----------------------------------------------------------------------
    async def read_topic_config(self, topic: str) -> dict[str, str]:
        """The topic's overrides as ZooKeeper holds them (``/config/topics/<t>``), off the event
        loop; ``ZooKeeperError`` at once when there is no session, or after ``ZK_CALL_TIMEOUT_S``."""
        return await self._zk_call(self.zk.get_topic_config, topic)

    async def write_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Replace the topic's overrides and announce it to every broker (``/config/changes``)."""
        await self._zk_call(self.zk.set_topic_config, topic, overrides)

    async def _zk_call(self, call: Callable[..., T], *args: object) -> T:
        if not self.zk.connected:
            raise ZooKeeperError("not connected to ZooKeeper")
        try:
            return await asyncio.wait_for(asyncio.to_thread(call, *args), ZK_CALL_TIMEOUT_S)
        except TimeoutError:
            raise ZooKeeperError(f"ZooKeeper did not answer within {ZK_CALL_TIMEOUT_S:.0f} s") from None

    async def fetch_topic_configs(self, topics: set[str]) -> None:
        """Before this broker hosts its first partition of a topic (LeaderAndIsr), read the
        topic's overrides from ``/config/topics/<t>``, as Kafka's LogManager does, so no log
        is born with the wrong ``cleanup.policy`` or limits; later changes come by watch."""
        hosted = {topic for topic, _ in self.broker.replica_manager.partitions}
        log_manager = self.broker.log_manager
        for topic in sorted(topics - hosted):
            try:
                overrides = await self.read_topic_config(topic)
                if overrides != log_manager.topic_overrides.get(topic, {}):
                    log_manager.set_topic_config(topic, overrides)
            except Exception as exc:  # ZooKeeper unreachable, a value this broker refuses: defaults
                logger.warning("broker %d: topic %s's config not applied (%s); using the defaults",
                               self.broker.node_id, topic, exc)

    async def _topic_config_changed(self, entity_path: str) -> None:
        """Re-read the config of a topic a notification names (others have their own followers)."""
        kind, _, name = entity_path.partition("/")
        if kind != "topics" or not name:
            return
        configs = await asyncio.to_thread(self.zk.get_topic_config, name)
        if configs.get("unclean.leader.election.enable", "").strip().lower() == "true":
            self.controller.enable_topic_unclean_leader_election(name)  # Kafka's TopicConfigHandler
        try:
            self.broker.log_manager.set_topic_config(name, configs)
        except Exception as exc:  # a bad value must not stop the others applying
            logger.warning("broker %d: topic %s's new config %s not applied: %s",
                           self.broker.node_id, name, configs, exc)

    # -- stop ------------------------------------------------------------------------------
    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move our leadership away (ControlledShutdown, retried as
        ``controlled.shutdown.max.retries``/``retry.backoff.ms``); True when it said done."""
        config = self.broker.config
        self._stopping = True
        self._topic_configs.stop()
        if not config.controlled_shutdown_enable:
            return False
        for attempt in range(config.controlled_shutdown_max_retries):
            try:
                error, remaining = await self._request_controlled_shutdown()
            except Exception as exc:
                logger.warning("broker %d: controlled shutdown attempt %d failed: %s", self.broker.node_id,
                               attempt + 1, exc)
            else:
                if error == ErrorCode.NONE and not remaining:
                    logger.info("broker %d: controlled shutdown done", self.broker.node_id)
                    return True
                logger.warning("broker %d: controlled shutdown attempt %d: %s, %d partitions still led",
                               self.broker.node_id, attempt + 1, ErrorCode(error).name, len(remaining))
            await asyncio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
        logger.warning("broker %d: controlled shutdown did not finish; stopping anyway", self.broker.node_id)
        return False

    async def _request_controlled_shutdown(self) -> tuple[int, tuple[object, ...]]:
        from strom.client.connection import BrokerConnection
        from strom.protocol.messages.controlled_shutdown_request import ControlledShutdownRequest
        from strom.protocol.messages.controlled_shutdown_response import ControlledShutdownResponse

        broker = self.broker
        if self.controller.is_active:
            return await self.controller.controlled_shutdown(broker.node_id, broker.broker_epoch)
        controller_id = await asyncio.to_thread(self.zk.get_controller_id)
        if controller_id is None:
            return ErrorCode.NOT_CONTROLLER, ()
        info = await asyncio.to_thread(self.zk.get_broker, controller_id)
        # The controller is reached on this broker's inter-broker listener, as Kafka's controlled shutdown does.
        endpoint = None if info is None else next(
            (e for e in info.endpoints if e.listener_name == broker.inter_broker_listener), None)
        if endpoint is None:
            return ErrorCode.BROKER_NOT_AVAILABLE, ()
        connection = await BrokerConnection.open(endpoint.host, endpoint.port, node_id=controller_id,
                                                 client_id=f"strom-broker-{broker.node_id}")
        try:
            request = ControlledShutdownRequest(broker_id=broker.node_id, broker_epoch=broker.broker_epoch)
            response = await connection.send(request, version=3)
        finally:
            connection.close()
        assert isinstance(response, ControlledShutdownResponse)
        return response.error_code, tuple(response.remaining_partitions)

    async def shutdown(self) -> None:
        self._stopping = True
        self._topic_configs.stop()
        with contextlib.suppress(Exception):
            await self.controller.shutdown()
        with contextlib.suppress(Exception):
            await self.producer_ids.shutdown()  # a block claim in flight ends before the session does
        await asyncio.to_thread(self.zk.close)


def new_cluster_id() -> str:
    from strom.cluster.zk_data import kafka_uuid_string, new_kafka_uuid

    return kafka_uuid_string(new_kafka_uuid())
