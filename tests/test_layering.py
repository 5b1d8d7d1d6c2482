"""Imports only go down the stack: hip_ffi <- hip_core <- hip_runtime <- hip_backend."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("hip_ffi", "hip_core", "hip_runtime", "hip_backend")
PACKAGE_DIRS = dict(zip(LAYERS, ("hip-ffi", "hip-core", "hip-runtime", "hip-backend"), strict=True))


def _imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names & set(LAYERS)


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_itself_and_layers_below(layer: str) -> None:
    allowed = set(LAYERS[: LAYERS.index(layer) + 1])
    sources = list((ROOT / "packages" / PACKAGE_DIRS[layer] / "src" / layer).rglob("*.py"))
    assert sources, layer
    upward = {
        str(path.relative_to(ROOT)): sorted(_imported_layers(path) - allowed) for path in sources
    }
    assert {path: bad for path, bad in upward.items() if bad} == {}
