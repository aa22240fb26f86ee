"""Kafka 3.9's broker config names that Strom has no setting for: what DynamicBrokerConfig must know.

Data, not logic, measured on the reference broker (``scripts/kafka-reference start 39``,
ZooKeeper mode): DescribeConfigs on the broker lists every name Kafka knows, with its
type, its default and whether it is read-only, and AlterConfigs on the empty name (the
cluster-wide default) tells which dynamic ones are per-broker only. Kafka accepts a
dynamic config at run time even where Strom has nothing it could change (thread pools,
connection quotas, SASL/SSL, remote storage); so clients and tools that set them (such as
librdkafka's admin test, which sets ``background.threads`` and
``sasl.kerberos.min.time.before.relogin``) work, Strom keeps and reports them with no
effect (``NO_EFFECT_CONFIGS``). The names Kafka knows and cannot change at run time are
``KAFKA_STATIC_CONFIGS``: refused as in Kafka. A name in neither (nor among Strom's own
properties) is unknown: Kafka keeps it as a custom config, and so does Strom.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final


class Scope(enum.Enum):
    """Where Kafka lets a dynamic config be set (DynamicBrokerConfig.validateConfigs)."""

    CLUSTER = "cluster"  # per broker or as the cluster-wide default
    PER_BROKER = "per-broker"  # not as the default: "broker id must be specified"
    LISTENER = "listener"  # only as listener.name.<listener>.<name>, per broker


@dataclass(frozen=True)
class KafkaSetting:
    """A Kafka dynamic config: its ConfigDef type name (as DescribeConfigs reports it), its
    default as DescribeConfigs shows it (None when Kafka has none), where it may be set, and
    the least value Kafka's validator takes, where it has one."""

    type: str
    default: str | None
    scope: Scope
    minimum: int | None = None


_C, _B, _L = Scope.CLUSTER, Scope.PER_BROKER, Scope.LISTENER

