"""Kafka's JSON message definitions, read into a small typed model.

The schemas (``shared/kafka-protocol/schemas``) are JSON with ``//`` comments. This
module knows their vocabulary (versions, nullable/tagged/flexible version ranges,
common structs, custom defaults) and nothing about Python code; ``emit`` turns the
model into source. The tests use the same model to build Hypothesis strategies, so
"every value the schema allows round-trips" is checked against the schema itself.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

PRIMITIVES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "uint16",
        "int32",
        "int64",
        "float64",
        "uuid",
        "string",
        "bytes",
        "records",
    }
)
FIXED_FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
    "float64": "d",
}
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
MAX_VERSION = 2**15 - 1


@dataclass(frozen=True)
class Versions:
    """An inclusive version range as the schemas write it: "0+", "3-7", "5", "none"."""

    low: int
    high: int  # inclusive; -1 with low 0 means "none"

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return cls(0, -1)
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.low, other.low), min(self.high, other.high))

    @property
    def empty(self) -> bool:
        return self.high < self.low

    def range(self) -> range:
        return range(self.low, self.high + 1)


def snake_case(name: str) -> str:
    """CamelCase schema names to Python attribute names (``ISRVersion`` -> ``isr_version``)."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    name = name.lower()
    return name + "_" if keyword.iskeyword(name) else name


@dataclass
class Field:
    name: str  # the schema's CamelCase name
    type: str  # "int32", "[]int32", "[]Topic", "Cursor", "records", ...
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    flexible_override: Versions | None  # per-field "flexibleVersions" (only RequestHeader.ClientId)
    ignorable: bool
    map_key: bool
    zero_copy: bool
    default_text: str | None
    about: str
    struct: Struct | None = None  # for struct and struct-array fields, resolved after loading

    @property
    def attr(self) -> str:
        return snake_case(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVES

    @property
    def always_nullable(self) -> bool:
        """Null is only a valid default where every version of the field is nullable."""
        return self.versions.intersect(self.nullable) == self.versions


@dataclass
class Struct:
    name: str
    fields: list[Field]
    versions: Versions  # the message versions this struct can appear in

    def map_keys(self) -> list[Field]:
        return [f for f in self.fields if f.map_key]


@dataclass
class Message:
    """One JSON file: a request, a response, a header or a data record."""

    name: str
    kind: str  # "request", "response", "header", "data"
    api_key: int | None
    valid: Versions
    flexible: Versions
    root: Struct
    structs: dict[str, Struct] = field(default_factory=dict)  # every named struct, root excluded
    source: str = ""

    def ordered_structs(self) -> list[Struct]:
        """Nested structs before the structs that contain them, so classes are defined in order."""
        seen: dict[str, Struct] = {}

        def visit(struct: Struct) -> None:
            for fld in struct.fields:
                if fld.struct is not None and fld.struct.name not in seen:
                    visit(fld.struct)
                    seen[fld.struct.name] = fld.struct

        visit(self.root)
        for struct in self.structs.values():  # common structs that only appear unreferenced
            if struct.name not in seen:
                visit(struct)
                seen[struct.name] = struct
        return list(seen.values())


def _strip_comments(text: str) -> str:
    """Drop ``//`` comments, leaving ``//`` inside JSON strings alone."""
    out: list[str] = []
    in_string = escaped = False
    i = 0
    while i < len(text):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                break
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _parse_field(raw: dict[str, object], message: Message, parent_versions: Versions) -> Field:
    versions = Versions.parse(str(raw["versions"]))
    default = raw.get("default")
    fld = Field(
        name=str(raw["name"]),
        type=str(raw["type"]),
        versions=versions,
        nullable=Versions.parse(raw.get("nullableVersions")),  # type: ignore[arg-type]
        tagged=Versions.parse(raw.get("taggedVersions")),  # type: ignore[arg-type]
        tag=int(raw["tag"]) if "tag" in raw else None,  # type: ignore[call-overload]
        flexible_override=Versions.parse(raw["flexibleVersions"])
        if "flexibleVersions" in raw
        else None,  # type: ignore[arg-type]
        ignorable=bool(raw.get("ignorable", False)),
        map_key=bool(raw.get("mapKey", False)),
        zero_copy=bool(raw.get("zeroCopy", False)),
        default_text=None
        if default is None
        else str(default).strip().lower()
        if isinstance(default, bool)
        else str(default).strip(),
        about=str(raw.get("about", "")),
    )
    if "fields" in raw:
        sub_versions = versions.intersect(parent_versions)
        struct = Struct(
            fld.element_type,
            [_parse_field(f, message, sub_versions) for f in raw["fields"]],  # type: ignore[attr-defined]
            sub_versions,
        )
        _register(message, struct)
        fld.struct = struct
    return fld


def _register(message: Message, struct: Struct) -> None:
    existing = message.structs.get(struct.name)
    if existing is not None and [f.name for f in existing.fields] != [
        f.name for f in struct.fields
    ]:
        raise ValueError(f"{message.name}: two different structs named {struct.name}")
    if existing is not None:
        existing.versions = Versions(
            min(existing.versions.low, struct.versions.low),
            max(existing.versions.high, struct.versions.high),
        )
        struct.fields = existing.fields
    message.structs[struct.name] = existing or struct


def _resolve(message: Message, struct: Struct) -> None:
    for fld in struct.fields:
        if fld.is_struct and fld.struct is None:
            target = message.structs.get(fld.element_type)
            if target is None:
                raise ValueError(f"{message.name}: unknown struct type {fld.type}")
            fld.struct = target
        if fld.struct is not None and fld.struct is not struct:
            _resolve(message, fld.struct)


def load_message(path: Path) -> Message:
    raw = json.loads(_strip_comments(path.read_text()))
    valid = Versions.parse(raw["validVersions"])
    message = Message(
        name=raw["name"],
        kind=raw["type"],
        api_key=raw.get("apiKey"),
        valid=valid,
        flexible=Versions.parse(raw["flexibleVersions"]),
        root=Struct(raw["name"], [], valid),
        source=path.name,
    )
    for common in raw.get("commonStructs", []):
        struct = Struct(common["name"], [], valid)
        message.structs[struct.name] = struct
        struct.fields = [_parse_field(f, message, valid) for f in common["fields"]]
    message.root.fields = [_parse_field(f, message, valid) for f in raw["fields"]]
    _resolve(message, message.root)
    return message


def load_all(schema_dir: Path) -> list[Message]:
    return [load_message(p) for p in sorted(schema_dir.glob("*.json"))]


def default_schema_dir() -> Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "shared" / "kafka-protocol" / "schemas"
        if candidate.is_dir():
            return candidate
        candidate = parent.parent / "shared" / "kafka-protocol" / "schemas"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("cannot find shared/kafka-protocol/schemas next to the repository")
