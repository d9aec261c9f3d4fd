"""Every name of `streamapp` that the tests, e2e and bench reach for exists: mypy checks the operator's
sources only, so a renamed or removed attribute would otherwise surface as an AttributeError deep in an
integration run (`module.attr` of an imported module, and each `from streamapp... import name`)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def missing_names(path: Path) -> list[str]:
    """`file:line: what` for each streamapp name `path` imports or reads that does not exist."""
    tree = ast.parse(path.read_text())
    modules: dict[str, ModuleType] = {}
    problems: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamapp"):
            parent = _module(str(node.module))
            for alias in node.names:
                child = _module(f"{node.module}.{alias.name}")
                if child is not None:
                    modules[alias.asname or alias.name] = child
                elif parent is None or not hasattr(parent, alias.name):
                    problems.append(f"{path}:{node.lineno}: {node.module} has no {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found = _module(alias.name) if alias.name.startswith("streamapp") else None
                if found is not None and alias.asname:
                    modules[alias.asname] = found
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            module = modules[node.value.id]
            if not hasattr(module, node.attr):
                problems.append(f"{path}:{node.lineno}: {module.__name__} has no {node.attr}")
    return problems


def test_every_streamapp_name_the_test_kit_uses_exists() -> None:
    problems = [
        problem
        for folder in ("tests", "e2e", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for problem in missing_names(path)
    ]
    assert problems == []
