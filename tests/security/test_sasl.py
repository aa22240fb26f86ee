"""SASL on SASL_PLAINTEXT and SASL_SSL listeners with real clients: confluent-kafka (librdkafka), kafka-python
and aiokafka, each with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (unsecured JWTs:
librdkafka's own, the Python clients' from a token provider). Each produces, consumes in a
group and commits, as an authenticated user.

One broker for the module; SCRAM users are made on its PLAINTEXT listener with
AlterUserScramCredentials (KIP-554), the way a first user is made before any SASL client can
connect; PLAIN users are the broker's JAAS ``user_<name>`` options.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.support.certs import make_certificates
from tests.support.sasl import (
    USERS,
    SaslBroker,
    confluent_settings,
    create_scram_user,
    python_client_settings,
    sasl_broker,
)

RECORDS = 5
TIMEOUT_S = 60.0
SCRAM_USERS = {"SCRAM-SHA-256": ("carol", "carol-secret"), "SCRAM-SHA-512": ("dave", "dave-secret")}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    directory = tmp_path_factory.mktemp("sasl")
    with sasl_broker(directory / "data", certs=make_certificates(directory / "certs")) as running:
        for mechanism, (user, password) in SCRAM_USERS.items():
            response = create_scram_user(running, user, password, mechanism)
            assert [(r.user, r.error_code) for r in response.results] == [(user, 0)]
        yield running


def _credentials(mechanism: str) -> tuple[str, str]:
    if mechanism in SCRAM_USERS:
        return SCRAM_USERS[mechanism]
    return "alice", USERS["alice"]


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"sasl-{suffix}", f"group-{suffix}"


def _confluent_round_trip(settings: dict[str, object]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic, group = _names()
    producer = Producer(settings)
    for i in range(RECORDS):
        producer.produce(topic, value=f"record-{i}".encode())
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(settings | {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        for _ in range(int(TIMEOUT_S)):
            message = consumer.poll(1.0)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
            if len(values) == RECORDS:
                break
        assert values == [f"record-{i}".encode() for i in range(RECORDS)]
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert committed[0].offset == RECORDS
    finally:
        consumer.close()


def _kafka_python_round_trip(settings: dict[str, object]) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic, group = _names()
    producer = KafkaProducer(**settings)
    try:
        for i in range(RECORDS):
            producer.send(topic, f"record-{i}".encode()).get(timeout=TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                             **settings)
    try:
        values: list[bytes] = []
        for _ in range(int(TIMEOUT_S)):
            for records in consumer.poll(timeout_ms=1000).values():
                values.extend(record.value for record in records)
            if len(values) >= RECORDS:
                break
        assert values == [f"record-{i}".encode() for i in range(RECORDS)]
        consumer.commit()
        assert consumer.committed(TopicPartition(topic, 0)) == RECORDS
    finally:
        consumer.close()


async def _aiokafka_round_trip(settings: dict[str, object]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic, group = _names()
    producer = AIOKafkaProducer(**settings)
    await producer.start()
    try:
        for i in range(RECORDS):
            await producer.send_and_wait(topic, f"record-{i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                                **settings)
    await consumer.start()
    try:
        values: list[bytes] = []
        async with asyncio.timeout(TIMEOUT_S):
            while len(values) < RECORDS:
                batches = await consumer.getmany(timeout_ms=1000)
                values.extend(record.value for records in batches.values() for record in records)
        assert values == [f"record-{i}".encode() for i in range(RECORDS)]
        await consumer.commit()
        assert await consumer.committed(TopicPartition(topic, 0)) == RECORDS
    finally:
        await consumer.stop()


# SASL_PLAINTEXT with every mechanism (OAUTHBEARER: an unsecured JWT from librdkafka itself, from
# the Python clients' token providers); over SASL_SSL the SCRAM rows, and every one for librdkafka.
PYTHON_ROWS = [("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
               ("SASL_PLAINTEXT", "OAUTHBEARER"), ("SASL_SSL", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512")]
CONFLUENT_ROWS = [*PYTHON_ROWS, ("SASL_SSL", "PLAIN"), ("SASL_SSL", "OAUTHBEARER")]


@pytest.mark.parametrize(("protocol", "mechanism"), CONFLUENT_ROWS)
def test_confluent_kafka_produces_consumes_and_commits(broker: SaslBroker, protocol: str, mechanism: str) -> None:
    _confluent_round_trip(confluent_settings(broker, mechanism, *_credentials(mechanism), protocol=protocol))


@pytest.mark.parametrize(("protocol", "mechanism"), PYTHON_ROWS)
def test_kafka_python_produces_consumes_and_commits(broker: SaslBroker, protocol: str, mechanism: str) -> None:
    _kafka_python_round_trip(python_client_settings(broker, mechanism, *_credentials(mechanism), protocol=protocol))


@pytest.mark.parametrize(("protocol", "mechanism"), PYTHON_ROWS)
def test_aiokafka_produces_consumes_and_commits(broker: SaslBroker, protocol: str, mechanism: str) -> None:
    settings = python_client_settings(broker, mechanism, *_credentials(mechanism), protocol=protocol, client="aiokafka")
    asyncio.run(_aiokafka_round_trip(settings))


def test_a_wrong_password_is_refused_to_a_real_client_with_kafkas_message(broker: SaslBroker) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    producer = Producer(confluent_settings(broker, "PLAIN", "alice", "not-alice-secret") | {"error_cb": errors.append})
    deadline = time.monotonic() + TIMEOUT_S
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any("Authentication failed: Invalid username or password" in e.str() for e in errors), errors


def test_users_made_with_the_admin_clients_authenticate(broker: SaslBroker) -> None:
    """The Java-less way to a first user: kafka-python's and confluent-kafka's admin clients salt
    the password themselves (KIP-554) on the PLAINTEXT listener; the broker's derived keys work."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, UserScramCredentialUpsertion
    from confluent_kafka.admin import ScramMechanism as ConfluentMechanism
    from kafka.admin import KafkaAdminClient
    from kafka.admin import UserScramCredentialUpsertion as KafkaPythonUpsertion

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        upsertion = KafkaPythonUpsertion("grace", "SCRAM-SHA-512", "grace-secret")
        assert admin.alter_user_scram_credentials([upsertion]) == {"grace": None}
        described = admin.describe_user_scram_credentials(["grace"])
        assert [(info["mechanism"].name, info["iterations"]) for info in described["grace"]["credential_infos"]] == [
            ("SCRAM_SHA_512", 4096)]
    finally:
        admin.close()
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = confluent.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "heidi", ScramCredentialInfo(ConfluentMechanism.SCRAM_SHA_256, 8192), b"heidi-secret")])
    assert futures["heidi"].result(TIMEOUT_S) is None
    _confluent_round_trip(confluent_settings(broker, "SCRAM-SHA-512", "grace", "grace-secret"))
    _confluent_round_trip(confluent_settings(broker, "SCRAM-SHA-256", "heidi", "heidi-secret"))
