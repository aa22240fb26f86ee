"""Strom's codec against an independent one: kio, also generated from Kafka's schemas.

For every (API, version) that kio knows with the same fields as our schema set, bytes
Strom writes are read by kio and written back by kio byte for byte, and Strom decodes
kio's bytes to the message it started from. A field order, width or nullability
mistake in the generator would break this even where Strom's own round trip holds.
"""

from __future__ import annotations

import dataclasses
import typing
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from strom.protocol.messages import message_class
from tests.support.protocol_strategies import message_strategy, pairs, schemas
from tools.codegen.emit import layouts
from tools.codegen.schema import Message as Schema
from tools.codegen.schema import Struct


def _kio_shape(cls: type[Any]) -> object:
    """Field names, recursively through nested structs (kio drops ``_ms`` suffixes)."""
    shape = []
    hints = typing.get_type_hints(cls)
    for fld in dataclasses.fields(cls):
        nested = None
        for arg in [hints[fld.name], *typing.get_args(hints[fld.name])]:
            for inner in [arg, *typing.get_args(arg)]:
                if isinstance(inner, type) and dataclasses.is_dataclass(inner):
                    nested = _kio_shape(inner)
        shape.append((fld.name.removesuffix("_ms"), nested))
    return tuple(shape)


def _strom_shape(schema: Schema, struct: Struct, version: int) -> object:
    """The fields ``version`` carries, in the same form as ``_kio_shape``."""
    shape = []
    for lay in layouts(schema, struct, version):
        if lay.present:
            nested = _strom_shape(schema, lay.field.struct, version) if lay.field.struct else None
            shape.append((lay.field.attr.removesuffix("_ms"), nested))
    return tuple(shape)


@cache
def kio_pairs() -> list[tuple[str, int]]:
    """Pairs where kio has the message with the same fields (unstable versions differ)."""
    result = []
    for name, version in pairs():
        schema = schemas()[name]
        if schema.kind not in ("request", "response"):
            continue
        load = load_request_schema if schema.kind == "request" else load_response_schema
        try:
            kio_cls = load(schema.api_key, version)
        except Exception:  # kio lacks this API or version
            continue
        if _kio_shape(kio_cls) == _strom_shape(schema, schema.root, version):
            result.append((name, version))
    return result


def _kio_class(name: str, version: int) -> type[Any]:
    schema = schemas()[name]
    load = load_request_schema if schema.kind == "request" else load_response_schema
    cls: type[Any] = load(schema.api_key, version)
    return cls


def test_kio_covers_most_of_the_protocol() -> None:
    covered = kio_pairs()
    assert len({name for name, _ in covered}) >= 150
    assert len(covered) >= 450
    flexible = [(n, v) for n, v in covered if v in message_class(n).FLEXIBLE_VERSIONS]
    assert len(flexible) >= 200


@pytest.mark.parametrize(
    ("name", "version"), kio_pairs(), ids=[f"{n}-v{v}" for n, v in kio_pairs()]
)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kio_reads_and_writes_strom_bytes(name: str, version: int, data: st.DataObject) -> None:
    message = data.draw(message_strategy(name, version, plain=True))
    encoded = message.encode(version)
    kio_cls = _kio_class(name, version)
    kio_message, size = entity_reader(kio_cls)(encoded, 0)
    assert size == len(encoded)
    out = bytearray()

    class _Sink:
        def write(self, chunk: bytes) -> None:
            out.extend(chunk)

    entity_writer(kio_cls)(_Sink(), kio_message)  # type: ignore[arg-type]
    assert bytes(out) == encoded
    assert message_class(name).decode(version, bytes(out)) == message
