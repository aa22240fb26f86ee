"""A TLS listener's ``ssl.SSLContext``, built from Kafka's ``ssl.*`` settings (PEM, KIP-651).

Each setting is read for one listener: ``listener.name.<listener>.ssl.<name>`` where given,
else the broker-wide ``ssl.<name>`` (Kafka's ``valuesWithPrefixOverride``). The settings and
what they become (``ListenerTls.context``, a server-side context with TLS 1.2 as the floor):

- key material, PEM only: ``ssl.keystore.location`` (one file with the private key and the
  certificate chain) or inline ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``,
  the key encrypted with ``ssl.key.password`` if at all. Kafka's other store types (JKS,
  PKCS12) need Java or conversion and are refused with one line. Kafka's own mixes are
  refused too: a key without a chain, a location with inline values, a store password with
  PEM. Inline PEM may arrive with its line breaks folded away (a ``\\``-continued properties
  value): the blocks are re-wrapped before OpenSSL reads them.
- trust: ``ssl.truststore.location`` (PEM certificates) or inline
  ``ssl.truststore.certificates``; none given, the system's CAs (as Java's default store).
- ``ssl.enabled.protocols`` (TLSv1.2,TLSv1.3) bounds the versions, ``ssl.protocol`` caps
  them (TLSv1.2 means no TLS 1.3, as Kafka documents); older versions are not served.
- ``ssl.cipher.suites``: IANA names as Kafka takes them (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``)
  or OpenSSL's (``ECDHE-RSA-AES128-GCM-SHA256``) for TLS 1.2. Python's ``ssl`` cannot narrow
  TLS 1.3's suites: they are accepted by name, OpenSSL's (all AEAD) stay enabled, and a
  list without any TLS 1.2 suite turns TLS 1.2 off.
- ``ssl.client.auth``: none, requested (a certificate asked for, verified if given) or
  required; ``ssl.principal.mapping.rules`` maps a verified certificate's DN to the
  principal (``strom.security.ssl_principal_mapper``).

Every problem is a ``TlsConfigError`` with one line naming the listener and the property,
raised when the broker's config is read, so a bad file stops the broker at start.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from strom.security.ssl_principal_mapper import InvalidRule, SslPrincipalMapper

if TYPE_CHECKING:
    from strom.broker.config import BrokerConfig

TLS_PROTOCOLS: Final = frozenset({"SSL", "SASL_SSL"})  # the security protocols that run over TLS
CLIENT_AUTH: Final = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS: Final = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_PEM_BLOCK: Final = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)
_SETTINGS: Final = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.truststore.password", "ssl.protocol", "ssl.enabled.protocols",
    "ssl.cipher.suites", "ssl.client.auth", "ssl.principal.mapping.rules",
)


class TlsConfigError(ValueError):
    """A TLS setting the broker cannot start with; the message is one line."""


@dataclass(frozen=True, slots=True)
class ListenerTls:
    """What a connection on a TLS listener needs: the context and the principal mapping."""

    listener: str
    context: ssl.SSLContext
    principal_mapper: SslPrincipalMapper


def listener_tls(config: BrokerConfig, listener: str) -> ListenerTls:
    """Read ``listener``'s ``ssl.*`` settings and build its context (``TlsConfigError`` if bad)."""

    def setting(name: str) -> str:
        value = config.listener_property(listener, name)
        if value is None:
            value = str(getattr(config, name.replace(".", "_")))
        return value.strip()

    return build_listener_tls(listener, setting)


