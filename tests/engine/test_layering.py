"""Dependencies point one way: nothing outside `headwater.connectors` imports a connector (the
engine reaches connectors through its registry, by `connector.class`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import headwater

PACKAGE = Path(headwater.__file__).parent
OUTSIDE = ["engine", "spark", "relational", "model", "serialization", "sinks", "config", "cli", "standalone.py"]


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize("part", OUTSIDE)
def test_nothing_outside_the_connectors_imports_one(part):
    root = PACKAGE / part
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    assert files
    found = [f"{f.relative_to(PACKAGE)}: {name}" for f in files for name in _imports(f)
             if name == "headwater.connectors" or name.startswith("headwater.connectors.")]
    assert not found, "imports of a connector outside headwater.connectors:\n" + "\n".join(found)
