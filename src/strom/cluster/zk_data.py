"""Kafka's znodes: their paths and the exact bytes Kafka (3.9, ZooKeeper mode) keeps in them.

Pure codecs, no kazoo, so any part of cluster mode (and Kafka's own tools) read the same state.
Layout, who writes each node, and what fences the write:

- ``/cluster/id``  ``{"version":"1","id":"<22-char id>"}`` (``version`` is a string here);
  the first broker creates it, everyone else reads it back (NodeExists).
- ``/brokers/ids/<id>``  EPHEMERAL, version 5 JSON; written by that broker alone, as Kafka's
  "checked ephemeral". The node's czxid is the broker epoch (KIP-380).
- ``/brokers/topics/<t>``  version 3: assignment (replica lists in preference order) and the
  topic id; written by whoever creates the topic, then by the controller (fenced).
- ``/brokers/topics/<t>/partitions/<p>/state``  leader, leader_epoch, isr, controller_epoch;
  written only by the controller, each write a multi with check(/controller_epoch, v) and a
  conditional set on the state's own version, which is the partition epoch.
- ``/controller``  EPHEMERAL ``{"version":2,"brokerid":..,"timestamp":"..","kraftControllerEpoch":-1}``
  and ``/controller_epoch`` (decimal text): created/bumped together in one multi at election;
  the zkVersion of ``/controller_epoch`` fences every later controller write.
- ``/config/topics/<t>`` ``{"version":1,"config":{..}}`` (string values), announced through
  ``/config/changes/config_change_<10-digit seq>`` ``{"version":2,"entity_path":"topics/<t>"}``.
- ``/admin/delete_topics/<t>`` (no data), ``/brokers/seqid`` (only its version is used).
- ``/latest_producer_id_block`` ``{"version":1,"broker":..,"block_start":"0","block_end":"999"}``,
  claimed by a conditional set on its version, so producer ids are unique across the cluster.

Byte-exactness: Kafka serialises Scala/Java hash maps with Jackson (compact, no spaces), so key
order is the maps' iteration order. Fixed key sets are written in the order Kafka 3.9 writes
them (checked against a running Kafka 3.9); variable ones (partition numbers, topic configs)
follow the hash-table orders of the Scala and Java maps Kafka builds them in. Decoders never
depend on order and accept the older versions Kafka may have left behind.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from strom.protocol.topic_partition import TopicPartition

NO_LEADER = -1

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
BROKER_SEQUENCE_ID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_ROOT = "/config"  # /config/<entity type>/<name>[/<child type>/<name>]: entity configs
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
TOPIC_CONFIGS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
CONSUMERS = "/consumers"

# Kafka's ZkData.PersistentZkPaths: every broker creates these at start-up (idempotently).
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS, BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS, BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION, PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION,
    "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips",
)

PRODUCER_ID_BLOCK_SIZE = 1000
# Kafka's Uuid.ZERO_UUID: "no topic id" (a topic created by Kafka before 2.8 has none).
ZERO_TOPIC_ID = uuid.UUID(int=0)
_METADATA_TOPIC_ID = uuid.UUID(int=1)


class ZkDataError(ValueError):
    """A znode's bytes are not what Kafka would have written there."""


@dataclass(frozen=True, slots=True)
class EndPoint:
    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        """``LISTENER://host:port`` with an IPv6 host in brackets (Kafka's EndPoint.connectionString)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    epoch: int = -1  # the registration znode's czxid, not in the JSON


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = 0  # the state znode's version, not in the JSON


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    leader_and_isr: LeaderAndIsr
    controller_epoch: int


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    topic_id: uuid.UUID
    partitions: Mapping[int, tuple[int, ...]]  # replica lists in preference order


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    broker_id: int
    block_start: int
    block_end: int  # inclusive, as Kafka writes it


# ---------------------------------------------------------------------------- paths

def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def topic_entity_path(topic: str) -> str:
    """The ``entity_path`` a topic's config change notification names."""
    return f"topics/{topic}"


