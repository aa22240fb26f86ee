"""The shape of the code: no import cycle under ``src/``, and the layers import one way.

Imports are read from the source (``ast``), not by importing: every module-level and
function-level import counts (an import inside a function is how a cycle hides), an
import under ``if TYPE_CHECKING:`` does not (it never runs), and a package that
discovers its submodules with ``pkgutil.iter_modules(__path__)`` imports them all.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, is_package: bool) -> set[str]:
    source = path.read_text()
    targets: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if _is_type_checking(node.test):
                for statement in node.orelse:
                    self.visit(statement)
            else:
                self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            targets.update(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets.add(module)
            targets.update(f"{module}.{alias.name}" for alias in node.names)

    Visitor().visit(ast.parse(source))
    if is_package and "iter_modules(__path__)" in source:
        depth = name.count(".") + 1
        targets.update(m for m in MODULES if m.startswith(name + ".") and m.count(".") == depth)
    edges = {t for t in targets if t in MODULES and t != name}
    # Importing a.b.c runs the packages a and a.b first (not a module's own parents).
    for target in list(edges):
        parts = target.split(".")
        for i in range(1, len(parts)):
            package = ".".join(parts[:i])
            if package in MODULES and not name.startswith(package + "."):
                edges.add(package)
    return edges


GRAPH = {name: _imports(name, *where) for name, where in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_the_checker_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_graph_sees_the_code() -> None:
    assert "strom.broker.handlers.produce" in GRAPH["strom.broker.handlers"]  # discovery
    assert "strom.broker.replica_manager" in GRAPH["strom.broker.broker"]


def test_no_import_cycle_under_src() -> None:
    assert _cycles(GRAPH) == []


def _reaches(name: str, prefix: str) -> list[str]:
    return sorted(t for t in GRAPH[name] if t.startswith(prefix))


def test_protocol_is_sans_io_and_storage_knows_no_network() -> None:
    for name in GRAPH:
        if name.startswith("strom.protocol"):
            assert _reaches(name, "strom.broker") == _reaches(name, "strom.storage") == [], name
        if name.startswith("strom.storage"):
            assert _reaches(name, "strom.broker") == _reaches(name, "strom.client") == [], name


def test_the_network_layer_knows_the_broker_only_through_its_front() -> None:
    assert _reaches("strom.broker.server", "strom.broker.") == ["strom.broker.broker", "strom.broker.connection_errors", "strom.broker.request_context"]
    assert _reaches("strom.broker.server", "strom.storage") == []
