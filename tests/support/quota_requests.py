"""AlterClientQuotas / DescribeClientQuotas requests built from plain tuples (issue 20's quota tests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strom.protocol.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from strom.protocol.messages.describe_client_quotas_request import (
    ComponentData,
    DescribeClientQuotasRequest,
)

Entity = Sequence[tuple[str, str | None]]  # (entity type, name or None for <default>)


def alter_request(entries: Sequence[tuple[Entity, dict[str, float | None]]],
                  validate_only: bool = False) -> AlterClientQuotasRequest:
    """Each entry: its entity and ops, key -> value (None removes the key)."""
    return AlterClientQuotasRequest(
        entries=tuple(
            EntryData(entity=tuple(EntityData(kind, name) for kind, name in entity),
                      ops=tuple(OpData(key, 0.0 if value is None else value, value is None)
                                for key, value in ops.items()))
            for entity, ops in entries),
        validate_only=validate_only)


def describe_request(components: Sequence[tuple[str, int, str | None]], strict: bool = False
                     ) -> DescribeClientQuotasRequest:
    return DescribeClientQuotasRequest(
        components=tuple(ComponentData(kind, match_type, match) for kind, match_type, match in components),
        strict=strict)


def described(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """A DescribeClientQuotas answer as {entity (type, name) pairs: {key: value}}."""
    assert response.error_code == 0, response.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}
