"""Write (or compare) every generated module and the lazy registry that indexes them."""

from __future__ import annotations

import re
from pathlib import Path

from tools.codegen.emit import HEADER, render
from tools.codegen.schema import Message, load_all

OUTPUT_DIR = Path(__file__).resolve().parents[2] / "src" / "strom" / "protocol" / "messages"


def module_name(message: Message) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", message.name).lower()


def render_all(schema_dir: Path) -> dict[str, str]:
    """File name -> source for every generated file."""
    messages = load_all(schema_dir)
    files = {f"{module_name(m)}.py": render(m) for m in messages}
    for name, source in files.items():
        compile(source, name, "exec")  # fail here, not at import time
    files["__init__.py"] = render_registry(messages)
    return files


def render_registry(messages: list[Message]) -> str:
    modules = "\n".join(f'    "{m.name}": "{module_name(m)}",' for m in messages)
    by_key: dict[int, dict[str, Message]] = {}
    for m in messages:
        if m.api_key is not None:
            by_key.setdefault(m.api_key, {})[m.kind] = m
    apis = []
    for key in sorted(by_key):
        request, response = by_key[key]["request"], by_key[key]["response"]
        name = request.name.removesuffix("Request")
        valid = request.valid
        flex_req = request.flexible.intersect(valid)
        flex_resp = response.flexible.intersect(response.valid)
        apis.append(
            f'    {key}: ApiInfo({key}, "{name}", "{request.name}", "{response.name}", '
            f"range({valid.low}, {valid.high + 1}), "
            f"range({flex_req.low}, {max(flex_req.high, flex_req.low - 1) + 1}), "
            f"range({flex_resp.low}, {max(flex_resp.high, flex_resp.low - 1) + 1})),"
        )
    return HEADER.format(source="the schemas") + REGISTRY.replace("@MODULES@", modules).replace(
        "@APIS@", "\n".join(apis)
    )


def generate(schema_dir: Path) -> int:
    files = render_all(schema_dir)
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    for old in OUTPUT_DIR.glob("*.py"):
        if old.name not in files:
            old.unlink()
    for name, source in files.items():
        path = OUTPUT_DIR / name
        if not path.exists() or path.read_text() != source:
            path.write_text(source)
    return len(files)


def stale_files(schema_dir: Path) -> list[str]:
    files = render_all(schema_dir)
    stale = [
        n
        for n, src in files.items()
        if not (OUTPUT_DIR / n).exists() or (OUTPUT_DIR / n).read_text() != src
    ]
    stale += [p.name for p in OUTPUT_DIR.glob("*.py") if p.name not in files]
    return sorted(stale)


REGISTRY = '''"""Every Kafka message, generated from the schemas; modules load on first use.

``from strom.protocol.messages import MetadataRequest`` imports just the Metadata
request module. ``APIS`` describes every API key without importing anything.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from strom.protocol.message import Message


class ApiInfo(NamedTuple):
    api_key: int
    name: str
    request: str
    response: str
    versions: range
    request_flexible: range
    response_flexible: range

    def request_class(self) -> type[Message]:
        return message_class(self.request)

    def response_class(self) -> type[Message]:
        return message_class(self.response)


MODULES: dict[str, str] = {
@MODULES@
}

APIS: dict[int, ApiInfo] = {
@APIS@
}


_LOADED: dict[str, type[Message]] = {}


def message_class(name: str) -> type[Message]:
    """The generated class called ``name`` (e.g. ``"FetchRequest"``), imported on demand."""
    cls = _LOADED.get(name)
    if cls is None:
        module = import_module(f"{__name__}.{MODULES[name]}")
        cls = _LOADED[name] = getattr(module, name)
    return cls


def __getattr__(name: str) -> Any:
    if name in MODULES:
        return message_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
'''
