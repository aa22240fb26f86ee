"""OAUTHBEARER's server side and Kafka's unsecured JWS validator rules."""

from __future__ import annotations

import json

import pytest

from strom.security.sasl.mechanism import SaslAuthenticationError, SaslError
from strom.security.sasl.oauthbearer import (
    OAuthBearerServer,
    TokenValidationError,
    UnsecuredJwsValidator,
    ValidatedToken,
)
from tests.support.sasl import oauth_initial_response, unsecured_jwt

NOW_S = 1_700_000_000.0
validator = UnsecuredJwsValidator(clock_ms=lambda: NOW_S * 1000)


def test_librdkafkas_token_with_fractional_times_is_accepted() -> None:
    token = validator(unsecured_jwt({"sub": "alice", "iat": NOW_S - 0.5, "exp": NOW_S + 600.25, "scope": "a b"}))
    assert token == ValidatedToken("alice", int((NOW_S + 600.25) * 1000), frozenset({"a", "b"}))


@pytest.mark.parametrize(("claims", "message"), [
    ({"exp": NOW_S + 60}, "No principal claim"),
    ({"sub": "", "exp": NOW_S + 60}, "No principal claim"),
    ({"sub": "alice"}, "No expiration time"),
    ({"sub": "alice", "exp": NOW_S - 1}, "expired"),
    ({"sub": "alice", "exp": NOW_S + 60, "iat": NOW_S + 30}, "Issued At"),
])
def test_kafkas_claim_rules(claims: dict[str, object], message: str) -> None:
    with pytest.raises(TokenValidationError, match=message):
        validator(unsecured_jwt(claims))


def test_options_clock_skew_principal_claim_and_required_scope() -> None:
    lenient = UnsecuredJwsValidator.from_jaas_options({
        "unsecuredValidatorAllowableClockSkewMs": "5000", "unsecuredValidatorPrincipalClaimName": "user",
        "unsecuredValidatorRequiredScope": "write"})
    lenient = UnsecuredJwsValidator(lenient.principal_claim_name, lenient.scope_claim_name, lenient.required_scope,
                                    lenient.allowable_clock_skew_ms, clock_ms=lambda: NOW_S * 1000)
    assert lenient(unsecured_jwt({"user": "bob", "exp": NOW_S - 2, "scope": ["write"]})).principal == "bob"
    with pytest.raises(TokenValidationError, match="required scope"):
        lenient(unsecured_jwt({"user": "bob", "exp": NOW_S + 60, "scope": "read"}))


def test_signed_or_non_none_tokens_are_refused() -> None:
    token = unsecured_jwt({"sub": "alice", "exp": NOW_S + 60})
    with pytest.raises(TokenValidationError, match="empty signature"):
        validator(token + "c2ln")
    header = "eyJhbGciOiJIUzI1NiJ9"  # {"alg":"HS256"}
    with pytest.raises(TokenValidationError, match="alg 'none'"):
        validator(header + token[token.index("."):])


def test_a_valid_token_authenticates_its_principal_until_it_expires() -> None:
    server = OAuthBearerServer(validator)
    assert server.evaluate_response(oauth_initial_response(unsecured_jwt({"sub": "alice", "exp": NOW_S + 60}))) == b""
    assert server.is_complete and server.authorization_id == "alice"
    assert server.credential_expiration_ms() == int((NOW_S + 60) * 1000)


def test_an_invalid_token_gets_the_json_challenge_then_fails_with_the_reason() -> None:
    server = OAuthBearerServer(validator)
    challenge = server.evaluate_response(oauth_initial_response(unsecured_jwt({"exp": NOW_S + 60})))
    assert json.loads(challenge) == {"status": "invalid_token"}
    with pytest.raises(SaslAuthenticationError, match="Authentication failed: No principal claim"):
        server.evaluate_response(b"\x01")
    assert not server.is_complete


def test_a_foreign_authorization_id_and_a_malformed_response_fail() -> None:
    token = unsecured_jwt({"sub": "alice", "exp": NOW_S + 60})
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        OAuthBearerServer(validator).evaluate_response(oauth_initial_response(token, authzid="bob"))
    with pytest.raises(SaslError):
        OAuthBearerServer(validator).evaluate_response(b"n,,auth=Bearer x")


def test_the_validator_is_a_seam() -> None:
    def accept_opaque(token: str) -> ValidatedToken:
        if token != "opaque-token":
            raise TokenValidationError("unknown token")
        return ValidatedToken("service", 0)

    server = OAuthBearerServer(accept_opaque)
    server.evaluate_response(oauth_initial_response("opaque-token"))
    assert server.authorization_id == "service"
