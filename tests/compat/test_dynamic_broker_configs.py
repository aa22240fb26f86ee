"""Kafka's dynamic broker configs Strom has no equivalent for, set by confluent-kafka's admin.

librdkafka's own admin test (0081-admin) sets ``sasl.kerberos.min.time.before.relogin``
and ``background.threads`` on a BROKER resource; Kafka 3.9 takes both, and any name it
does not know. Strom keeps them (with no effect), describes them as Kafka does and keeps
them across a restart. Strom's broker id is 1 unless configured (Kafka's reference broker
here runs as 0), so the resource is broker "1".
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from strom.protocol.error_codes import ErrorCode
from tests.support.broker_process import BrokerProcess

TIMEOUT = 15


def _broker_configs(admin: AdminClient) -> dict[str, ConfigEntry]:
    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()
    return dict(future.result(TIMEOUT))


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_librdkafka_s_broker_configs_are_accepted_kept_and_described(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # As 0081-admin does: the legacy AlterConfigs on the broker.
    legacy = ConfigResource(ResourceType.BROKER, "1", set_config={
        "sasl.kerberos.min.time.before.relogin": "58000", "background.threads": "5"})
    (future,) = admin.alter_configs([legacy]).values()
    future.result(TIMEOUT)
    unknown = ConfigEntry("foo.bar", "baz", incremental_operation=AlterConfigOpType.SET)
    (future,) = admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "1",
                                                                incremental_configs=[unknown])]).values()
    future.result(TIMEOUT)
    for attempt in ("before", "after a restart"):
        configs = _broker_configs(admin)
        threads, relogin = configs["background.threads"], configs["sasl.kerberos.min.time.before.relogin"]
        assert (threads.value, threads.source, threads.is_read_only) == (
            "5", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False), attempt
        assert (relogin.value, relogin.source) == ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value), attempt
        custom = configs["foo.bar"]  # as Kafka lists a name it does not know
        assert (custom.value, custom.source, custom.is_read_only, custom.is_sensitive) == (
            None, ConfigSource.DYNAMIC_BROKER_CONFIG.value, True, True), attempt
        if attempt == "before":
            broker.restart()
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    # Kafka's refusal of a name it knows but cannot change at run time stays.
    static = ConfigEntry("zookeeper.connect", "z:2181", incremental_operation=AlterConfigOpType.SET)
    (future,) = admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "1",
                                                                incremental_configs=[static])]).values()
    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT)
    error = caught.value.args[0]
    assert (error.code(), error.str()) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(zookeeper.connect)")