def build_listener_tls(listener: str, setting: Callable[[str], str]) -> ListenerTls:
    """The same from a lookup of the effective value of each ``ssl.*`` name."""
    values = {name: setting(name) for name in _SETTINGS}

    def fail(name: str, problem: str) -> TlsConfigError:
        return TlsConfigError(f"listener {listener}: {name}: {problem}")

    for store in ("keystore", "truststore"):
        store_type = values[f"ssl.{store}.type"]
        if store_type.upper() != "PEM":
            raise fail(f"ssl.{store}.type", f"{store_type} is not supported: only PEM key material is "
                                            "(KIP-651; convert the store with openssl or keytool)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(context, values, fail)
    _set_ciphers(context, values["ssl.cipher.suites"], fail)
    _load_keystore(context, values, fail)
    _load_truststore(context, values, fail)
    client_auth = values["ssl.client.auth"].lower()
    if client_auth not in CLIENT_AUTH:
        raise fail("ssl.client.auth", f"{values['ssl.client.auth']!r} must be one of none, requested, required")
    context.verify_mode = CLIENT_AUTH[client_auth]
    try:
        mapper = SslPrincipalMapper(values["ssl.principal.mapping.rules"])
    except InvalidRule as exc:
        raise fail("ssl.principal.mapping.rules", str(exc)) from None
    return ListenerTls(listener, context, mapper)


def _set_versions(context: ssl.SSLContext, values: dict[str, str],
                  fail: Callable[[str, str], TlsConfigError]) -> None:
    enabled = [name.strip() for name in values["ssl.enabled.protocols"].split(",") if name.strip()] or list(_VERSIONS)
    for name in enabled:
        if name not in _VERSIONS:
            raise fail("ssl.enabled.protocols", f"{name} is not supported: Strom serves TLSv1.2 and TLSv1.3")
    protocol = values["ssl.protocol"]
    if protocol not in ("TLS", *_VERSIONS):
        raise fail("ssl.protocol", f"{protocol} is not supported: use TLSv1.3, TLSv1.2 or TLS")
    versions = sorted(_VERSIONS[name] for name in enabled)
    highest = min(versions[-1], _VERSIONS.get(protocol, versions[-1]))
    if highest < versions[0]:
        raise fail("ssl.protocol", f"{protocol} is below every version of ssl.enabled.protocols")
    context.minimum_version, context.maximum_version = versions[0], highest


def _set_ciphers(context: ssl.SSLContext, text: str, fail: Callable[[str, str], TlsConfigError]) -> None:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        return
    tls13 = {cipher["name"] for cipher in context.get_ciphers() if cipher["protocol"] == "TLSv1.3"}
    tls12 = [_openssl_name(name) for name in names if name not in tls13]
    known = _known_tls12_ciphers()
    for name, openssl_name in zip([n for n in names if n not in tls13], tls12, strict=True):
        if openssl_name not in known:
            raise fail("ssl.cipher.suites", f"unknown cipher suite {name}")
    if not tls12:  # only TLS 1.3 suites: Kafka would have no TLS 1.2 suite left either
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        if context.maximum_version < ssl.TLSVersion.TLSv1_3:
            raise fail("ssl.cipher.suites", "lists only TLS 1.3 suites but TLSv1.3 is not enabled")
        return
    try:
        context.set_ciphers(":".join(tls12))
    except ssl.SSLError:
        raise fail("ssl.cipher.suites", f"OpenSSL accepts none of {', '.join(names)}") from None


def _openssl_name(name: str) -> str:
    """An IANA TLS 1.2 suite name (Java's, as Kafka takes them) in OpenSSL's spelling; an
    OpenSSL name is returned as it is."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    exchange, _, cipher = name[4:].partition("_WITH_")
    cipher = (cipher.replace("AES_128", "AES128").replace("AES_256", "AES256")
              .replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305").replace("_CBC", "").replace("_", "-"))
    return cipher if exchange == "RSA" else f"{exchange.replace('_', '-')}-{cipher}"


def _known_tls12_ciphers() -> set[str]:
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    probe.set_ciphers("ALL:@SECLEVEL=0")
    return {cipher["name"] for cipher in probe.get_ciphers()}


def _load_keystore(context: ssl.SSLContext, values: dict[str, str],
                   fail: Callable[[str, str], TlsConfigError]) -> None:
    location = values["ssl.keystore.location"]
    chain, key = values["ssl.keystore.certificate.chain"], values["ssl.keystore.key"]
    password = values["ssl.key.password"]
    if values["ssl.keystore.password"]:
        raise fail("ssl.keystore.password", "cannot be given with PEM key material: give ssl.key.password "
                                            "for an encrypted key")
    if location and (chain or key):
        raise fail("ssl.keystore.location", "give either the location or the inline "
                                            "ssl.keystore.certificate.chain and ssl.keystore.key, not both")
    if bool(chain) != bool(key):
        missing = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain"
        raise fail(missing, "missing: inline key material needs both the certificate chain and the key")
    if location:
        text = _read(location, "ssl.keystore.location", fail)
        _check_pem(text, "ssl.keystore.location", fail)
        _load_chain(context, location, password, text, "ssl.keystore.location", fail)
    elif chain:
        text = _normalise_pem(chain) + _normalise_pem(key)
        _check_pem(text, "ssl.keystore.certificate.chain/ssl.keystore.key", fail)
        with _private_file(text) as path:
            _load_chain(context, path, password, text, "ssl.keystore.key", fail)
    else:
        raise fail("ssl.keystore.location", "a TLS listener needs a certificate: set ssl.keystore.location, or "
                                            "ssl.keystore.certificate.chain and ssl.keystore.key")


def _load_chain(context: ssl.SSLContext, path: str, password: str, text: str, name: str,
                fail: Callable[[str, str], TlsConfigError]) -> None:
    try:
        context.load_cert_chain(path, password=password)  # a str, never None: OpenSSL must not prompt
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise fail(name, "the private key does not match the certificate") from None
        if "ENCRYPTED PRIVATE KEY" in text or "Proc-Type: 4,ENCRYPTED" in text:
            raise fail("ssl.key.password", "cannot decrypt the private key (wrong or missing password)") from None
        raise fail(name, f"cannot load the key and certificate chain: {exc.reason or exc}") from None


def _check_pem(text: str, name: str, fail: Callable[[str, str], TlsConfigError]) -> None:
    kinds = [match.group(1) for match in _PEM_BLOCK.finditer(text)]
    if "CERTIFICATE" not in kinds:
        raise fail(name, "no PEM certificate (-----BEGIN CERTIFICATE-----) found")
    if not any(kind.endswith("PRIVATE KEY") for kind in kinds):
        raise fail(name, "no PEM private key (-----BEGIN PRIVATE KEY-----, PKCS#8) found")


def _load_truststore(context: ssl.SSLContext, values: dict[str, str],
                     fail: Callable[[str, str], TlsConfigError]) -> None:
    location, inline = values["ssl.truststore.location"], values["ssl.truststore.certificates"]
    if values["ssl.truststore.password"]:
        raise fail("ssl.truststore.password", "cannot be given with a PEM truststore")
    if location and inline:
        raise fail("ssl.truststore.location", "give either the location or ssl.truststore.certificates, not both")
    try:
        if location:
            text = _read(location, "ssl.truststore.location", fail)
            if "-----BEGIN CERTIFICATE-----" not in text:
                raise fail("ssl.truststore.location", f"no PEM certificate in {location}")
            context.load_verify_locations(cafile=location)
        elif inline:
            certificates = _normalise_pem(inline)
            if "-----BEGIN CERTIFICATE-----" not in certificates:
                raise fail("ssl.truststore.certificates", "no PEM certificate (-----BEGIN CERTIFICATE-----) found")
            context.load_verify_locations(cadata=certificates)
        else:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except ssl.SSLError as exc:
        name = "ssl.truststore.location" if location else "ssl.truststore.certificates"
        raise fail(name, f"cannot load the certificates: {exc.reason or exc}") from None


def _read(path: str, name: str, fail: Callable[[str, str], TlsConfigError]) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read()
    except OSError as exc:
        raise fail(name, f"cannot read {path}: {exc.strerror or exc}") from None


def _normalise_pem(text: str) -> str:
    """PEM blocks re-wrapped at 64 columns: an inline value may have lost its line breaks."""
    blocks = []
    for match in _PEM_BLOCK.finditer(text):
        kind, body = match.group(1), match.group(2)
        headers, body_text = "", body
        if "Proc-Type:" in body:  # a traditional encrypted key: its headers keep their lines
            head, _, body_text = body.strip().partition("\n\n")
            headers = head.strip() + "\n\n"
        encoded = "".join(body_text.split())
        lines = "\n".join(encoded[i:i + 64] for i in range(0, len(encoded), 64))
        blocks.append(f"-----BEGIN {kind}-----\n{headers}{lines}\n-----END {kind}-----\n")
    return "".join(blocks)


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[str]:
    """A file only this user can read, holding ``text`` while OpenSSL loads it (it reads key
    material only from files), removed at once."""
    descriptor, path = tempfile.mkstemp(prefix="strom-keystore-", suffix=".pem")
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(text)
        yield path
    finally:
        os.unlink(path)
