"""Authorized operations as admin tools read them, through librdkafka's admin client.

Without an authorizer Kafka reports every operation a resource supports; a broker that
reports none makes tools show "no permissions".
"""

from __future__ import annotations

import confluent_kafka
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess

TOPIC = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE, AclOperation.ALTER,
         AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
CLUSTER = {AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}


def test_topics_and_the_cluster_report_every_supported_operation(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(15)
    described = admin.describe_topics(TopicCollection(["orders"]), include_authorized_operations=True)
    orders = described["orders"].result(15)
    assert len(orders.partitions) == 3
    assert set(orders.authorized_operations) == TOPIC
    cluster = admin.describe_cluster(include_authorized_operations=True).result(15)
    assert set(cluster.authorized_operations) == CLUSTER


def test_groups_report_read_describe_and_delete(broker: BrokerProcess) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers"})
    consumer.subscribe(["auto"])
    consumer.poll(3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    group = admin.describe_consumer_groups(["readers"], include_authorized_operations=True)["readers"].result(15)
    consumer.close()
    assert set(group.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}
