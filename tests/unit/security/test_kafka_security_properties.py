"""A Kafka user's server.properties security section loads (issue 20): the names Strom does not
act on are accepted and logged as having no effect, the ones whose value Strom cannot honour
(a custom principal builder or callback handler, a JKS keystore) are refused in one line, and
``security.inter.broker.protocol`` names the inter-broker listener as in Kafka."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from strom.broker.config import BrokerConfig, ConfigError
from tests.support.certs import Certificates, make_certificates

JAAS_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
JAAS_PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')

NO_EFFECT = [
    "ssl.endpoint.identification.algorithm", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation", "ssl.provider", "sasl.login.refresh.window.factor",
    "sasl.login.connect.timeout.ms", "sasl.login.retry.backoff.ms",
    "listener.name.sasl_ssl.oauthbearer.sasl.login.callback.handler.class",
]


def kafka_server_properties(certs: Certificates) -> str:
    """A SASL_SSL broker's server.properties as a Kafka 3.9 user writes it (ZooKeeper-less parts)."""
    return f"""\
broker.id=0
listeners=PLAINTEXT://127.0.0.1:19092,SASL_SSL://127.0.0.1:19093
advertised.listeners=PLAINTEXT://127.0.0.1:19092,SASL_SSL://127.0.0.1:19093
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL
security.inter.broker.protocol=PLAINTEXT
log.dirs={certs.directory / "data"}

ssl.keystore.type=PEM
ssl.keystore.location={certs.broker_keystore}
ssl.truststore.type=PEM
ssl.truststore.location={certs.ca}
ssl.client.auth=requested
ssl.endpoint.identification.algorithm=https
ssl.keymanager.algorithm=SunX509
ssl.trustmanager.algorithm=PKIX
ssl.secure.random.implementation=SHA1PRNG
ssl.provider=SunJSSE
ssl.protocol=TLSv1.3
ssl.enabled.protocols=TLSv1.2,TLSv1.3
ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/L,DEFAULT
ssl.engine.factory.class=org.apache.kafka.common.security.ssl.DefaultSslEngineFactory

sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
sasl.mechanism.inter.broker.protocol=PLAIN
sasl.login.refresh.window.factor=0.8
sasl.login.connect.timeout.ms=10000
sasl.login.retry.backoff.ms=100
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={JAAS_SCRAM}
listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS_PLAIN}
listener.name.sasl_ssl.plain.sasl.server.callback.handler.class=\
org.apache.kafka.common.security.plain.internals.PlainServerCallbackHandler
listener.name.sasl_ssl.oauthbearer.sasl.login.callback.handler.class=\
org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler
principal.builder.class=org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder
connections.max.reauth.ms=3600000

authorizer.class.name=kafka.security.authorizer.AclAuthorizer
super.users=User:admin
allow.everyone.if.no.acl.found=false
"""


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("kafka-properties"))


def write(certs: Certificates, text: str) -> Path:
    path = certs.directory / "server.properties"
    path.write_text(text)
    return path


def test_a_kafka_sasl_ssl_server_properties_loads_and_says_what_has_no_effect(
        certs: Certificates, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="strom.broker.config"):
        config = BrokerConfig.load(str(write(certs, kafka_server_properties(certs))), {})
    assert config.listener_settings().inter_broker_listener == "PLAINTEXT"
    assert set(config.tls_listeners()) == {"SASL_SSL"}
    assert config.sasl_enabled_mechanisms == "SCRAM-SHA-512,PLAIN"
    assert config.super_users == "User:admin"
    assert sorted(record.getMessage().split()[0] for record in caplog.records) == sorted(NO_EFFECT)


@pytest.mark.parametrize(("line", "reason"), [
    ("principal.builder.class=com.example.LdapPrincipalBuilder", "Strom runs no Java classes"),
    ("listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class="
     "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
     "Strom runs no Java classes"),
    ("sasl.server.callback.handler.class=com.example.LdapCallbackHandler", "Strom runs no Java classes"),
    ("ssl.engine.factory.class=com.example.FipsEngineFactory", "Strom runs no Java classes"),
    ("inter.broker.listener.name=PLAINTEXT", "only one of inter.broker.listener.name and security.inter"),
    ("security.inter.broker.protocol=TLS", "must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ("ssl.keystore.type=JKS", "ssl.keystore.type"),
])
def test_a_property_strom_cannot_honour_is_refused_in_one_line(certs: Certificates, line: str, reason: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig.load(str(write(certs, kafka_server_properties(certs) + line + "\n")), {})
    message = str(refused.value)
    assert reason in message and "\n" not in message
