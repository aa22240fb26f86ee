"""SASL/OAUTHBEARER's server side (RFC 7628) as Kafka's ``OAuthBearerSaslServer``, with its
development-only validator of unsecured JWS tokens (``OAuthBearerUnsecuredValidatorCallbackHandler``).

The client's initial response is ``n,[a=<authzid>],`` ``\\x01auth=Bearer <token>\\x01``
[``<key>=<value>\\x01`` ...] ``\\x01``. The token goes to a validator (the seam for a real one:
any ``TokenValidator``); a valid token's principal is the authorization id (an ``a=`` that
differs fails), its expiry bounds the session (KIP-368). An invalid token is answered, as
RFC 7628 asks, with a JSON error as the challenge (``{"status":"invalid_token"}``); the client
answers with a lone ``\\x01`` and the exchange fails with the validator's message.

Unsecured tokens are ``base64url(header).base64url(claims).`` with ``"alg":"none"`` and no
signature (librdkafka's ``enable.sasl.oauthbearer.unsecure.jwt``, Kafka's unsecured login
module). Kafka's rules, with its JAAS options: the principal claim
(``unsecuredValidatorPrincipalClaimName``, default ``sub``) must be a non-empty string; ``exp``
is required and must not have passed, ``iat`` if present must not be in the future, both
with ``unsecuredValidatorAllowableClockSkewMs`` (default 0) of slack; times are seconds and
may be fractional (librdkafka writes ``%.3f``); ``unsecuredValidatorRequiredScope`` lists
scopes the ``scope`` claim (``unsecuredValidatorScopeClaimName``) must all hold.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from strom.security.sasl.mechanism import SaslAuthenticationError, SaslError

MECHANISM: Final = "OAUTHBEARER"
LOGIN_MODULE: Final = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_INITIAL_RESPONSE: Final = re.compile(
    r"n,(?:a=(?P<authzid>[^,\x01]*))?,\x01(?P<pairs>(?:[a-zA-Z]+=[\x21-\x7E \t\r\n]*\x01)*)\x01", re.DOTALL)
_BEARER: Final = re.compile(r"[Bb]earer +(?P<token>[-_.a-zA-Z0-9]+)")


class TokenValidationError(Exception):
    """The token is not accepted; the message says why (sent to the client as Kafka does)."""


@dataclass(frozen=True, slots=True)
class ValidatedToken:
    principal: str
    lifetime_ms: int  # when it expires, epoch ms
    scope: frozenset[str] = frozenset()


TokenValidator = Callable[[str], ValidatedToken]
"""A compact-serialised token in, what it says out; ``TokenValidationError`` if refused."""


def _b64url_json(part: str, what: str) -> dict[str, object]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError) as exc:
        raise TokenValidationError(f"the token's {what} is not base64url-encoded JSON: {exc}") from None
    if not isinstance(decoded, dict):
        raise TokenValidationError(f"the token's {what} is not a JSON object")
    return decoded


@dataclass(frozen=True, slots=True)
class UnsecuredJwsValidator:
    """Kafka's unsecured validator; the options are its JAAS options' values."""

    principal_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    required_scope: frozenset[str] = frozenset()
    allowable_clock_skew_ms: int = 0
    clock_ms: Callable[[], float] = lambda: time.time() * 1000

    @classmethod
    def from_jaas_options(cls, options: Mapping[str, str]) -> UnsecuredJwsValidator:
        try:
            skew = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0"))
        except ValueError:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must be an integer") from None
        return cls(options.get("unsecuredValidatorPrincipalClaimName", "sub") or "sub",
                   options.get("unsecuredValidatorScopeClaimName", "scope") or "scope",
                   frozenset(s for s in re.split(r"[\s,]+", options.get("unsecuredValidatorRequiredScope", "")) if s),
                   skew)

    def __call__(self, token: str) -> ValidatedToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenValidationError("an unsecured JWS has three parts separated by '.'")
        header, claims = _b64url_json(parts[0], "header"), _b64url_json(parts[1], "claims")
        if parts[2]:
            raise TokenValidationError("an unsecured JWS must have an empty signature")
        if header.get("alg") != "none":
            raise TokenValidationError(f"unsecured JWS must have alg 'none', not {header.get('alg')!r}")
        principal = claims.get(self.principal_claim_name)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenValidationError(f"No principal claim ({self.principal_claim_name!r}) in the token")
        now_ms = self.clock_ms()
        expiration = claims.get("exp")
        if not isinstance(expiration, int | float) or isinstance(expiration, bool):
            raise TokenValidationError("No expiration time ('exp') in the token")
        if now_ms > expiration * 1000 + self.allowable_clock_skew_ms:
            raise TokenValidationError(f"The indicated time ({expiration} s) is expired")
        issued_at = claims.get("iat")
        if isinstance(issued_at, int | float) and not isinstance(issued_at, bool) \
                and issued_at * 1000 > now_ms + self.allowable_clock_skew_ms:
            raise TokenValidationError(f"The Issued At value ({issued_at} s) is after the current time")
        scope = _scope(claims.get(self.scope_claim_name))
        missing = self.required_scope - scope
        if missing:
            raise TokenValidationError(f"The provided scope lacks required scope(s): {sorted(missing)}")
        return ValidatedToken(principal, int(expiration * 1000), scope)


def _scope(claim: object) -> frozenset[str]:
    if isinstance(claim, str):
        return frozenset(claim.split())
    if isinstance(claim, list):
        return frozenset(item for item in claim if isinstance(item, str))
    return frozenset()


class OAuthBearerServer:
    mechanism = MECHANISM

    def __init__(self, validator: TokenValidator) -> None:
        self._validate = validator
        self._token: ValidatedToken | None = None
        self._error: str | None = None  # a refused token, until the client's \x01

    @property
    def is_complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        return self._token.principal if self._token is not None else ""

    def credential_expiration_ms(self) -> int | None:
        return self._token.lifetime_ms if self._token is not None else None

    def evaluate_response(self, response: bytes) -> bytes:
        if self._error is not None:
            if response != b"\x01":
                raise SaslError("expected the client's \\x01 after an error challenge")
            raise SaslAuthenticationError(f"Authentication failed: {self._error}")
        if self._token is not None:
            raise SaslError("OAUTHBEARER authentication already complete")
        match = _INITIAL_RESPONSE.fullmatch(response.decode("utf-8", errors="replace"))
        if match is None:
            raise SaslError("invalid OAUTHBEARER client initial response")
        pairs = dict(item.split("=", 1) for item in match["pairs"].split("\x01") if item)
        bearer = _BEARER.fullmatch(pairs.get("auth", ""))
        if bearer is None:
            raise SaslError("the OAUTHBEARER initial response has no 'auth=Bearer <token>'")
        try:
            token = self._validate(bearer["token"])
        except TokenValidationError as exc:
            self._error = str(exc)
            return json.dumps({"status": "invalid_token"}).encode()
        authorization_id = match["authzid"]
        if authorization_id and authorization_id != token.principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authorization_id}) that is "
                f"different from the token's principal name ({token.principal})")
        self._token = token
        return b""
