"""AlterUserScramCredentials (51, KIP-554): upserts and deletions with Kafka's per-user errors;
what is stored is the salt, stored key, server key and iterations (never the password),
kept across a restart."""

from __future__ import annotations

import os

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from strom.protocol.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from strom.security.sasl.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramMechanism
from tests.support.broker_harness import BrokerHarness, BrokerRunner


def upsertion(name: str, scram: ScramMechanism = SCRAM_SHA_256, iterations: int = 4096,
              password: str = "secret") -> ScramCredentialUpsertion:
    salt = b"salt-of-" + name.encode()
    return ScramCredentialUpsertion(name, scram.kip554_type, iterations, salt,
                                    scram.salted_password(password.encode(), salt, iterations))


def results(response: object) -> list[tuple[str, int, str | None]]:
    return [(r.user, r.error_code, r.error_message) for r in response.results]  # type: ignore[attr-defined]


def test_kafkas_errors_each_fail_only_that_users_alterations(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        request = AlterUserScramCredentialsRequest(
            deletions=(ScramCredentialDeletion("ghost", SCRAM_SHA_256.kip554_type),),
            upsertions=(upsertion("alice"), upsertion("few", iterations=1000), upsertion("many", iterations=16385),
                        ScramCredentialUpsertion("odd", 3, 4096, b"s", b"p"), upsertion("twice"),
                        upsertion("twice", password="other"), upsertion("", SCRAM_SHA_512)))
        response = await h.request(request, version=0)
        assert results(response) == [
            ("ghost", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
            ("alice", ErrorCode.NONE, None),
            ("few", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            ("many", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            ("odd", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            ("twice", ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
            ("", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        ]
        described = await h.request(DescribeUserScramCredentialsRequest(users=None), version=0)
        assert [r.user for r in described.results] == ["alice"]

    broker.run(scenario)


def test_a_credential_is_stored_as_kafka_stores_it_and_survives_a_restart(broker: BrokerRunner) -> None:
    async def add(h: BrokerHarness) -> None:
        response = await h.request(AlterUserScramCredentialsRequest(
            upsertions=(upsertion("alice"), upsertion("alice", SCRAM_SHA_512, 8192), upsertion("bob"))), version=0)
        assert [code for _, code, _ in results(response)] == [0, 0]

    broker.run(add)
    stored = (broker.data_dir / "broker-configs" / "users" / "alice").read_text()
    expected = SCRAM_SHA_256.credential("secret", b"salt-of-alice", 4096).to_kafka_string()
    assert stored.startswith('{"version":1,"config":{') and f'"SCRAM-SHA-256":"{expected}"' in stored
    assert "secret" not in stored.replace("salt", "").replace("server_key", "")  # no password kept

    async def delete_and_describe(h: BrokerHarness) -> None:
        response = await h.request(AlterUserScramCredentialsRequest(
            deletions=(ScramCredentialDeletion("alice", SCRAM_SHA_256.kip554_type),
                       ScramCredentialDeletion("bob", SCRAM_SHA_256.kip554_type))), version=0)
        assert [code for _, code, _ in results(response)] == [0, 0]
        described = await h.request(DescribeUserScramCredentialsRequest(users=(UserName("alice"),)), version=0)
        assert [(c.mechanism, c.iterations) for c in described.results[0].credential_infos] == [(2, 8192)]

    broker.run(delete_and_describe)
    assert sorted(os.listdir(broker.data_dir / "broker-configs" / "users")) == ["alice"]


def test_without_alter_on_the_cluster_every_user_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:  # an authorizer and no ACL: User:ANONYMOUS may not
        response = await h.request(AlterUserScramCredentialsRequest(
            deletions=(ScramCredentialDeletion("bob", SCRAM_SHA_256.kip554_type),),
            upsertions=(upsertion("alice"), upsertion("bob", SCRAM_SHA_512))), version=0)
        assert results(response) == [("bob", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
                                     ("alice", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")]

    broker.run(scenario, {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    assert not (broker.data_dir / "broker-configs" / "users").exists()
