"""DescribeUserScramCredentials (50, KIP-554): mechanisms and iterations per user, never keys;
all users for no names; RESOURCE_NOT_FOUND and DUPLICATE_RESOURCE as Kafka answers them."""

from __future__ import annotations

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from strom.protocol.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from strom.security.sasl.scram import SCRAM_SHA_256, SCRAM_SHA_512
from tests.support.broker_harness import BrokerHarness, BrokerRunner


def test_describe_named_all_unknown_and_duplicate_users(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        empty = await h.request(DescribeUserScramCredentialsRequest(users=()), version=0)
        assert (empty.error_code, empty.results) == (0, ())
        upserts = tuple(ScramCredentialUpsertion(name, scram.kip554_type, iterations, b"salt", b"x" * 32)
                        for name, scram, iterations in (("bob", SCRAM_SHA_512, 4096), ("alice", SCRAM_SHA_256, 5000),
                                                        ("alice", SCRAM_SHA_512, 6000)))
        await h.request(AlterUserScramCredentialsRequest(upsertions=upserts), version=0)
        every = await h.request(DescribeUserScramCredentialsRequest(users=None), version=0)
        assert [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
                for r in every.results] == [("alice", 0, [(1, 5000), (2, 6000)]), ("bob", 0, [(2, 4096)])]
        named = await h.request(DescribeUserScramCredentialsRequest(
            users=(UserName("bob"), UserName("nobody"), UserName("alice"), UserName("alice"))), version=0)
        assert [(r.user, r.error_code, r.error_message) for r in named.results] == [
            ("bob", ErrorCode.NONE, None),
            ("nobody", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody"),
            ("alice", ErrorCode.DUPLICATE_RESOURCE,
             "Cannot describe SCRAM credentials for the same user twice in a single request: alice"),
        ]

    broker.run(scenario)


def test_without_describe_on_the_cluster_the_answer_is_31(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:  # an authorizer and no ACL: User:ANONYMOUS may not
        response = await h.request(DescribeUserScramCredentialsRequest(users=(UserName("alice"),)), version=0)
        assert (response.error_code, response.error_message) == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
        assert [(r.user, r.error_code) for r in response.results] == [("", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]

    broker.run(scenario, {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