def config_change_sequence(node_name: str) -> int:
    """``config_change_0000000042`` -> 42."""
    if not node_name.startswith(CONFIG_CHANGE_PREFIX):
        raise ZkDataError(f"not a config change notification: {node_name!r}")
    try:
        return int(node_name[len(CONFIG_CHANGE_PREFIX):])
    except ValueError:
        raise ZkDataError(f"not a config change notification: {node_name!r}") from None


# ------------------------------------------------------------------------ Kafka ids

def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: the 16 bytes in URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString (also accepts the padded form)."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise ZkDataError(f"not a Kafka uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def new_kafka_uuid() -> uuid.UUID:
    """A random id as Kafka's Uuid.randomUuid draws one: never the zero or metadata-topic id,
    and never one whose string starts with '-' (it would read as a command-line option)."""
    while True:
        value = uuid.uuid4()
        if value not in (ZERO_TOPIC_ID, _METADATA_TOPIC_ID) and not kafka_uuid_string(value).startswith("-"):
            return value


# ------------------------------------------------------------------------- json

def _dumps(value: object) -> bytes:
    """Jackson's compact form: no spaces, non-ASCII as raw UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads_object(data: bytes | None, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data) if data else None
    except (ValueError, UnicodeDecodeError) as error:
        raise ZkDataError(f"{what}: not JSON ({error}): {data!r}") from None
    if not isinstance(value, dict):
        raise ZkDataError(f"{what}: expected a JSON object, got {data!r}")
    return value


def _int(obj: Mapping[str, Any], key: str, what: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ZkDataError(f"{what}: {key!r} is missing or not a number: {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ZkDataError(f"{what}: {key!r} is not a number: {value!r}") from None


def _java_string_hash(text: str) -> int:
    """java.lang.String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    hash_code = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        hash_code = (31 * hash_code + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return hash_code - (1 << 32) if hash_code & 0x80000000 else hash_code


def scala_mutable_hash_map_order(keys: Iterable[str], capacity: int = 16) -> list[str]:
    """Iteration order of a Scala 2.13 ``mutable.HashMap[String, _]`` filled with ``keys`` in order.

    Buckets are ``improved hash & (size - 1)`` walked in index order, each a list kept sorted by
    the improved hash; the table doubles when an insert would reach 3/4 full.
    """
    size = 1 << max(capacity - 1, 4).bit_length()  # Scala's tableSizeFor
    buckets: dict[int, list[tuple[int, str]]] = {}
    for count, key in enumerate(keys):
        if count + 1 >= int(size * 0.75):
            size *= 2
            regrown: dict[int, list[tuple[int, str]]] = {}
            for index in sorted(buckets):
                for entry in buckets[index]:
                    regrown.setdefault(entry[0] & (size - 1), []).append(entry)
            buckets = regrown
        original = _java_string_hash(key) & 0xFFFFFFFF
        improved = _signed(original ^ (original >> 16))
        bucket = buckets.setdefault(improved & (size - 1), [])
        position = 0
        while position < len(bucket) and bucket[position][0] <= improved:
            position += 1
        bucket.insert(position, (improved, key))
    return [key for index in sorted(buckets) for _, key in buckets[index]]


def _signed(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


def java_properties_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a ``java.util.Properties`` filled with ``keys`` in order (Java 9+:
    a ConcurrentHashMap of 16 bins, doubled once it holds 3/4; a bin keeps insertion order,
    and a resize moves each bin's tail run intact and prepends the rest, reversing them)."""
    size = 16
    bins: list[list[tuple[int, str]]] = [[] for _ in range(size)]
    count = 0
    for key in keys:
        original = _java_string_hash(key) & 0xFFFFFFFF
        spread = (original ^ (original >> 16)) & 0x7FFFFFFF
        bins[spread & (size - 1)].append((spread, key))
        count += 1
        if count >= size - (size >> 2):
            grown: list[list[tuple[int, str]]] = [[] for _ in range(size * 2)]
            for index, chain in enumerate(bins):
                if not chain:
                    continue
                last_run = len(chain) - 1
                while last_run > 0 and (chain[last_run - 1][0] & size) == (chain[-1][0] & size):
                    last_run -= 1
                tail = chain[last_run:]
                low, high = ([], tail) if chain[-1][0] & size else (tail, [])
                for entry in chain[:last_run]:
                    (high if entry[0] & size else low).insert(0, entry)
                grown[index], grown[index + size] = low, high
            bins, size = grown, size * 2
    return [key for chain in bins for _, key in chain]


# ------------------------------------------------------------------- /cluster/id

def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    obj = _loads_object(data, CLUSTER_ID)
    cluster_id = obj.get("id")
    if not isinstance(cluster_id, str):
        raise ZkDataError(f"{CLUSTER_ID}: no id in {data!r}")
    return cluster_id


# ---------------------------------------------------------------- /brokers/ids/<id>

def encode_broker_info(info: BrokerInfo, timestamp_ms: int) -> bytes:
    """Version 5 registration; top-level host/port are the first PLAINTEXT endpoint's, or
    null/-1 (for clients older than 0.10 that read only those)."""
    plaintext = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
    fields: dict[str, Any] = {
        "version": 5,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [e.connection_string for e in info.endpoints],
        "jmx_port": -1,
        "timestamp": str(timestamp_ms),
    }
    if info.rack is not None:
        fields["rack"] = info.rack
    fields["listener_security_protocol_map"] = {e.listener_name: e.security_protocol for e in info.endpoints}
    fields["features"] = {}
    return _dumps({key: fields[key] for key in scala_mutable_hash_map_order(fields, capacity=9)})


def _parse_endpoint(text: str, protocols: Mapping[str, str], what: str) -> EndPoint:
    listener, separator, host_port = text.partition("://")
    host, colon, port = host_port.rpartition(":")
    if not separator or not colon or not listener:
        raise ZkDataError(f"{what}: bad endpoint {text!r}")
    try:
        port_number = int(port)
    except ValueError:
        raise ZkDataError(f"{what}: bad endpoint {text!r}") from None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    listener = listener.upper()
    return EndPoint(host, port_number, listener, protocols.get(listener, listener))


def decode_broker_info(broker_id: int, data: bytes | None, czxid: int = -1) -> BrokerInfo:
    """Any registration version Kafka has written (1..5); ``czxid`` becomes the broker epoch."""
    what = broker_id_path(broker_id)
    obj = _loads_object(data, what)
    version = _int(obj, "version", what)
    if version < 1:
        raise ZkDataError(f"{what}: unsupported registration version {version}")
    if version == 1:
        host = obj.get("host")
        if not isinstance(host, str):
            raise ZkDataError(f"{what}: no host in {data!r}")
        endpoints: tuple[EndPoint, ...] = (EndPoint(host, _int(obj, "port", what)),)
    else:
        protocols = obj.get("listener_security_protocol_map") or {}
        listed = obj.get("endpoints")
        if not isinstance(protocols, dict) or not isinstance(listed, list):
            raise ZkDataError(f"{what}: bad endpoints in {data!r}")
        endpoints = tuple(_parse_endpoint(str(e), protocols, what) for e in listed)
    rack = obj.get("rack")
    return BrokerInfo(broker_id, endpoints, rack if isinstance(rack, str) else None, czxid)


# ------------------------------------------------------------- /brokers/topics/<t>

def encode_topic_assignment(assignment: TopicAssignment) -> bytes:
    """Version 3 (with the topic id; no reassignment in flight, so adding/removing are empty)."""
    replicas = {str(p): list(r) for p, r in sorted(assignment.partitions.items())}
    partitions = {key: replicas[key] for key in scala_mutable_hash_map_order(replicas)}
    fields: dict[str, Any] = {
        "version": 3, "partitions": partitions, "adding_replicas": {}, "removing_replicas": {},
        "topic_id": kafka_uuid_string(assignment.topic_id),
    }
    return _dumps({key: fields[key] for key in scala_mutable_hash_map_order(fields, capacity=6)})


def decode_topic_assignment(topic: str, data: bytes | None) -> TopicAssignment:
    """Versions 1..3; a topic written before topic ids (v1/v2) gets ZERO_TOPIC_ID."""
    what = topic_path(topic)
    obj = _loads_object(data, what)
    raw_id = obj.get("topic_id")
    topic_id = parse_kafka_uuid(raw_id) if isinstance(raw_id, str) else ZERO_TOPIC_ID
    partitions = obj.get("partitions") or {}
    if not isinstance(partitions, dict):
        raise ZkDataError(f"{what}: bad partitions in {data!r}")
    try:
        parsed = {int(p): tuple(int(b) for b in replicas) for p, replicas in partitions.items()}
    except (TypeError, ValueError):
        raise ZkDataError(f"{what}: bad partitions in {data!r}") from None
    return TopicAssignment(topic_id, dict(sorted(parsed.items())))


# ------------------------------------------------ /brokers/topics/<t>/partitions/<p>/state

def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    """Key order is that of Kafka's 5-entry immutable Scala map (a hash trie)."""
    leader_and_isr = state.leader_and_isr
    return _dumps({
        "controller_epoch": state.controller_epoch, "leader": leader_and_isr.leader, "version": 1,
        "leader_epoch": leader_and_isr.leader_epoch, "isr": list(leader_and_isr.isr),
    })


def decode_partition_state(tp: TopicPartition, data: bytes | None, zk_version: int) -> LeaderIsrAndControllerEpoch:
    """``zk_version`` (the state znode's version) becomes the partition epoch. A
    ``leader_recovery_state`` (Kafka 3.2+, only written while RECOVERING) is accepted."""
    what = partition_state_path(*tp)
    obj = _loads_object(data, what)
    isr = obj.get("isr")
    if not isinstance(isr, list) or not all(isinstance(b, int) for b in isr):
        raise ZkDataError(f"{what}: bad isr in {data!r}")
    leader_and_isr = LeaderAndIsr(_int(obj, "leader", what), _int(obj, "leader_epoch", what), tuple(isr), zk_version)
    return LeaderIsrAndControllerEpoch(leader_and_isr, _int(obj, "controller_epoch", what))


# ------------------------------------------------------- /controller, /controller_epoch

def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    """Version 2, as Kafka 3.4+ writes it (``kraftControllerEpoch`` -1: not migrating to KRaft)."""
    return _dumps({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms), "kraftControllerEpoch": -1})


def decode_controller(data: bytes | None) -> int:
    """The controller's broker id, from version 1 or 2."""
    return _int(_loads_object(data, CONTROLLER), "brokerid", CONTROLLER)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ZkDataError(f"{CONTROLLER_EPOCH}: not a decimal number: {data!r}") from None


# --------------------------------------------------- /config/topics/<t>, /config/changes

def encode_topic_config(configs: Mapping[str, str]) -> bytes:
    ordered = {key: str(configs[key]) for key in java_properties_order(configs)}
    return _dumps({"version": 1, "config": ordered})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    """A missing or empty node means no overrides, as Kafka reads it."""
    if not data:
        return {}
    config = _loads_object(data, TOPIC_CONFIGS).get("config") or {}
    if not isinstance(config, dict):
        raise ZkDataError(f"{TOPIC_CONFIGS}: bad config in {data!r}")
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def encode_config_change(entity_path: str) -> bytes:
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes | None) -> str:
    """The changed entity's path (``topics/<t>``); version 1 (entity_type + entity_name) too."""
    obj = _loads_object(data, CONFIG_CHANGES)
    entity_path = obj.get("entity_path")
    if isinstance(entity_path, str):
        return entity_path
    entity_type, entity_name = obj.get("entity_type"), obj.get("entity_name")
    if isinstance(entity_type, str) and isinstance(entity_name, str):
        return f"{entity_type}/{entity_name}"
    raise ZkDataError(f"{CONFIG_CHANGES}: no entity in {data!r}")


# ------------------------------------------------------------ /latest_producer_id_block

def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dumps({
        "version": 1, "broker": block.broker_id,
        "block_start": str(block.block_start), "block_end": str(block.block_end),
    })


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock | None:
    """None for the empty node a fresh cluster starts with."""
    if not data:
        return None
    obj = _loads_object(data, PRODUCER_ID_BLOCK)
    return ProducerIdBlock(
        _int(obj, "broker", PRODUCER_ID_BLOCK), _int(obj, "block_start", PRODUCER_ID_BLOCK),
        _int(obj, "block_end", PRODUCER_ID_BLOCK))
