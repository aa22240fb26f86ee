"""The Python classes of one schema: what type checkers see and what runs.

Type checkers see each struct as a frozen slotted dataclass (fields, types, defaults,
the field's doc comment). At run time the class carries, written out, the methods the
``@dataclass`` decorator would have made: ``exec``ing them for every class at import
was most of the broker's start-up (see ``strom.protocol.frozen``). Beside each class
is a mutable twin with the same slots that decoders build and then turn into it.
"""

from __future__ import annotations

from tools.codegen.schema import Field, Message, Struct


def python_type(fld: Field) -> str:
    element = {
        "bool": "bool",
        "int8": "int",
        "int16": "int",
        "uint16": "int",
        "int32": "int",
        "int64": "int",
        "float64": "float",
        "uuid": "UUID",
        "string": "str",
        "bytes": "_p.Buffer" if fld.zero_copy else "bytes",
        "records": "_p.Records",
    }.get(fld.element_type, fld.element_type)
    text = f"tuple[{element}, ...]" if fld.is_array else element
    nullable = not fld.nullable.intersect(fld.versions).empty or fld.element_type == "records"
    return f"{text} | None" if nullable else text


def default_expr(fld: Field) -> str:
    text = fld.default_text
    if text == "null":
        if not fld.always_nullable:
            raise ValueError(f"{fld.name}: null default on a field not nullable in every version")
        return "None"
    if fld.is_array:
        return "()"
    kind = fld.element_type
    if fld.is_struct:
        return f"_DEFAULT_{kind}"
    if kind in ("int8", "int16", "uint16", "int32", "int64"):
        return str(int(text, 0)) if text else "0"
    if kind == "bool":
        return "True" if text == "true" else "False"
    if kind == "float64":
        return repr(float(text)) if text else "0.0"
    if kind == "string":
        return repr(text or "")
    if kind == "uuid":
        return "_p.ZERO_UUID"
    if kind == "bytes":
        return 'b""'
    if kind == "records":
        return "None"
    raise ValueError(f"no default for {fld.type}")


class ClassWriter:
    """The class-writing half of ``ModuleWriter``: one frozen class and its twin."""

    message: Message

    def emit(self, text: str, where: str | None = None) -> None:
        raise NotImplementedError

    def write_class(self, struct: Struct, root: bool) -> None:
        message = self.message
        base = "(_Message)" if root else ""
        self.emit("")
        self.emit("")
        self.emit("@dataclass(frozen=True, slots=True)")
        self.emit(f"class {struct.name}{base}:")
        if root:
            self.emit(f'    """{message.kind.capitalize()} {message.name} ({message.source})."""')
            self.emit("")
            # A request or response has a key; typed int so callers need no None check.
            key_type = "int | None" if message.api_key is None else "int"
            self.emit(f"    API_KEY: ClassVar[{key_type}] = {message.api_key}")
            self.emit(f'    NAME: ClassVar[str] = "{message.name}"')
            self.emit(f'    KIND: ClassVar[str] = "{message.kind}"')
            valid = message.valid
            self.emit(f"    VALID_VERSIONS: ClassVar[range] = range({valid.low}, {valid.high + 1})")
            flexible = message.flexible.intersect(valid)
            self.emit(
                f"    FLEXIBLE_VERSIONS: ClassVar[range] = range({flexible.low}, {max(flexible.high, flexible.low - 1) + 1})"
            )
        keys = struct.map_keys()
        if keys:
            names = ", ".join(repr(k.attr) for k in keys)
            self.emit(f"    MAP_KEY: ClassVar[tuple[str, ...]] = ({names},)")
        self.emit("    if TYPE_CHECKING:")
        for fld in struct.fields:
            about = " ".join(fld.about.split())
            if about:
                self.emit(f"        #: {about}")
            self.emit(f"        {fld.attr}: {python_type(fld)} = {default_expr(fld)}")
        self.emit(
            "        unknown_tagged_fields: _p.UnknownTaggedFields = field(default=(), repr=False)"
        )
        self.emit("    else:")
        self._write_dataclass_methods(struct)
        self._write_builder(struct, root)

    def _write_dataclass_methods(self, struct: Struct) -> None:
        """What ``@dataclass(frozen=True, slots=True)`` would add, written out.

        The decorator ``exec``s these methods at every import, which was most of the
        broker's start-up; written here they compile once into the module's ``.pyc``.
        The fields and defaults are the ones the type checker reads above.
        """
        fields = [(f.attr, python_type(f), default_expr(f)) for f in struct.fields]
        fields.append(("unknown_tagged_fields", "_p.UnknownTaggedFields", "()"))
        names = [name for name, _, _ in fields]
        slots = "".join(repr(n) + ", " for n in names)
        self.emit(f"        __slots__ = __match_args__ = ({slots})")
        for name, kind, _ in fields:
            self.emit(f"        {name}: {kind}")
        self.emit("        __dataclass_fields__ = _frozen.FIELDS")
        self.emit("        __setattr__ = _frozen.frozen_setattr")
        self.emit("        __delattr__ = _frozen.frozen_delattr")
        self.emit("        __getstate__ = _frozen.getstate")
        self.emit("        __setstate__ = _frozen.setstate")
        self.emit("")
        params = ", ".join(f"{name}: {kind} = {default}" for name, kind, default in fields)
        self.emit(f"        def __init__(self, {params}) -> None:")
        for name in names:
            self.emit(f"            _object_setattr(self, {name!r}, {name})")
        self.emit("")
        shown = ", ".join(f"{n}={{self.{n}!r}}" for n in names if n != "unknown_tagged_fields")
        self.emit("        def __repr__(self) -> str:")
        self.emit(f'            return f"{{self.__class__.__qualname__}}({shown})"')
        self.emit("")
        mine = "".join(f"self.{n}, " for n in names)
        theirs = "".join(f"other.{n}, " for n in names)
        self.emit("        def __eq__(self, other: object) -> bool:")
        self.emit("            if other.__class__ is self.__class__:")
        self.emit(f"                return ({mine}) == ({theirs})")
        self.emit("            return NotImplemented")
        self.emit("")
        self.emit("        def __hash__(self) -> int:")
        self.emit(f"            return hash(({mine}))")

    def _write_builder(self, struct: Struct, root: bool) -> None:
        """A mutable twin with the same slots, whose instances become ``struct`` at birth.

        A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``,
        which costs several times a plain slot store; decoders build thousands of
        objects, so they build twins and switch the class (same slots, same layout).
        """
        names = [f.attr for f in struct.fields] + ["unknown_tagged_fields"]
        base = "(_Message)" if root else ""
        self.emit("")
        self.emit("")
        self.emit(f"class _New_{struct.name}{base}:")
        self.emit(f"    __slots__ = ({''.join(repr(n) + ', ' for n in names)})")
        for name in names:
            self.emit(f"    {name}: Any")
        self.emit("")
        params = ", ".join(f"{n}: Any" for n in names[:-1])
        self.emit(
            f"    def __init__(self, {params}{', ' if params else ''}unknown_tagged_fields: Any = ()) -> None:"
        )
        for name in names:
            self.emit(f"        self.{name} = {name}")
        self.emit(f"        self.__class__ = {struct.name}  # type: ignore[assignment]")
