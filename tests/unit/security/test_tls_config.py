"""TLS listener settings: Kafka's ``ssl.*`` names read into an SSLContext, per listener, and
every bad setting refused at start with one line.

A context that loads is also put to work: a handshake in memory (two ``MemoryBIO`` pairs)
between it and a client context, so "loaded" means "serves TLS with this key".
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from strom.broker.config import BrokerConfig, ConfigError
from strom.security.ssl_principal_mapper import subject_dn
from tests.support.certs import BROKER_KEY_PASSWORD, Certificates, Identity, make_certificates

TWO_SSL = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def _config(certs: Certificates, **properties: str) -> BrokerConfig:
    """Two SSL listeners sharing the broker-wide key material, plus ``properties``."""
    return BrokerConfig.from_properties({
        **TWO_SSL, "ssl.keystore.location": str(certs.broker_keystore), "ssl.truststore.location": str(certs.ca),
        **{name.replace("__", "."): value for name, value in properties.items()}})


def _handshake(server: ssl.SSLContext, certs: Certificates, identity: Identity | None,
               client_version: ssl.TLSVersion | None = None) -> str | None:
    """Run a handshake in memory; the server side's view of the client's DN (None: no certificate)."""
    client = ssl.create_default_context(cafile=str(certs.ca))
    if client_version is not None:
        client.minimum_version = client.maximum_version = client_version
    if identity is not None:
        client.load_cert_chain(identity.cert, identity.key)
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    server_side = server.wrap_bio(to_server, to_client, server_side=True)
    client_side = client.wrap_bio(to_client, to_server, server_hostname="localhost")
    done = {"server": False, "client": False}
    for _ in range(10):
        for name, side in (("client", client_side), ("server", server_side)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        if all(done.values()):
            break
    assert all(done.values()), "the handshake did not complete"
    certificate = server_side.getpeercert(binary_form=True)
    return None if certificate is None else subject_dn(certificate)


def test_defaults_are_kafkas(certs: Certificates) -> None:
    tls = _config(certs).tls_listeners()
    assert sorted(tls) == ["MTLS", "SSL"]
    context = tls["SSL"].context
    assert context.verify_mode == ssl.CERT_NONE  # ssl.client.auth=none
    assert (context.minimum_version, context.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    assert str(tls["SSL"].principal_mapper) == "SslPrincipalMapper(rules = [DEFAULT])"
    assert _handshake(context, certs, None) is None
    assert BrokerConfig.from_properties({}).tls_listeners() == {}  # no TLS listener, no ssl work


def test_a_listener_override_wins_over_the_broker_wide_setting(certs: Certificates) -> None:
    tls = _config(certs, ssl__client__auth="required", listener__name__ssl__ssl__client__auth="requested",
                  listener__name__mtls__ssl__principal__mapping__rules="RULE:^CN=([^,]*),.*$/$1/U").tls_listeners()
    assert tls["SSL"].context.verify_mode == ssl.CERT_OPTIONAL
    assert tls["MTLS"].context.verify_mode == ssl.CERT_REQUIRED
    dn = _handshake(tls["MTLS"].context, certs, certs.client)
    assert dn == certs.client.subject
    assert tls["MTLS"].principal_mapper.principal(dn) == "User:CLIENT"
    assert tls["SSL"].principal_mapper.principal(dn) == f"User:{certs.client.subject}"


def test_inline_pem_even_with_its_line_breaks_folded(certs: Certificates) -> None:
    """A ``\\``-continued properties value reaches the broker as one line."""
    def folded(path: Path) -> str:
        return " ".join(path.read_text().split("\n"))

    config = BrokerConfig.from_properties({
        **TWO_SSL, "ssl.keystore.certificate.chain": folded(certs.broker.cert),
        "ssl.keystore.key": folded(certs.broker.key), "ssl.truststore.certificates": folded(certs.ca),
        "ssl.client.auth": "required"})
    assert _handshake(config.tls_listeners()["SSL"].context, certs, certs.service) == certs.service.subject


def test_an_encrypted_key_with_ssl_key_password(certs: Certificates) -> None:
    config = BrokerConfig.from_properties({
        **TWO_SSL, "ssl.keystore.location": str(certs.broker_encrypted_keystore),
        "ssl.key.password": BROKER_KEY_PASSWORD})
    assert _handshake(config.tls_listeners()["SSL"].context, certs, None) is None


def test_cipher_suites_by_iana_or_openssl_name(certs: Certificates) -> None:
    config = _config(certs, ssl__cipher__suites="TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, ECDHE-ECDSA-CHACHA20-POLY1305",
                     ssl__enabled__protocols="TLSv1.2")
    context = config.tls_listeners()["SSL"].context
    assert {cipher["name"] for cipher in context.get_ciphers() if cipher["protocol"] == "TLSv1.2"} == {
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"}
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2
    assert _handshake(context, certs, None) is None  # the trustme key is ECDSA: these suites serve it


def test_only_tls13_suites_turn_tls12_off(certs: Certificates) -> None:
    context = _config(certs, ssl__cipher__suites="TLS_AES_128_GCM_SHA256").tls_listeners()["SSL"].context
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_ssl_protocol_caps_the_version(certs: Certificates) -> None:
    context = _config(certs, ssl__protocol="TLSv1.2").tls_listeners()["SSL"].context
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2


@pytest.fixture(scope="module")
def bad_files(certs: Certificates, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("bad")
    mismatched = directory / "mismatched.pem"
    mismatched.write_text(certs.client.key.read_text() + certs.broker.cert.read_text())
    no_key = directory / "no-key.pem"
    no_key.write_text(certs.broker.cert.read_text())
    not_pem = directory / "not-pem.txt"
    not_pem.write_text("hello")
    return {"mismatched": mismatched, "no-key": no_key, "not-pem": not_pem}


@pytest.mark.parametrize(("properties", "message"), [
    ({"ssl.keystore.type": "JKS"}, "listener SSL: ssl.keystore.type: JKS is not supported: only PEM key material is"),
    ({"listener.name.mtls.ssl.truststore.type": "PKCS12"},
     "listener MTLS: ssl.truststore.type: PKCS12 is not supported: only PEM key material is"),
    ({"ssl.keystore.location": "/nonexistent/broker.pem"},
     "ssl.keystore.location: cannot read /nonexistent/broker.pem: No such file or directory"),
    ({"ssl.keystore.location": "{mismatched}"}, "ssl.keystore.location: the private key does not match the certificate"),
    ({"ssl.keystore.location": "{no-key}"}, "ssl.keystore.location: no PEM private key"),
    ({"ssl.keystore.location": "{encrypted}", "ssl.key.password": "wrong"},
     "ssl.key.password: cannot decrypt the private key (wrong or missing password)"),
    ({"ssl.keystore.location": "{encrypted}"}, "ssl.key.password: cannot decrypt the private key"),
    ({"ssl.keystore.password": "secret"}, "ssl.keystore.password: cannot be given with PEM key material"),
    ({"ssl.truststore.password": "secret"}, "ssl.truststore.password: cannot be given with a PEM truststore"),
    ({"ssl.keystore.location": "", "ssl.keystore.certificate.chain": "{chain}"},
     "ssl.keystore.key: missing: inline key material needs both the certificate chain and the key"),
    ({"ssl.keystore.key": "{key}"}, "ssl.keystore.location: give either the location or the inline"),
    ({"ssl.truststore.location": "{not-pem}"}, "ssl.truststore.location: no PEM certificate in"),
    ({"ssl.truststore.location": "", "ssl.truststore.certificates": "not a certificate"},
     "ssl.truststore.certificates: no PEM certificate"),
    ({"ssl.keystore.location": "", "ssl.keystore.certificate.chain": "junk", "ssl.keystore.key": "junk"},
     "ssl.keystore.certificate.chain/ssl.keystore.key: no PEM certificate"),
    ({"ssl.client.auth": "maybe"}, "ssl.client.auth: 'maybe' must be one of none, requested, required"),
    ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, "ssl.enabled.protocols: TLSv1.1 is not supported"),
    ({"ssl.protocol": "SSLv3"}, "ssl.protocol: SSLv3 is not supported"),
    ({"ssl.protocol": "TLSv1.2", "ssl.enabled.protocols": "TLSv1.3"}, "ssl.protocol: TLSv1.2 is below every version"),
    ({"ssl.cipher.suites": "TLS_NOPE_WITH_NOTHING"}, "ssl.cipher.suites: unknown cipher suite TLS_NOPE_WITH_NOTHING"),
    ({"ssl.principal.mapping.rules": "RULE:nope"}, "ssl.principal.mapping.rules: invalid rule 'RULE:nope'"),
])
def test_each_bad_setting_is_one_line_at_start(certs: Certificates, bad_files: dict[str, Path],
                                                properties: dict[str, str], message: str) -> None:
    files = {**{name: str(path) for name, path in bad_files.items()}, "encrypted": str(certs.broker_encrypted_keystore),
             "chain": certs.broker.cert.read_text(), "key": certs.broker.key.read_text()}
    values = {name: value.format(**files) if value.startswith("{") else value for name, value in properties.items()}
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties({**TWO_SSL, "ssl.keystore.location": str(certs.broker_keystore), **values})
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_brokers_do_not_replicate_over_tls_yet(certs: Certificates) -> None:
    with pytest.raises(ConfigError, match=r"inter\.broker\.listener\.name SSL is a TLS listener"):
        _config(certs, inter__broker__listener__name="SSL", zookeeper__connect="127.0.0.1:2181")
    assert _config(certs, inter__broker__listener__name="SSL").tls_listeners()  # one node: no broker connects


def test_describe_configs_lists_each_ssl_setting_once_and_never_shows_key_material(
        certs: Certificates, tmp_path: Path) -> None:
    from collections import Counter

    from strom.broker.broker import Broker
    from strom.broker.handlers.describe_configs import broker_configs

    key = certs.broker.key.read_text()
    config = BrokerConfig.from_properties({
        **TWO_SSL, "log.dirs": str(tmp_path / "data"), "ssl.keystore.certificate.chain": certs.broker.cert.read_text(),
        "ssl.keystore.key": key, "ssl.truststore.certificates": certs.ca.read_text()})
    entries = broker_configs(Broker(config))
    counts = Counter(entry.name for entry in entries)
    assert [name for name, count in counts.items() if count > 1 and name.startswith("ssl.")] == []
    shown = {entry.name: entry for entry in entries}
    for name in ("ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
                 "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password"):
        assert (shown[name].value, shown[name].is_sensitive) == (None, True), name
        assert all(synonym.value is None for synonym in shown[name].synonyms), name
    assert shown["ssl.client.auth"].value == "none"
    assert not any(key.splitlines()[1] in (entry.value or "") for entry in entries)


@pytest.mark.parametrize(("enabled", "client_version", "served"), [
    ("TLSv1.2,TLSv1.3", ssl.TLSVersion.TLSv1_2, True),
    ("TLSv1.2,TLSv1.3", ssl.TLSVersion.TLSv1_3, True),
    ("TLSv1.3", ssl.TLSVersion.TLSv1_2, False),
    ("TLSv1.2", ssl.TLSVersion.TLSv1_3, False),
])
def test_ssl_enabled_protocols_decide_which_clients_connect(
        certs: Certificates, enabled: str, client_version: ssl.TLSVersion, served: bool) -> None:
    context = _config(certs, ssl__enabled__protocols=enabled).tls_listeners()["SSL"].context
    if served:
        assert _handshake(context, certs, None, client_version) is None
    else:
        with pytest.raises(ssl.SSLError):
            _handshake(context, certs, None, client_version)
