"""One module per API, each declaring the versions it serves; loaded when first asked for.

A handler module has ``REQUEST`` (the generated request class: its ``API_KEY`` and
``VALID_VERSIONS`` come from Kafka's schema), ``VERSIONS`` (the versions served, which
must lie within the codec's) and ``async def handle(broker, request) -> response | None``;
every module in this package is one.
``SERVED`` below indexes them by API key with the versions each serves, so the broker
can answer ApiVersions (``API_VERSIONS``, built once here) and dispatch without
importing them: ``HANDLERS`` imports a handler, and the generated messages it uses,
on the first request for its API. Importing all 28 at start-up was most of what was
left of ``strom serve``'s time to its first answer once the codec was fast to import
(benchmarks/startup.py). A handler whose module disagrees with ``SERVED`` (key or
versions) is refused when it loads, and ``load_all`` (run by the tests) loads every
module in the package, so a module missing from ``SERVED`` or a stale entry fails
there: the versions a client is told can never drift from the ones served.
Handlers are thin: they translate a request into calls on the broker's parts and the
results (or ``StorageError``/``TopicError`` codes) into a response.

``CLUSTER_SERVED`` adds the controller's requests to a broker of a cluster
(``zookeeper.connect`` set): LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown and AlterPartition; such a broker
leaves out what Kafka's ZooKeeper-mode broker does not serve. A single node
neither lists them in ApiVersions nor answers them (it closes the connection, as
Kafka does for an API its listener does not enable); ``Broker`` picks the table.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Protocol, cast

from strom.protocol.message import Message
from strom.protocol.messages.api_versions_response import ApiVersion

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request


class Handler(Protocol):
    REQUEST: type[Message]
    VERSIONS: range

    async def handle(self, broker: Broker, request: Request) -> Message | None: ...


SERVED: dict[int, tuple[str, range]] = {
    0: ("produce", range(0, 12)),
    1: ("fetch", range(4, 17)),
    2: ("list_offsets", range(1, 10)),
    3: ("metadata", range(0, 13)),
    8: ("offset_commit", range(0, 10)),
    9: ("offset_fetch", range(0, 10)),
    10: ("find_coordinator", range(0, 7)),
    11: ("join_group", range(0, 10)),
    12: ("heartbeat", range(0, 5)),
    13: ("leave_group", range(0, 6)),
    14: ("sync_group", range(0, 6)),
    15: ("describe_groups", range(0, 6)),
    16: ("list_groups", range(0, 6)),
    17: ("sasl_handshake", range(0, 2)),
    18: ("api_versions", range(0, 5)),
    19: ("create_topics", range(0, 8)),
    20: ("delete_topics", range(0, 7)),
    21: ("delete_records", range(0, 3)),
    22: ("init_producer_id", range(0, 6)),
    23: ("offset_for_leader_epoch", range(0, 5)),
    24: ("add_partitions_to_txn", range(0, 6)),
    25: ("add_offsets_to_txn", range(0, 4)),
    26: ("end_txn", range(0, 5)),
    27: ("write_txn_markers", range(0, 2)),
    28: ("txn_offset_commit", range(0, 5)),
    29: ("describe_acls", range(0, 4)),
    30: ("create_acls", range(0, 4)),
    31: ("delete_acls", range(0, 4)),
    32: ("describe_configs", range(0, 5)),
    33: ("alter_configs", range(0, 3)),
    35: ("describe_log_dirs", range(0, 5)),
    36: ("sasl_authenticate", range(0, 3)),
    37: ("create_partitions", range(0, 4)),
    42: ("delete_groups", range(0, 3)),
    44: ("incremental_alter_configs", range(0, 2)),
    47: ("offset_delete", range(0, 1)),
    48: ("describe_client_quotas", range(0, 2)),
    49: ("alter_client_quotas", range(0, 2)),
    50: ("describe_user_scram_credentials", range(0, 1)),
    51: ("alter_user_scram_credentials", range(0, 1)),
    60: ("describe_cluster", range(0, 2)),
    61: ("describe_producers", range(0, 1)),
    65: ("describe_transactions", range(0, 1)),
    66: ("list_transactions", range(0, 2)),
    75: ("describe_topic_partitions", range(0, 1)),
}
"""API key -> (handler module in this package, the versions it serves)."""

CLUSTER_SERVED: dict[int, tuple[str, range]] = {
    4: ("leader_and_isr", range(0, 8)),
    5: ("stop_replica", range(0, 5)),
    6: ("update_metadata", range(0, 9)),
    7: ("controlled_shutdown", range(0, 4)),
    56: ("alter_partition", range(0, 4)),
}
"""The controller-to-broker APIs a broker of a cluster serves on top of ``SERVED``."""

NOT_IN_ZOOKEEPER_MODE: frozenset[int] = frozenset({75})
"""APIs a cluster's broker does not serve, as Kafka's ZooKeeper-mode broker does not
(their schemas' listeners lack ``zkBroker``): DescribeTopicPartitions is KRaft's."""


def load(module_name: str) -> Handler:
    """Import one handler module and check it is one (REQUEST, VERSIONS, async handle)."""
    module = importlib.import_module(f"{__name__}.{module_name}")
    request = getattr(module, "REQUEST", None)
    versions = getattr(module, "VERSIONS", None)
    handle = getattr(module, "handle", None)
    if not (isinstance(request, type) and issubclass(request, Message) and isinstance(versions, range)
            and inspect.iscoroutinefunction(handle)):
        raise TypeError(f"{module.__name__} is not a handler (REQUEST, VERSIONS, async handle)")
    key = request.API_KEY
    if key is None:
        raise TypeError(f"{module.__name__}: {request.__name__} is not a request")
    codec = request.VALID_VERSIONS
    if not versions or versions.start < codec.start or versions.stop > codec.stop or versions.step != 1:
        raise TypeError(f"{module.__name__} serves versions {versions}, outside the codec's {codec}")
    return cast(Handler, module)


class HandlerTable(Mapping[int, Handler]):
    """``SERVED``'s handlers by API key, each module imported on its first lookup."""

    def __init__(self, served: Mapping[int, tuple[str, range]]) -> None:
        self._served = served
        self._loaded: dict[int, Handler] = {}

    def __getitem__(self, key: int) -> Handler:
        handler = self._loaded.get(key)
        if handler is None:
            module_name, versions = self._served[key]
            handler = load(module_name)
            if (key, versions) != (handler.REQUEST.API_KEY, handler.VERSIONS):
                raise TypeError(f"{module_name} serves API {handler.REQUEST.API_KEY} versions "
                                f"{handler.VERSIONS}, not API {key} versions {versions} as SERVED says")
            self._loaded[key] = handler
        return handler

    def get(self, key: int, default: Handler | None = None) -> Handler | None:  # type: ignore[override]
        """The handler for ``key``; an unserved key is ``default`` (a failing import raises)."""
        return self[key] if key in self._served else default

    def __contains__(self, key: object) -> bool:
        return key in self._served

    def __iter__(self) -> Iterator[int]:
        return iter(self._served)

    def __len__(self) -> int:
        return len(self._served)


def load_all() -> dict[int, Handler]:
    """Every module in this package as a handler; two for one API key is an error."""
    found: dict[int, Handler] = {}
    for info in pkgutil.iter_modules(__path__):
        handler = load(info.name)
        key = handler.REQUEST.API_KEY
        assert key is not None  # load() refuses a class that is not a request
        if key in found:
            raise TypeError(f"two handlers for API key {key}")
        found[key] = handler
    return found


def _api_versions(served: Mapping[int, tuple[str, range]]) -> tuple[ApiVersion, ...]:
    return tuple(ApiVersion(key, versions.start, versions.stop - 1) for key, (_, versions) in sorted(served.items()))


HANDLERS: Mapping[int, Handler] = HandlerTable(SERVED)

API_VERSIONS: tuple[ApiVersion, ...] = _api_versions(SERVED)
"""Every API this broker serves and its versions: what ApiVersions answers."""

_CLUSTER_TABLE = {key: entry for key, entry in {**SERVED, **CLUSTER_SERVED}.items() if key not in NOT_IN_ZOOKEEPER_MODE}

CLUSTER_HANDLERS: Mapping[int, Handler] = HandlerTable(_CLUSTER_TABLE)

CLUSTER_API_VERSIONS: tuple[ApiVersion, ...] = _api_versions(_CLUSTER_TABLE)
"""What a broker of a cluster answers ApiVersions with: the control APIs too."""
