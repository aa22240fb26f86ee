"""Certificates for the security tests: a CA, a broker, clients, an expired one and one from
another CA, written as PEM files into a directory, with the settings that use them.

Made fresh per test session with trustme (keys and certificates from ``cryptography``), so
no key material is committed and nothing expires in the repository. Keys are written as
PKCS#8 (``-----BEGIN PRIVATE KEY-----``), the only private-key form Kafka's PEM reader
accepts (KIP-651), so a file that works here works on a Kafka broker too.

- ``ca``: the trust anchor of the broker and of every client but ``foreign``;
- ``broker``: SAN 127.0.0.1 and localhost (clients verify the host name by default);
- ``client``: ``CN=client,OU=eng,O=strom``; ``service``: ``CN=Service-One,OU=ServiceUsers,O=strom``
  (a DN for ``ssl.principal.mapping.rules``);
- ``expired``: issued by ``ca``, valid until yesterday; ``foreign``: issued by another CA.

Every subject names its OU: trustme would otherwise add a random one, and tests compare DNs.

``broker_overrides`` gives the broker's ``listener.name.<listener>.ssl.*`` properties and
``confluent``/``kafka_python``/``aiokafka`` the same client identity in each client's own
settings, so a test reads as "this client, this certificate".
"""

from __future__ import annotations

import datetime
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme
from cryptography.hazmat.primitives import serialization

BROKER_KEY_PASSWORD = "broker-key-secret"


@dataclass(frozen=True)
class Identity:
    """A certificate and its key as files; ``subject`` is the DN as Kafka names it (RFC 2253)."""

    cert: Path  # the certificate then its chain, PEM
    key: Path  # PKCS#8, not encrypted
    subject: str


@dataclass(frozen=True)
class Certificates:
    directory: Path
    ca: Path  # the CA certificate (PEM): the truststore of broker and clients
    broker: Identity
    broker_keystore: Path  # key and chain in one file: ssl.keystore.location
    broker_encrypted_keystore: Path  # the same key encrypted with BROKER_KEY_PASSWORD
    client: Identity
    service: Identity
    expired: Identity
    foreign: Identity  # issued by another CA the broker does not trust

    def broker_overrides(self, listener: str = "SSL", client_auth: str = "none") -> dict[str, str]:
        """The broker's properties for a TLS listener named ``listener`` (PEM files, KIP-651)."""
        prefix = f"listener.name.{listener.lower()}."
        return {
            prefix + "ssl.keystore.type": "PEM",
            prefix + "ssl.keystore.location": str(self.broker_keystore),
            prefix + "ssl.truststore.type": "PEM",
            prefix + "ssl.truststore.location": str(self.ca),
            prefix + "ssl.client.auth": client_auth,
        }

    def confluent(self, identity: Identity | None = None) -> dict[str, Any]:
        """confluent-kafka (librdkafka) settings for SSL, with ``identity``'s certificate if given."""
        settings: dict[str, Any] = {"security.protocol": "SSL", "ssl.ca.location": str(self.ca)}
        if identity is not None:
            settings["ssl.certificate.location"] = str(identity.cert)
            settings["ssl.key.location"] = str(identity.key)
        return settings

    def kafka_python(self, identity: Identity | None = None) -> dict[str, Any]:
        """kafka-python settings for SSL, with ``identity``'s certificate if given."""
        settings: dict[str, Any] = {"security_protocol": "SSL", "ssl_cafile": str(self.ca)}
        if identity is not None:
            settings["ssl_certfile"] = str(identity.cert)
            settings["ssl_keyfile"] = str(identity.key)
        return settings

    def aiokafka(self, identity: Identity | None = None) -> dict[str, Any]:
        """aiokafka settings for SSL (an ``ssl_context`` from its own ``create_ssl_context``)."""
        from aiokafka.helpers import create_ssl_context

        context: ssl.SSLContext
        if identity is None:
            context = create_ssl_context(cafile=str(self.ca))
        else:
            context = create_ssl_context(cafile=str(self.ca), certfile=str(identity.cert),
                                         keyfile=str(identity.key))
        return {"security_protocol": "SSL", "ssl_context": context}


def make_certificates(directory: Path) -> Certificates:
    """Issue every certificate and write the PEM files into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="Strom test CA")
    other_ca = trustme.CA(organization_name="Another test CA")
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca.cert_pem.bytes())

    broker_cert = ca.issue_cert("127.0.0.1", "localhost", common_name="broker", organization_name="strom",
                                organization_unit_name="brokers")
    broker = _write(directory, "broker", broker_cert, "CN=broker,OU=brokers,O=strom")
    keystore = directory / "broker.keystore.pem"
    keystore.write_bytes(_pkcs8(broker_cert, None) + _chain(broker_cert))
    encrypted = directory / "broker.encrypted.keystore.pem"
    encrypted.write_bytes(_pkcs8(broker_cert, BROKER_KEY_PASSWORD) + _chain(broker_cert))

    now = datetime.datetime.now(datetime.UTC)
    return Certificates(
        directory=directory,
        ca=ca_file,
        broker=broker,
        broker_keystore=keystore,
        broker_encrypted_keystore=encrypted,
        client=_write(directory, "client", ca.issue_cert(
            "client.strom.test", common_name="client", organization_name="strom", organization_unit_name="eng"),
            "CN=client,OU=eng,O=strom"),
        service=_write(directory, "service", ca.issue_cert(
            "service.strom.test", common_name="Service-One", organization_name="strom",
            organization_unit_name="ServiceUsers"), "CN=Service-One,OU=ServiceUsers,O=strom"),
        expired=_write(directory, "expired", ca.issue_cert(
            "expired.strom.test", common_name="expired", organization_name="strom", organization_unit_name="eng",
            not_before=now - datetime.timedelta(days=2), not_after=now - datetime.timedelta(days=1)),
            "CN=expired,OU=eng,O=strom"),
        foreign=_write(directory, "foreign", other_ca.issue_cert(
            "foreign.strom.test", common_name="foreign", organization_name="elsewhere", organization_unit_name="eng"),
            "CN=foreign,OU=eng,O=elsewhere"),
    )


def _write(directory: Path, name: str, cert: trustme.LeafCert, subject: str) -> Identity:
    cert_file, key_file = directory / f"{name}.pem", directory / f"{name}.key"
    cert_file.write_bytes(_chain(cert))
    key_file.write_bytes(_pkcs8(cert, None))
    key_file.chmod(0o600)
    return Identity(cert_file, key_file, subject)


def _chain(cert: trustme.LeafCert) -> bytes:
    return b"".join(blob.bytes() for blob in cert.cert_chain_pems)


def _pkcs8(cert: trustme.LeafCert, password: str | None) -> bytes:
    """trustme's key (traditional OpenSSL form) re-written as PKCS#8, encrypted if ``password``."""
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    encryption: serialization.KeySerializationEncryption = (
        serialization.NoEncryption() if password is None
        else serialization.BestAvailableEncryption(password.encode()))
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
