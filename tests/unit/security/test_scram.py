"""SCRAM-SHA-256/512's server side against RFC 7677's exchange and a client written from RFC
5802's formulas: proofs, the server signature, Kafka's credential string, and each failure."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from strom.security.sasl.mechanism import SaslAuthenticationError, SaslError
from strom.security.sasl.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    escape_name,
    unescape_name,
)

# RFC 7677 section 3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_server(credential: ScramCredential | None = None) -> ScramServer:
    stored = credential or SCRAM_SHA_256.credential("pencil", RFC_SALT, 4096)
    return ScramServer(SCRAM_SHA_256, lambda user, mechanism: stored if user == "user" else None,
                       nonce=lambda: RFC_SERVER_NONCE)


def test_the_rfc_7677_exchange() -> None:
    server = rfc_server()
    assert server.evaluate_response(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.is_complete
    assert server.evaluate_response(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.is_complete and server.authorization_id == "user"
    assert server.credential_expiration_ms() is None


def client_final(scram: ScramMechanism, password: str, client_first_bare: str, server_first: str,
                 gs2_header: str = "n,,", nonce_prefix: str = "") -> str:
    """RFC 5802's client side: ClientProof = ClientKey XOR HMAC(H(ClientKey), AuthMessage)."""
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(scram.hash_name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", scram.hash_name).digest()
    without_proof = f"c={base64.b64encode(gs2_header.encode()).decode()},r={nonce_prefix}{fields['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(scram.hash(client_key), auth_message, scram.hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


@pytest.mark.parametrize("scram", [SCRAM_SHA_256, SCRAM_SHA_512], ids=lambda s: s.mechanism_name)
@pytest.mark.parametrize("user", ["alice", "a,b=c"])
def test_a_client_built_from_rfc_5802_authenticates(scram: ScramMechanism, user: str) -> None:
    credential = scram.credential("secret", iterations=4096)
    server = ScramServer(scram, lambda name, mechanism: credential if (name, mechanism) == (user, scram.mechanism_name)
                         else None)
    bare = f"n={escape_name(user)},r=clientnonce"
    server_first = server.evaluate_response(f"n,,{bare}".encode()).decode()
    final = server.evaluate_response(client_final(scram, "secret", bare, server_first).encode())
    auth_message = f"{bare},{server_first},{client_final(scram, 'secret', bare, server_first).rsplit(',p=', 1)[0]}"
    expected = hmac.new(credential.server_key, auth_message.encode(), scram.hash_name).digest()
    assert final == b"v=" + base64.b64encode(expected)
    assert server.authorization_id == user


def test_a_wrong_password_and_an_unknown_user_fail_alike_without_a_client_message() -> None:
    server = rfc_server()
    server_first = server.evaluate_response(RFC_CLIENT_FIRST).decode()
    with pytest.raises(SaslError) as wrong:
        server.evaluate_response(client_final(SCRAM_SHA_256, "not-pencil", "n=user,r=rOprNGfwEbeRWgbNEkqO",
                                              server_first).encode())
    with pytest.raises(SaslError) as unknown:
        rfc_server().evaluate_response(b"n,,n=nobody,r=abc")
    for failure in (wrong, unknown):  # SaslError, not SaslAuthenticationError: the client gets the generic text
        assert not isinstance(failure.value, SaslAuthenticationError)


@pytest.mark.parametrize(("message", "error"), [
    (b"n,a=admin,n=user,r=abc", SaslAuthenticationError),  # a foreign authorization id
    (b"y,,n=user,r=abc", SaslError),  # channel binding
    (b"n,,n=user,r=abc,tokenauth=true", SaslError),  # delegation tokens
    (b"n,,n=us=er,r=abc", SaslError),  # a bad escape
    (b"garbage", SaslError),
])
def test_client_first_messages_kafka_refuses(message: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        rfc_server().evaluate_response(message)


def test_a_final_nonce_with_the_client_nonce_repeated_in_front_authenticates_as_in_kafka() -> None:
    """librdkafka 2.0 (Debian's kcat) sends r=<client nonce><client nonce><server nonce>; Kafka
    checks only that it ends with the server-first nonce, and signs what the client sent."""
    credential = SCRAM_SHA_512.credential("secret", iterations=4096)
    server = ScramServer(SCRAM_SHA_512, lambda name, mechanism: credential)
    bare = "n=alice,r=clientnonce"
    server_first = server.evaluate_response(f"n,,{bare}".encode()).decode()
    final = client_final(SCRAM_SHA_512, "secret", bare, server_first, nonce_prefix="clientnonce")
    assert server.evaluate_response(final.encode()).startswith(b"v=")
    assert server.is_complete


def test_a_stored_credential_below_the_minimum_iterations_fails() -> None:
    weak = SCRAM_SHA_256.credential("pencil", RFC_SALT, 1000)
    with pytest.raises(SaslError, match="less than the minimum"):
        rfc_server(weak).evaluate_response(RFC_CLIENT_FIRST)


def test_a_final_message_with_another_nonce_fails() -> None:
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    with pytest.raises(SaslError, match="nonce"):
        server.evaluate_response(RFC_CLIENT_FINAL.replace(b"k0,p=", b"k1,p="))


def test_kafkas_credential_string_round_trips() -> None:
    credential = SCRAM_SHA_512.credential("secret", b"\x01\x02", 8192)
    text = credential.to_kafka_string()
    assert text.startswith("salt=AQI=,stored_key=") and text.endswith(",iterations=8192")
    assert ScramCredential.from_kafka_string(text) == credential
    with pytest.raises(ValueError):
        ScramCredential.from_kafka_string("salt=AQI=,iterations=1")


def test_names_escape_and_unescape_as_rfc_5802() -> None:
    assert escape_name("a,b=c") == "a=2Cb=3Dc"
    assert unescape_name("a=2Cb=3Dc") == "a,b=c"
