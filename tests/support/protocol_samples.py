"""Deterministic sample messages for every API, for fuzzing and benchmarks.

Hypothesis draws are great for properties but not for a fixed corpus; these come from
a seeded ``random.Random`` walking the same schema model, so a run is reproducible.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from strom.protocol.messages import message_class
from tests.support.protocol_strategies import schemas
from tools.codegen.emit import layouts
from tools.codegen.schema import INT_RANGES, Field, Struct
from tools.codegen.schema import Message as Schema

_WORDS = ["topic", "orders", "événements", "", "group-1", "x" * 40, "日本"]


def _scalar(kind: str, rng: random.Random) -> Any:
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        return rng.choice([0, 1, -1 if low < 0 else 2, rng.randint(low, high), high])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return rng.uniform(-1e6, 1e6)
    if kind == "string":
        return rng.choice(_WORDS)
    if kind in ("bytes", "records"):
        return rng.randbytes(rng.choice([0, 3, 70]))
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise ValueError(kind)


def _value(schema: Schema, fld: Field, version: int, nullable: bool, rng: random.Random) -> Any:
    if nullable and rng.random() < 0.15:
        return None
    if fld.is_array:
        return tuple(_element(schema, fld, version, rng) for _ in range(rng.choice([0, 1, 2, 3])))
    return _element(schema, fld, version, rng)


def _element(schema: Schema, fld: Field, version: int, rng: random.Random) -> Any:
    if fld.struct is not None:
        return random_struct(schema, fld.struct, version, rng)
    return _scalar(fld.element_type, rng)


def random_struct(schema: Schema, struct: Struct, version: int, rng: random.Random) -> Any:
    root = message_class(schema.name)
    cls = (
        root
        if struct is schema.root
        else getattr(__import__(root.__module__, fromlist=["_"]), struct.name)
    )
    kwargs = {
        lay.field.attr: _value(schema, lay.field, version, lay.nullable, rng)
        for lay in layouts(schema, struct, version)
        if lay.present
    }
    return cls(**kwargs)


def random_message(name: str, version: int, rng: random.Random) -> Any:
    schema = schemas()[name]
    return random_struct(schema, schema.root, version, rng)
