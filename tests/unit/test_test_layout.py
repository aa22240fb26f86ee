"""The test suite's own layout rule: no module under tests/ imports a test module or a
conftest. Shared machinery lives in tests/support/, so moving or deleting one test file
never breaks another, and pytest never collects a test twice through an import."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def test_no_module_under_tests_imports_a_test_module_or_a_conftest() -> None:
    offenders = [
        f"{path.relative_to(TESTS.parent)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in _imported_modules(path)
        if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith(("test_", "conftest"))
    ]
    assert offenders == []


def test_the_rule_sees_an_import_of_a_test_module(tmp_path: Path) -> None:
    module = tmp_path / "test_example.py"
    module.write_text("from tests.client.test_consumer import create_topic\nimport tests.spark.conftest\n")
    assert _imported_modules(module) == [
        "tests.client.test_consumer", "tests.client.test_consumer.create_topic", "tests.spark.conftest"]
