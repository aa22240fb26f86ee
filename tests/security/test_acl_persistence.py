"""ACLs kept across a restart, ``allow.everyone.if.no.acl.found``, and the authorizer's settings
refused with one line.

One broker (ACL authorizer, ``allow.everyone.if.no.acl.found=true``): a topic without any ACL is
open to every principal, a topic with an ACL for someone else is not (the setting applies only
to resources with no ACL at all); after a restart the ACLs, read back from the data directory,
decide the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from strom.security.acl.model import AclOperation, ResourceType
from tests.support.acl import acl_broker, allow, create_acls, create_topics, request_as
from tests.support.sasl import SaslBroker

OWNED, FREE = "acl-owned", "acl-free"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    with acl_broker(tmp_path_factory.mktemp("acl-open") / "data",
                    {"allow.everyone.if.no.acl.found": "true"}) as running:
        create_topics(running, [OWNED, FREE])
        yield running


def _read(broker: SaslBroker, user: str, topic: str) -> int:
    response: Any = request_as(broker, user, FetchRequest(max_wait_ms=0, topics=(FetchTopic(topic, partitions=(
        FetchPartition(0, fetch_offset=0, partition_max_bytes=1024),)),)), 12)
    return int(response.responses[0].partitions[0].error_code)


def test_open_without_acls_and_kept_across_a_restart(broker: SaslBroker) -> None:
    assert _read(broker, "bob", OWNED) == _read(broker, "bob", FREE) == 0  # no ACL anywhere yet
    assert create_acls(broker, [allow("User:alice", AclOperation.READ, ResourceType.TOPIC, OWNED)]) == [0]
    decisions = {(user, topic): _read(broker, user, topic) for user in ("alice", "bob") for topic in (OWNED, FREE)}
    assert decisions == {("alice", OWNED): 0, ("alice", FREE): 0,
                         ("bob", OWNED): ErrorCode.TOPIC_AUTHORIZATION_FAILED, ("bob", FREE): 0}
    stored = json.loads((broker.process.data_dir / "acls.json").read_text())
    assert stored["resources"] == [{"resourceType": "Topic", "patternType": "LITERAL", "name": OWNED, "version": 1,
                                    "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                              "operation": "Read", "host": "*"}]}]
    broker.process.restart()
    assert {(user, topic): _read(broker, user, topic) for user in ("alice", "bob") for topic in (OWNED, FREE)
            } == decisions


@pytest.mark.parametrize(("overrides", "acl_file", "message"), [
    ({"super.users": "User:admin;alice"}, None, "invalid value 'User:admin;alice' for super.users: 'alice' is not"),
    ({}, "{not json", "cannot read the ACLs in "),
])
def test_bad_settings_are_one_line(tmp_path: Path, overrides: dict[str, str], acl_file: str | None,
                                   message: str) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    if acl_file is not None:
        (data_dir / "acls.json").write_text(acl_file)
    command = [sys.executable, "-m", "strom", "serve", "--data-dir", str(data_dir), "--listeners",
               "PLAINTEXT://127.0.0.1:0", "--override", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"]
    for name, value in overrides.items():
        command += ["--override", f"{name}={value}"]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    errors = [line for line in finished.stderr.splitlines() if " INFO " not in line]  # the log's lines aside
    assert len(errors) == 1 and errors[0].startswith("strom serve: ") and message in errors[0], finished.stderr