# Kafka 3.9's dynamic broker configs (read_only false in DescribeConfigs) that Strom has no
# equivalent for. (listeners and advertised.listeners are dynamic in Kafka but Strom's are
# static: see dynamic_config.)
NO_EFFECT_CONFIGS: Final = {
    "background.threads": KafkaSetting("INT", "10", _C, 1),
    "compression.gzip.level": KafkaSetting("INT", "-1", _C),
    "compression.lz4.level": KafkaSetting("INT", "9", _C),
    "compression.zstd.level": KafkaSetting("INT", "3", _C),
    "listener.security.protocol.map": KafkaSetting(
        "STRING", "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", _B),
    "log.cleaner.io.buffer.size": KafkaSetting("INT", "524288", _C, 0),
    "log.local.retention.bytes": KafkaSetting("LONG", "-2", _C),
    "log.local.retention.ms": KafkaSetting("LONG", "-2", _C),
    "log.roll.jitter.ms": KafkaSetting("LONG", None, _C),
    "max.connection.creation.rate": KafkaSetting("INT", "2147483647", _C, 0),
    "max.connections": KafkaSetting("INT", "2147483647", _C, 0),
    "max.connections.per.ip": KafkaSetting("INT", "2147483647", _C, 0),
    "max.connections.per.ip.overrides": KafkaSetting("STRING", "", _C),
    "metric.reporters": KafkaSetting("LIST", "", _C),
    "num.io.threads": KafkaSetting("INT", "8", _C, 1),
    "num.network.threads": KafkaSetting("INT", "3", _C, 1),
    "num.recovery.threads.per.data.dir": KafkaSetting("INT", "1", _C, 1),
    "num.replica.fetchers": KafkaSetting("INT", "1", _C, 1),
    "principal.builder.class": KafkaSetting(
        "CLASS", "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", _B),
    "remote.fetch.max.wait.ms": KafkaSetting("INT", "500", _C),
    "remote.log.index.file.cache.total.size.bytes": KafkaSetting("LONG", "1073741824", _C),
    "remote.log.manager.copy.max.bytes.per.second": KafkaSetting("LONG", "9223372036854775807", _C),
    "remote.log.manager.fetch.max.bytes.per.second": KafkaSetting("LONG", "9223372036854775807", _C),
    "sasl.enabled.mechanisms": KafkaSetting("LIST", "GSSAPI", _B),
    "sasl.jaas.config": KafkaSetting("PASSWORD", None, _B),
    "sasl.kerberos.kinit.cmd": KafkaSetting("STRING", "/usr/bin/kinit", _B),
    "sasl.kerberos.min.time.before.relogin": KafkaSetting("LONG", "60000", _B),
    "sasl.kerberos.principal.to.local.rules": KafkaSetting("LIST", "DEFAULT", _B),
    "sasl.kerberos.service.name": KafkaSetting("STRING", None, _B),
    "sasl.kerberos.ticket.renew.jitter": KafkaSetting("DOUBLE", "0.05", _B),
    "sasl.kerberos.ticket.renew.window.factor": KafkaSetting("DOUBLE", "0.8", _B),
    "sasl.login.refresh.buffer.seconds": KafkaSetting("SHORT", "300", _B),
    "sasl.login.refresh.min.period.seconds": KafkaSetting("SHORT", "60", _B),
    "sasl.login.refresh.window.factor": KafkaSetting("DOUBLE", "0.8", _B),
    "sasl.login.refresh.window.jitter": KafkaSetting("DOUBLE", "0.05", _B),
    "sasl.mechanism.inter.broker.protocol": KafkaSetting("STRING", "GSSAPI", _B),
    "ssl.cipher.suites": KafkaSetting("LIST", "", _B),
    "ssl.client.auth": KafkaSetting("STRING", "none", _B),
    "ssl.enabled.protocols": KafkaSetting("LIST", "TLSv1.2,TLSv1.3", _B),
    "ssl.endpoint.identification.algorithm": KafkaSetting("STRING", "https", _B),
    "ssl.engine.factory.class": KafkaSetting("CLASS", None, _B),
    "ssl.key.password": KafkaSetting("PASSWORD", None, _L),
    "ssl.keymanager.algorithm": KafkaSetting("STRING", "SunX509", _B),
    "ssl.keystore.certificate.chain": KafkaSetting("PASSWORD", None, _L),
    "ssl.keystore.key": KafkaSetting("PASSWORD", None, _L),
    "ssl.keystore.location": KafkaSetting("STRING", None, _L),
    "ssl.keystore.password": KafkaSetting("PASSWORD", None, _L),
    "ssl.keystore.type": KafkaSetting("STRING", "JKS", _L),
    "ssl.protocol": KafkaSetting("STRING", "TLSv1.3", _B),
    "ssl.provider": KafkaSetting("STRING", None, _B),
    "ssl.secure.random.implementation": KafkaSetting("STRING", None, _B),
    "ssl.trustmanager.algorithm": KafkaSetting("STRING", "PKIX", _B),
    "ssl.truststore.certificates": KafkaSetting("PASSWORD", None, _L),
    "ssl.truststore.location": KafkaSetting("STRING", None, _L),
    "ssl.truststore.password": KafkaSetting("PASSWORD", None, _L),
    "ssl.truststore.type": KafkaSetting("STRING", "JKS", _L),
    "transaction.partition.verification.enable": KafkaSetting("BOOLEAN", "true", _C),
    "unclean.leader.election.enable": KafkaSetting("BOOLEAN", "false", _C),
}

# Kafka's thread pools (DynamicThreadPool and the network threads): each change may at most
# double or halve the current count.
THREAD_POOL_CONFIGS: Final = frozenset({
    "num.io.threads", "num.network.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads",
})

# Listener configs that stay cluster-wide under a listener prefix (ClusterLevelListenerConfigs).
CLUSTER_LEVEL_LISTENER_CONFIGS: Final = frozenset({"max.connections", "max.connection.creation.rate",
                                                   "num.network.threads"})
LISTENER_CONFIG: Final = re.compile(r"listener\.name\.[^.]*\.(.*)")

