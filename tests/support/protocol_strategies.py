"""Hypothesis strategies for any generated message in any version, built from the schemas.

The strategies read the same schema model the generator reads (``tools.codegen.schema``),
so they produce every value the schema allows in a version: nulls where that version
is nullable, tagged fields, unknown tagged fields in flexible versions, and defaults
for fields the version does not carry (those cannot survive a round trip).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import strategies as st

from strom.protocol.message import Message
from strom.protocol.messages import message_class
from tools.codegen.emit import layouts
from tools.codegen.schema import INT_RANGES, Field, Struct, default_schema_dir, load_all
from tools.codegen.schema import Message as Schema

MAX_ITEMS = 3


@cache
def schemas() -> dict[str, Schema]:
    return {m.name: m for m in load_all(default_schema_dir())}


def pairs() -> list[tuple[str, int]]:
    """Every (message name, version) the schemas define."""
    return [(name, v) for name, m in sorted(schemas().items()) for v in m.valid.range()]


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        return st.integers(low, high)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(max_size=12),
        "bytes": st.binary(max_size=16),
        "records": st.binary(max_size=64),
        "uuid": st.uuids(),
    }[kind]


def _value(
    schema: Schema, fld: Field, version: int, nullable: bool, plain: bool
) -> st.SearchStrategy[Any]:
    if fld.name.endswith("ErrorCode") and fld.type == "int16":
        element = error_codes()
    elif plain and fld.element_type == "int64":
        element = st.integers(0, 2**40)
    elif fld.is_struct:
        assert fld.struct is not None
        element = struct_strategy(schema, fld.struct, version, plain)
    else:
        element = _scalar(fld.element_type)
    if fld.is_array:
        value: st.SearchStrategy[Any] = st.lists(element, max_size=MAX_ITEMS).map(tuple)
    else:
        value = element
    return st.one_of(st.none(), value) if nullable else value


def error_codes() -> st.SearchStrategy[int]:
    """Error code fields hold codes Kafka defines (independent codecs check them)."""
    from strom.protocol.error_codes import ErrorCode

    return st.sampled_from(sorted(ErrorCode))


def _unknown_tags(schema: Schema, struct: Struct, version: int) -> st.SearchStrategy[Any]:
    if version not in schema.flexible:
        return st.just(())
    used = {f.tag for f in struct.fields if f.tag is not None}
    free = st.integers(0, 40).filter(lambda tag: tag not in used)
    return st.dictionaries(free, st.binary(max_size=6), max_size=2).map(
        lambda d: tuple(sorted(d.items()))
    )


def struct_strategy(
    schema: Schema, struct: Struct, version: int, plain: bool = False
) -> st.SearchStrategy[Any]:
    cls = _class_of(schema, struct)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for lay in layouts(schema, struct, version):
        if lay.present:
            kwargs[lay.field.attr] = _value(schema, lay.field, version, lay.nullable, plain)
    if not plain:
        kwargs["unknown_tagged_fields"] = _unknown_tags(schema, struct, version)
    return st.builds(cls, **kwargs)


def _class_of(schema: Schema, struct: Struct) -> type[Any]:
    root = message_class(schema.name)
    if struct is schema.root:
        return root
    module = __import__(root.__module__, fromlist=["_"])
    cls: type[Any] = getattr(module, struct.name)
    return cls


def message_strategy(name: str, version: int, plain: bool = False) -> st.SearchStrategy[Message]:
    """Any ``name`` message valid in ``version``.

    ``plain`` leaves out unknown tagged fields and keeps int64s in [0, 2**40]: the values
    an independent codec that maps times to ``datetime``/``timedelta`` can represent.
    """
    schema = schemas()[name]
    return struct_strategy(schema, schema.root, version, plain)
