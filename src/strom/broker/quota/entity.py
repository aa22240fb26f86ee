"""Quota entities, their precedence, and the checks Kafka makes on them and on quota keys.

An entity is a user, a client id, or both; each part names one (``"alice"``) or the
default (``DEFAULT``: ZooKeeper's ``<default>`` znode, a null name on the wire). Kafka's
eight places a (user, client id) pair's quota may come from, most specific first, are
``QuotaEntity.precedence``::

    /config/users/<user>/clients/<client-id>      /config/users/<default>/clients/<default>
    /config/users/<user>/clients/<default>        /config/users/<default>
    /config/users/<user>                          /config/clients/<client-id>
    /config/users/<default>/clients/<client-id>   /config/clients/<default>

Validation follows Kafka's controller (``ClientQuotaControlManager``) and its describe
filters (``ClientQuotasImage.describe``): ``QuotaError`` carries the code and message
sent back. IP entities (``connection_creation_rate``) are refused: Strom does not
limit connections per address.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Literal

from strom.protocol.error_codes import ErrorCode


class _Default(enum.Enum):
    DEFAULT = "<default>"

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = _Default.DEFAULT
Name = str | Literal[_Default.DEFAULT] | None
"""An entity part: a name, the default, or None where the entity has no such part."""

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"

# Kafka's QuotaConfig: the keys a user / client-id entity takes, and whether the value is a
# whole number (LONG) or a DOUBLE. controller_mutation_rate (KIP-599) is kept and described
# but limits nothing in Strom: it throttles topic creations and deletions.
PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
QUOTA_KEYS: Final = {PRODUCER_BYTE_RATE: "Long", CONSUMER_BYTE_RATE: "Long", REQUEST_PERCENTAGE: "Double",
                     CONTROLLER_MUTATION_RATE: "Double"}


class QuotaError(ValueError):
    """A refused entity, filter or quota; ``str()`` is Kafka's message."""

    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    user: Name = None
    client_id: Name = None

    @staticmethod
    def precedence(user: str, client_id: str) -> Iterator[QuotaEntity]:
        """The eight entities whose quota may apply to a client, most specific first."""
        yield QuotaEntity(user, client_id)
        yield QuotaEntity(user, DEFAULT)
        yield QuotaEntity(user, None)
        yield QuotaEntity(DEFAULT, client_id)
        yield QuotaEntity(DEFAULT, DEFAULT)
        yield QuotaEntity(DEFAULT, None)
        yield QuotaEntity(None, client_id)
        yield QuotaEntity(None, DEFAULT)

    def parts(self) -> dict[str, str | None]:
        """Entity type -> name (None: the default), as the wire carries it."""
        parts: dict[str, str | None] = {}
        if self.user is not None:
            parts[USER] = None if self.user is DEFAULT else self.user
        if self.client_id is not None:
            parts[CLIENT_ID] = None if self.client_id is DEFAULT else self.client_id
        return parts

    @classmethod
    def from_parts(cls, parts: Iterable[tuple[str, str | None]]) -> QuotaEntity:
        """The entity (type, name) pairs name, validated as Kafka's ``validateEntity``."""
        seen: dict[str, str | None] = {}
        for entity_type, name in parts:
            if entity_type in seen:
                raise QuotaError(f"Invalid empty client quota entity, duplicate entity entry {entity_type}")
            if entity_type == IP:
                raise QuotaError("IP quotas (connection_creation_rate) are not supported by Strom")
            if entity_type not in (USER, CLIENT_ID):
                raise QuotaError(f"Unhandled client quota entity type: {entity_type}")
            if name is not None and not name:
                raise QuotaError(f"Empty {entity_type} not supported")
            seen[entity_type] = name
        if not seen:
            raise QuotaError("Invalid empty client quota entity")
        return cls(_name(seen, USER), _name(seen, CLIENT_ID))

    def describe(self) -> str:
        """The entity as Kafka's ZooKeeper path names it (for logs)."""
        parts = []
        if self.user is not None:
            parts.append(f"users/{'<default>' if self.user is DEFAULT else self.user}")
        if self.client_id is not None:
            parts.append(f"clients/{'<default>' if self.client_id is DEFAULT else self.client_id}")
        return "/".join(parts)


def _name(parts: dict[str, str | None], entity_type: str) -> Name:
    if entity_type not in parts:
        return None
    name = parts[entity_type]
    return DEFAULT if name is None else name


def validate_quota(key: str, value: float) -> None:
    """Kafka's ``validateQuotaKeyValue``: a known key, a positive value, whole where LONG."""
    kind = QUOTA_KEYS.get(key)
    if kind is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if not value > 0.0:
        raise QuotaError(f"Quota {key} must be greater than 0")
    if kind == "Long" and (value != int(value) or value > 2**63 - 1):
        raise QuotaError(f"Configuration {key} must be a Long value")


MATCH_EXACT: Final = 0
MATCH_DEFAULT: Final = 1
MATCH_SPECIFIED: Final = 2  # "any": the entity has this type, whatever its name (the default too)


@dataclass(frozen=True, slots=True)
class QuotaFilter:
    """A DescribeClientQuotas filter: names to match exactly (None: the default), types the
    entity must have, and ``strict`` (the entity has no other type)."""

    exact: dict[str, str | None]
    specified: frozenset[str]
    strict: bool

    @classmethod
    def parse(cls, components: Iterable[tuple[str, int, str | None]], strict: bool) -> QuotaFilter:
        """Kafka's checks of the filter components, in its order and with its messages."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for entity_type, match_type, match in components:
            if not entity_type:
                raise QuotaError("Invalid empty entity type.")
            if entity_type in exact or entity_type in specified:
                raise QuotaError(f"Entity type {entity_type} cannot appear more than once in the filter.")
            if entity_type not in (USER, CLIENT_ID, IP):
                raise QuotaError(f"Unsupported entity type {entity_type}", ErrorCode.UNSUPPORTED_VERSION)
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaError("Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[entity_type] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise QuotaError("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                exact[entity_type] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise QuotaError("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
                specified.add(entity_type)
            else:
                raise QuotaError(f"Unknown match type {match_type}", ErrorCode.UNSUPPORTED_VERSION)
        if (IP in exact or IP in specified) and ({USER, CLIENT_ID} & (exact.keys() | specified)):
            raise QuotaError("Invalid entity filter component combination. IP filter component should not be "
                             "used with user or clientId filter component.")
        return cls(exact, frozenset(specified), strict)

    def matches(self, entity: QuotaEntity) -> bool:
        parts = entity.parts()
        if self.strict and len(parts) != len(self.exact) + len(self.specified):
            return False
        for entity_type, name in self.exact.items():
            if entity_type not in parts or parts[entity_type] != name:
                return False
        return all(entity_type in parts for entity_type in self.specified)
