"""The run-time parts of a frozen, slotted dataclass that every generated message shares.

``@dataclass(frozen=True, slots=True)`` writes each class's ``__init__``, ``__repr__``,
``__eq__``, ``__hash__`` and frozen ``__setattr__`` as source text and ``exec``s it when
the module is imported; for the 467 generated message classes that was most of the time
``strom serve`` took to import. tools/codegen now writes those methods into the generated
modules themselves (compiled once into their ``.pyc``) and shows the class to type
checkers as the dataclass it behaves as (``dataclass_for_type_checkers``). What is the
same for every class lives here: the frozen guards, pickling of slots, and
``__dataclass_fields__``, built on first use so that ``dataclasses.fields``,
``replace``, ``asdict`` and ``is_dataclass`` work exactly as on a real dataclass.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

_T = TypeVar("_T")


def dataclass_for_type_checkers(**_options: bool) -> Callable[[_T], _T]:
    """At run time, leave the class as written: its dataclass methods are in its source."""
    return _unchanged


def _unchanged(cls: _T) -> _T:
    return cls


def frozen_setattr(self: object, name: str, value: object) -> NoReturn:
    """A frozen dataclass's ``__setattr__``: fields are set once, by ``__init__``."""
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def frozen_delattr(self: object, name: str) -> NoReturn:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def getstate(self: Any) -> list[object]:
    """Pickle state of a slotted frozen class (it has no ``__dict__``), as dataclasses does."""
    return [getattr(self, name) for name in self.__slots__]


def setstate(self: Any, state: list[object]) -> None:
    for name, value in zip(self.__slots__, state, strict=True):
        object.__setattr__(self, name, value)


class DataclassFields:
    """``__dataclass_fields__``, made the first time a class's fields are asked for.

    The fields are the class's slots, their defaults are its ``__init__``'s, their types
    its annotations; ``unknown_tagged_fields`` is left out of ``repr`` as the generator
    declares it. ``dataclasses.make_dataclass`` builds the ``Field`` objects, so they are
    the library's own; the result then replaces this descriptor on the class.
    """

    def __get__(self, instance: object, owner: type) -> dict[str, dataclasses.Field[Any]]:
        names: tuple[str, ...] = owner.__dict__["__slots__"]
        defaults = owner.__init__.__defaults__ or ()  # type: ignore[misc]
        if len(defaults) != len(names):
            raise TypeError(f"{owner.__qualname__}: every field needs a default")
        annotations = inspect.get_annotations(owner)
        specs = [
            (name, annotations.get(name, Any), dataclasses.field(default=default, repr=name != _UNKNOWN))
            for name, default in zip(names, defaults, strict=True)
        ]
        model = dataclasses.make_dataclass(owner.__name__, specs, init=False, repr=False, eq=False)
        fields = {item.name: item for item in dataclasses.fields(model)}
        type.__setattr__(owner, "__dataclass_fields__", fields)
        return fields


_UNKNOWN = "unknown_tagged_fields"  # kept out of repr, as the generator declares it
FIELDS = DataclassFields()