# Every broker config Kafka 3.9 (ZooKeeper mode) knows and cannot change at run time.
KAFKA_STATIC_CONFIGS: Final = frozenset(["alter.config.policy.class.name", "alter.config.policy.kraft.compatibility.enable", "alter.log.dirs.replication.quota.window.num", "alter.log.dirs.replication.quota.window.size.seconds", "authorizer.class.name", "auto.create.topics.enable", "auto.include.jmx.reporter", "auto.leader.rebalance.enable", "broker.heartbeat.interval.ms", "broker.id", "broker.id.generation.enable", "broker.rack", "broker.session.timeout.ms", "client.quota.callback.class", "connection.failed.authentication.delay.ms", "connections.max.idle.ms", "connections.max.reauth.ms", "control.plane.listener.name", "controlled.shutdown.enable", "controlled.shutdown.max.retries", "controlled.shutdown.retry.backoff.ms", "controller.listener.names", "controller.quorum.append.linger.ms", "controller.quorum.bootstrap.servers", "controller.quorum.election.backoff.max.ms", "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms", "controller.quorum.request.timeout.ms", "controller.quorum.retry.backoff.ms", "controller.quorum.voters", "controller.quota.window.num", "controller.quota.window.size.seconds", "controller.socket.timeout.ms", "create.topic.policy.class.name", "default.replication.factor", "delegation.token.expiry.check.interval.ms", "delegation.token.expiry.time.ms", "delegation.token.master.key", "delegation.token.max.lifetime.ms", "delegation.token.secret.key", "delete.records.purgatory.purge.interval.requests", "delete.topic.enable", "early.start.listeners", "eligible.leader.replicas.enable", "fetch.max.bytes", "fetch.purgatory.purge.interval.requests", "group.consumer.assignors", "group.consumer.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms", "group.consumer.max.session.timeout.ms", "group.consumer.max.size", "group.consumer.min.heartbeat.interval.ms", "group.consumer.min.session.timeout.ms", "group.consumer.session.timeout.ms", "group.coordinator.append.linger.ms", "group.coordinator.rebalance.protocols", "group.coordinator.threads", "group.initial.rebalance.delay.ms", "group.max.session.timeout.ms", "group.max.size", "group.min.session.timeout.ms", "group.share.delivery.count.limit", "group.share.heartbeat.interval.ms", "group.share.max.groups", "group.share.max.heartbeat.interval.ms", "group.share.max.record.lock.duration.ms", "group.share.max.session.timeout.ms", "group.share.max.size", "group.share.min.heartbeat.interval.ms", "group.share.min.record.lock.duration.ms", "group.share.min.session.timeout.ms", "group.share.partition.max.record.locks", "group.share.record.lock.duration.ms", "group.share.session.timeout.ms", "initial.broker.registration.timeout.ms", "inter.broker.listener.name", "inter.broker.protocol.version", "kafka.metrics.polling.interval.secs", "kafka.metrics.reporters", "leader.imbalance.check.interval.seconds", "leader.imbalance.per.broker.percentage", "log.cleaner.enable", "log.dir", "log.dir.failure.timeout.ms", "log.dirs", "log.flush.offset.checkpoint.interval.ms", "log.flush.scheduler.interval.ms", "log.flush.start.offset.checkpoint.interval.ms", "log.message.format.version", "log.retention.check.interval.ms", "log.retention.hours", "log.retention.minutes", "log.roll.hours", "log.roll.jitter.hours", "max.incremental.fetch.session.cache.slots", "max.request.partition.size.limit", "metadata.log.dir", "metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms", "metadata.log.segment.bytes", "metadata.log.segment.ms", "metadata.max.idle.interval.ms", "metadata.max.retention.bytes", "metadata.max.retention.ms", "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms", "node.id", "num.partitions", "num.replica.alter.log.dirs.threads", "offset.metadata.max.bytes", "offsets.commit.required.acks", "offsets.commit.timeout.ms", "offsets.load.buffer.size", "offsets.retention.check.interval.ms", "offsets.retention.minutes", "offsets.topic.compression.codec", "offsets.topic.num.partitions", "offsets.topic.replication.factor", "offsets.topic.segment.bytes", "password.encoder.cipher.algorithm", "password.encoder.iterations", "password.encoder.key.length", "password.encoder.keyfactory.algorithm", "password.encoder.old.secret", "password.encoder.secret", "process.roles", "producer.purgatory.purge.interval.requests", "queued.max.request.bytes", "queued.max.requests", "quota.window.num", "quota.window.size.seconds", "remote.log.manager.copier.thread.pool.size", "remote.log.manager.copy.quota.window.num", "remote.log.manager.copy.quota.window.size.seconds", "remote.log.manager.expiration.thread.pool.size", "remote.log.manager.fetch.quota.window.num", "remote.log.manager.fetch.quota.window.size.seconds", "remote.log.manager.task.interval.ms", "remote.log.manager.thread.pool.size", "remote.log.metadata.custom.metadata.max.bytes", "remote.log.metadata.manager.class.name", "remote.log.metadata.manager.class.path", "remote.log.metadata.manager.impl.prefix", "remote.log.metadata.manager.listener.name", "remote.log.reader.max.pending.tasks", "remote.log.reader.threads", "remote.log.storage.manager.class.name", "remote.log.storage.manager.class.path", "remote.log.storage.manager.impl.prefix", "remote.log.storage.system.enable", "replica.fetch.backoff.ms", "replica.fetch.max.bytes", "replica.fetch.min.bytes", "replica.fetch.response.max.bytes", "replica.fetch.wait.max.ms", "replica.high.watermark.checkpoint.interval.ms", "replica.lag.time.max.ms", "replica.selector.class", "replica.socket.receive.buffer.bytes", "replica.socket.timeout.ms", "replication.quota.window.num", "replication.quota.window.size.seconds", "request.timeout.ms", "reserved.broker.max.id", "sasl.client.callback.handler.class", "sasl.login.callback.handler.class", "sasl.login.class", "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms", "sasl.login.retry.backoff.max.ms", "sasl.login.retry.backoff.ms", "sasl.mechanism.controller.protocol", "sasl.oauthbearer.clock.skew.seconds", "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.token.endpoint.url", "sasl.server.callback.handler.class", "sasl.server.max.receive.size", "security.inter.broker.protocol", "security.providers", "socket.connection.setup.timeout.max.ms", "socket.connection.setup.timeout.ms", "socket.listen.backlog.size", "socket.receive.buffer.bytes", "socket.request.max.bytes", "socket.send.buffer.bytes", "ssl.allow.dn.changes", "ssl.allow.san.changes", "ssl.principal.mapping.rules", "telemetry.max.bytes", "transaction.abort.timed.out.transaction.cleanup.interval.ms", "transaction.max.timeout.ms", "transaction.remove.expired.transaction.cleanup.interval.ms", "transaction.state.log.load.buffer.size", "transaction.state.log.min.isr", "transaction.state.log.num.partitions", "transaction.state.log.replication.factor", "transaction.state.log.segment.bytes", "transactional.id.expiration.ms", "zookeeper.clientCnxnSocket", "zookeeper.connect", "zookeeper.connection.timeout.ms", "zookeeper.max.in.flight.requests", "zookeeper.metadata.migration.enable", "zookeeper.session.timeout.ms", "zookeeper.set.acl", "zookeeper.ssl.cipher.suites", "zookeeper.ssl.client.enable", "zookeeper.ssl.crl.enable", "zookeeper.ssl.enabled.protocols", "zookeeper.ssl.endpoint.identification.algorithm", "zookeeper.ssl.keystore.location", "zookeeper.ssl.keystore.password", "zookeeper.ssl.keystore.type", "zookeeper.ssl.ocsp.enable", "zookeeper.ssl.protocol", "zookeeper.ssl.truststore.location", "zookeeper.ssl.truststore.password", "zookeeper.ssl.truststore.type"])

