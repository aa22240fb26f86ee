"""Generated classes behave exactly as the frozen slotted dataclasses type checkers see.

tools/codegen writes each class's dataclass methods into the module instead of letting
``@dataclass(frozen=True, slots=True)`` build them at import (the start-up cost). The
oracle here is the same generated source run as the type checker reads it, with
``TYPE_CHECKING`` true: then the real decorator builds every class from the declared
fields. Every class of every module must match it in fields, slots and match args, and
every sample message (each API and version) in ``repr``, equality, hash, ``asdict``,
``replace``, pickling and the frozen guards.
"""

from __future__ import annotations

import dataclasses
import pickle
import random
import sys
import types
from functools import cache
from typing import Any

import pytest

from strom.protocol.messages import MODULES, message_class
from tests.support.protocol_samples import random_message
from tests.support.protocol_strategies import pairs
from tools.codegen.generate import OUTPUT_DIR


@cache
def as_type_checked(module: str) -> types.ModuleType:
    """The generated module with ``TYPE_CHECKING`` true: classes made by ``@dataclass``."""
    source = (OUTPUT_DIR / f"{module}.py").read_text()
    assert source.count("if TYPE_CHECKING:") >= 2, module  # the import and at least one class
    twin = types.ModuleType(f"dataclass_oracle_{module}")
    sys.modules[twin.__name__] = twin  # dataclasses looks the module up while it builds
    try:
        exec(compile(source.replace("if TYPE_CHECKING:", "if True:"), module, "exec"), twin.__dict__)
    finally:
        del sys.modules[twin.__name__]
    return twin


def _classes(module: types.ModuleType) -> dict[str, type]:
    return {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, type) and not name.startswith("_") and "__dataclass_fields__" in vars(value)
    }


def _shape(cls: type) -> list[tuple[object, ...]]:
    """Each field as dataclasses records it (a default struct by its repr: the classes differ)."""
    return [
        (f.name, f.type, repr(f.default), f.default_factory, f.init, f.repr, f.compare, f.hash, f.kw_only)
        for f in dataclasses.fields(cls)
    ]


@pytest.mark.parametrize("module", sorted(MODULES.values()))
def test_every_class_declares_what_the_dataclass_would(module: str) -> None:
    ours = sys.modules.get(f"strom.protocol.messages.{module}") or __import__(
        f"strom.protocol.messages.{module}", fromlist=["_"]
    )
    oracle = as_type_checked(module)
    classes = _classes(oracle)
    assert classes, module
    for name, expected in classes.items():
        cls = getattr(ours, name)
        assert cls is not expected and dataclasses.is_dataclass(cls), name
        assert _shape(cls) == _shape(expected), name
        assert cls.__slots__ == expected.__slots__, name  # type: ignore[attr-defined]
        assert cls.__match_args__ == expected.__match_args__, name  # type: ignore[attr-defined]
        assert "__dict__" not in dir(cls()), name
        assert repr(cls()) == repr(expected()), name


def _as_oracle(value: Any, oracle: types.ModuleType) -> Any:
    """``value`` rebuilt from the oracle's classes with the very same field values."""
    if isinstance(value, tuple):
        return tuple(_as_oracle(item, oracle) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _as_oracle(getattr(value, f.name), oracle) for f in dataclasses.fields(value)}
        return getattr(oracle, type(value).__name__)(**fields)
    return value


def _samples() -> list[tuple[str, int]]:
    """One version per message, the newest: it carries the most fields."""
    newest: dict[str, int] = {}
    for name, version in pairs():
        newest[name] = max(version, newest.get(name, version))
    return sorted(newest.items())


@pytest.mark.parametrize(("name", "version"), _samples())
def test_messages_behave_as_their_dataclass(name: str, version: int) -> None:
    rng = random.Random(f"{name}/{version}")
    message = random_message(name, version, rng)
    expected = _as_oracle(message, as_type_checked(type(message).__module__.rsplit(".", 1)[1]))
    assert type(expected) is not type(message) and dataclasses.is_dataclass(expected)
    assert repr(message) == repr(expected)
    assert hash(message) == hash(expected)
    assert dataclasses.asdict(message) == dataclasses.asdict(expected)
    assert dataclasses.astuple(message) == dataclasses.astuple(expected)
    again = message_class(name).decode(version, message.encode(version))
    assert again == message and hash(again) == hash(message) and again is not message
    assert message != expected  # different classes never compare equal, as in dataclasses
    assert pickle.loads(pickle.dumps(message)) == message
    assert dataclasses.replace(message) == message
    first = dataclasses.fields(message)[0].name
    changed = dataclasses.replace(message, **{first: getattr(dataclasses.replace(message), first)})
    assert changed == message
    with pytest.raises(dataclasses.FrozenInstanceError) as ours:
        setattr(message, first, None)
    with pytest.raises(dataclasses.FrozenInstanceError) as theirs:
        setattr(expected, first, None)
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(dataclasses.FrozenInstanceError) as ours:
        delattr(message, first)
    with pytest.raises(dataclasses.FrozenInstanceError) as theirs:
        delattr(expected, first)
    assert str(ours.value) == str(theirs.value)
