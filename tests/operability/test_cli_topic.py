"""``strom topic …`` and ``strom cluster describe`` against a real broker: golden text and
JSON outputs, exit codes, and the one-line errors (unknown topic, existing topic,
unreachable broker, a bad -X property)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from strom.protocol.messages.create_acls_response import CreateAclsResponse
from strom.security.acl.model import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.support.acl import AUTHORIZER
from tests.support.broker_process import BrokerProcess
from tests.support.sasl import RawConnection
from tests.support.strom_cli import assert_golden, strom, strom_process

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # ACLs on, open where none is set: two topics refused to User:ANONYMOUS (a PLAINTEXT client)
    process = BrokerProcess(tmp_path_factory.mktemp("cli-topic") / "data", {
        "authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}).start()
    try:
        assert strom(process.bootstrap, "topic", "create", "unwritable", "hidden").code == 0
        denied = tuple(AclCreation(ResourceType.TOPIC, topic, PatternType.LITERAL, "User:ANONYMOUS", "*",
                                   operation, AclPermissionType.DENY)
                       for topic, operation in (("unwritable", AclOperation.WRITE), ("hidden", AclOperation.DESCRIBE)))
        # an ACL on a topic ends "no ACL found" for it: ANONYMOUS may still see 'unwritable', not write it
        denied += (AclCreation(ResourceType.TOPIC, "unwritable", PatternType.LITERAL, "User:ANONYMOUS", "*",
                               AclOperation.DESCRIBE, AclPermissionType.ALLOW),)
        with RawConnection(process.bootstrap) as connection:
            response = connection.request(CreateAclsRequest(denied), 3)
        assert isinstance(response, CreateAclsResponse)
        assert [result.error_code for result in response.results] == [0, 0, 0]
        yield process.bootstrap
    finally:
        process.stop()


def test_topic_lifecycle_golden(bootstrap: str) -> None:
    created = strom(bootstrap, "topic", "create", "orders", "payments", "-p", "2", "-c", "retention.ms=86400000")
    assert (created.code, created.err) == (0, "")
    assert_golden(GOLDEN, "topic_create.txt", created.out)

    assert_golden(GOLDEN, "topic_list.txt", strom(bootstrap, "topic", "list").out)
    assert_golden(GOLDEN, "topic_list.json", strom(bootstrap, "topic", "list", "--format", "json").out)
    assert_golden(GOLDEN, "topic_describe.txt", strom(bootstrap, "topic", "describe", "orders").out)

    altered = strom(bootstrap, "topic", "alter-config", "orders", "--set", "cleanup.policy=compact",
                    "--delete", "retention.ms")
    grown = strom(bootstrap, "topic", "add-partitions", "orders", "-p", "3")
    assert (altered.code, grown.code) == (0, 0)
    assert_golden(GOLDEN, "topic_alter_grow.txt", altered.out + grown.out)
    described = strom(bootstrap, "topic", "describe", "orders", "--format", "json")
    assert_golden(GOLDEN, "topic_describe_after.json", described.out)
    facts = json.loads(described.out)
    assert (facts["partition_count"], facts["configs"]) == (3, {"cleanup.policy": "compact"})

    deleted = strom(bootstrap, "topic", "delete", "payments")
    assert (deleted.code, deleted.out) == (0, "Deleted topic payments.\n")
    assert "payments" not in strom(bootstrap, "topic", "list").out.split()


def test_if_not_exists_and_if_exists(bootstrap: str) -> None:
    assert strom(bootstrap, "topic", "create", "twice").code == 0
    again = strom(bootstrap, "topic", "create", "twice")
    assert again.code == 1
    assert again.err.count("\n") == 1 and "TOPIC_ALREADY_EXISTS" in again.err
    quiet = strom(bootstrap, "topic", "create", "twice", "--if-not-exists")
    assert (quiet.code, quiet.out, quiet.err) == (0, "", "")
    gone = strom(bootstrap, "topic", "delete", "never-was", "--if-exists")
    assert (gone.code, gone.out) == (0, "")


@pytest.mark.parametrize(("argv", "code", "error"), [
    (("topic", "describe", "nope"), 1, "UNKNOWN_TOPIC_OR_PARTITION"),
    (("topic", "delete", "nope"), 1, "UNKNOWN_TOPIC_OR_PARTITION"),
    (("topic", "alter-config", "nope", "--set", "retention.ms=1"), 1, "UNKNOWN_TOPIC_OR_PARTITION"),
    (("topic", "alter-config", "nope"), 2, "nothing to change"),
    (("topic", "describe", "hidden"), 1, "TOPIC_AUTHORIZATION_FAILED"),
    (("topic", "list", "-X", "no.such.property=1"), 2, "no.such.property"),
    (("topic", "list", "-X", "security.protocol=SASL_SSL"), 2, "no TLS or SASL support yet"),
])
def test_errors_are_one_line(bootstrap: str, argv: tuple[str, ...], code: int, error: str) -> None:
    result = strom(bootstrap, *argv)
    assert result.code == code
    assert result.err.startswith(f"strom {argv[0]}") and result.err.count("\n") == 1 and error in result.err
    assert "Traceback" not in result.err


def test_cluster_describe_golden(bootstrap: str) -> None:
    port = bootstrap.rsplit(":", 1)[1]
    text = strom(bootstrap, "cluster", "describe").out
    # the port (five digits, an ephemeral one) and the count of APIs served vary; the layout does not
    text = re.sub(r"\d+ API keys, Metadata v\d+", "<N> API keys, Metadata v<M>", text.replace(port, "<PRT>"))
    assert_golden(GOLDEN, "cluster_describe.txt", text)
    facts = json.loads(strom(bootstrap, "cluster", "describe", "--format", "json").out)
    assert facts["controller"] == 1 and [b["id"] for b in facts["brokers"]] == [1]
    assert facts["brokers"][0]["port"] == int(bootstrap.rsplit(":", 1)[1])


def test_subprocess_end_to_end_and_unreachable_broker(bootstrap: str) -> None:
    """The real ``python -m strom`` with $STROM_BOOTSTRAP; a closed port is one line, exit 1."""
    created = strom_process(bootstrap, "topic", "create", "from-shell", "-p", "1")
    assert (created.code, created.out) == (0, "Created topic from-shell.\n")
    assert "from-shell" in strom_process(bootstrap, "topic", "list").out.split()
    closed = strom_process("127.0.0.1:1", "topic", "list", "-X", "request.timeout.ms=1000")
    assert closed.code == 1 and closed.out == ""
    assert closed.err.startswith("strom topic list: cannot reach the cluster") and closed.err.count("\n") == 1


def test_authorization_failure_on_produce_is_one_line(bootstrap: str) -> None:
    refused = strom(bootstrap, "produce", "unwritable", stdin="x\n")
    assert refused.code == 1 and refused.out == ""
    assert refused.err.startswith("strom produce: TOPIC_AUTHORIZATION_FAILED") and refused.err.count("\n") == 1


def test_acl_create_list_delete(bootstrap: str) -> None:
    created = strom(bootstrap, "acl", "create", "--topic", "audit-", "--resource-pattern-type", "prefixed",
                    "--allow-principal", "User:alice", "--operation", "read", "--operation", "write")
    assert created.code == 0, created.err
    listed = strom(bootstrap, "acl", "list")
    assert_golden(GOLDEN, "acl_list.txt", listed.out)
    removed = strom(bootstrap, "acl", "delete", "--topic", "audit-", "--allow-principal", "User:alice",
                    "--operation", "write", "--format", "json")
    assert [json.loads(line)["operation"] for line in removed.out.splitlines()] == ["WRITE"]
    left = strom(bootstrap, "acl", "list", "--principal", "User:alice", "--format", "json")
    assert [json.loads(line) for line in left.out.splitlines()] == [
        {"resource_type": "TOPIC", "resource_name": "audit-", "pattern_type": "PREFIXED", "principal": "User:alice",
         "host": "*", "operation": "READ", "permission": "ALLOW"}]
    refused = strom(bootstrap, "acl", "delete")
    assert refused.code == 2 and "refusing to delete every ACL" in refused.err


def test_user_scram_credentials(bootstrap: str) -> None:
    assert strom(bootstrap, "user", "set-password", "alice", "--password", "alice-secret").code == 0
    done = strom(bootstrap, "user", "set-password", "alice", "--password", "x", "--mechanism", "scram-sha-512",
                 "--iterations", "8192")
    assert (done.code, done.out) == (0, "SCRAM-SHA-512 credential for user 'alice' set.\n")
    assert_golden(GOLDEN, "user_list.txt", strom(bootstrap, "user", "list").out)
    assert strom(bootstrap, "user", "delete", "alice", "--mechanism", "SCRAM-SHA-256").code == 0
    left = strom(bootstrap, "user", "describe", "alice", "--format", "json")
    assert [json.loads(line) for line in left.out.splitlines()] == [
        {"user": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    unknown = strom(bootstrap, "user", "describe", "nobody")
    assert unknown.code == 1 and "RESOURCE_NOT_FOUND" in unknown.err and unknown.err.count("\n") == 1
    weak = strom(bootstrap, "user", "set-password", "bob", "--password", "p", "--iterations", "10")
    assert weak.code == 2 and "--iterations must be at least 4096" in weak.err
