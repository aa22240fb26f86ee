"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka does them: ``ScramFormatter``,
``ScramMessages`` and ``ScramSaslServer``.

A credential is what the broker keeps: ``salt``, ``StoredKey = H(HMAC(SaltedPassword, "Client
Key"))``, ``ServerKey = HMAC(SaltedPassword, "Server Key"))`` and the iteration count, written
as Kafka writes it, ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``; never the
password. ``SaltedPassword = Hi(password, salt, i)`` is PBKDF2-HMAC; as Kafka, the password is
not SASLprep'ed (its UTF-8 bytes are used).

The exchange, server side::

    client-first  n,[a=<authzid>],n=<name>,r=<client nonce>[,<ext>=<value>...]
    server-first  r=<client nonce><server nonce>,s=<b64 salt>,i=<iterations>
    client-final  c=<b64 gs2 header>,r=<nonce>,p=<b64 ClientProof>
    server-final  v=<b64 ServerSignature>

Only the gs2 header ``n`` (no channel binding) is accepted; names escape ``,`` as ``=2C`` and
``=`` as ``=3D``. A client proof is checked as ``H(proof XOR HMAC(StoredKey, AuthMessage)) ==
StoredKey``. Failures other than a foreign authorization id raise ``SaslError``, so the
client learns nothing about which part was wrong (or whether the user exists).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Final

from strom.security.sasl.mechanism import SaslAuthenticationError, SaslError

MIN_ITERATIONS: Final = 4096  # Kafka's ScramMechanism.minIterations, RFC 7677's "at least"
MAX_ITERATIONS: Final = 16384  # what AlterUserScramCredentials accepts (Kafka's ZkAdminManager)
DEFAULT_ITERATIONS: Final = 4096
LOGIN_MODULE: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    mechanism_name: str
    hash_name: str
    kip554_type: int  # the int8 of DescribeUserScramCredentials/AlterUserScramCredentials

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: bytes, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password, salt, iterations)

    def credential_from_salted_password(self, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
        client_key = self.hmac(salted_password, b"Client Key")
        return ScramCredential(salt, self.hash(client_key), self.hmac(salted_password, b"Server Key"), iterations)

    def credential(self, password: str, salt: bytes | None = None,
                   iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
        salt = secrets.token_bytes(32) if salt is None else salt
        return self.credential_from_salted_password(
            self.salted_password(password.encode("utf-8"), salt, iterations), salt, iterations)


SCRAM_SHA_256: Final = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512: Final = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
MECHANISMS: Final = {m.mechanism_name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE: Final = {m.kip554_type: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka_string(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString``."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_kafka_string(cls, text: str) -> ScramCredential:
        """The inverse of ``to_kafka_string``; ``ValueError`` for anything else."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


def escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise SaslError(f"invalid escape in SCRAM user name {name!r}")
    return name.replace("=2C", ",").replace("=3D", "=")


_CLIENT_FIRST: Final = re.compile(
    r"n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<name>[^,]*),r=(?P<nonce>[^,]*)(?P<extensions>(?:,[^,]*)*))")
_CLIENT_FINAL: Final = re.compile(
    r"(?P<without_proof>c=(?P<binding>[a-zA-Z0-9/+=]*),r=(?P<nonce>[^,]*)(?:,[^,]*)*?),p=(?P<proof>[a-zA-Z0-9/+=]+)")


class _State(Enum):
    RECEIVE_CLIENT_FIRST = 1
    RECEIVE_CLIENT_FINAL = 2
    COMPLETE = 3
    FAILED = 4


CredentialLookup = Callable[[str, str], "ScramCredential | None"]  # (user, mechanism) -> credential


class ScramServer:
    """One SCRAM exchange; ``lookup`` finds the user's credential for this mechanism."""

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup,
                 nonce: Callable[[], str] | None = None) -> None:
        self._scram = mechanism
        self.mechanism = mechanism.mechanism_name
        self._lookup = lookup
        self._new_nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self._state = _State.RECEIVE_CLIENT_FIRST
        self._username = ""
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    @property
    def is_complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def authorization_id(self) -> str:
        return self._username

    def credential_expiration_ms(self) -> int | None:
        return None  # delegation tokens (which expire) are not served

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            if self._state is _State.RECEIVE_CLIENT_FIRST:
                return self._client_first(response.decode("utf-8"))
            if self._state is _State.RECEIVE_CLIENT_FINAL:
                return self._client_final(response.decode("utf-8"))
        except (SaslError, UnicodeDecodeError, ValueError) as exc:
            self._state = _State.FAILED
            if isinstance(exc, SaslError):
                raise
            raise SaslError(f"invalid SCRAM message: {exc}") from None
        state, self._state = self._state, _State.FAILED
        raise SaslError(f"unexpected SCRAM message in state {state.name}")

    def _client_first(self, message: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise SaslError(f"invalid SCRAM client first message {message!r}")
        username = unescape_name(match["name"])
        extensions = dict(part.split("=", 1) for part in match["extensions"].split(",")[1:] if "=" in part)
        if extensions.get("tokenauth", "").lower() == "true":
            raise SaslError("delegation tokens are not supported")
        authorization_id = match["authzid"]
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        credential = self._lookup(username, self.mechanism)
        if credential is None:
            raise SaslError(f"no {self.mechanism} credential for user {username!r}")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                            f"for {self.mechanism}")
        self._username, self._credential = username, credential
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + self._new_nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = _State.RECEIVE_CLIENT_FINAL
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise SaslError("invalid SCRAM client final message")
        # Kafka's ScramSaslServer only checks that the nonce ends with the server's: librdkafka
        # 2.0 (Debian's kcat 1.7) sends its own nonce again in front of it.
        if not match["nonce"].endswith(self._nonce):
            raise SaslError("Invalid client nonce in the final client message.")
        if not base64.b64decode(match["binding"]).startswith(b"n,"):
            raise SaslError("channel binding is not supported")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{match['without_proof']}".encode()
        proof = base64.b64decode(match["proof"])
        signature = self._scram.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self._scram.hash(client_key), credential.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = self._scram.hmac(credential.server_key, auth_message)
        self._state = _State.COMPLETE
        return b"v=" + base64.b64encode(server_signature)