# -- server.properties: Kafka's security names Strom has no setting for (issue 20, R1) -----------
# A Kafka user's security section must load. These names are accepted at start and logged as
# having no effect: the JVM's TLS plumbing (Python's ssl has no key or trust manager, provider,
# secure random or endpoint check of its own clients to choose: Strom's brokers talk PLAINTEXT to
# each other) and the client (login) side of SASL, which a Kafka broker uses only to connect to
# other brokers. A name under one of the prefixes counts too.
SECURITY_NO_EFFECT: Final = frozenset({
    "ssl.endpoint.identification.algorithm", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation", "ssl.provider", "ssl.allow.dn.changes", "ssl.allow.san.changes",
    "security.providers", "sasl.client.callback.handler.class", "sasl.mechanism.controller.protocol",
})
SECURITY_NO_EFFECT_PREFIXES: Final = ("sasl.login.", "sasl.kerberos.", "sasl.oauthbearer.")

# Class names Strom accepts only where the class is the Kafka one whose behaviour Strom has:
# any other (a custom principal builder, an LDAP callback handler, a JWKS token validator) would
# change who is authenticated as whom, so accepting and ignoring it would be a lie.
SECURITY_CLASSES: Final = {
    "principal.builder.class": frozenset({
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"}),
    "ssl.engine.factory.class": frozenset({"org.apache.kafka.common.security.ssl.DefaultSslEngineFactory"}),
    "sasl.server.callback.handler.class": frozenset({
        "org.apache.kafka.common.security.plain.internals.PlainServerCallbackHandler",
        "org.apache.kafka.common.security.scram.internals.ScramServerCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler",
    }),
}
SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
