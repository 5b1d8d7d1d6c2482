"""Imports only go down the stack: hip_ffi <- hip_cpu <- hip_core <- hip_runtime <- hip_backend.

hip_ffi reaches hip_cpu only through the `hip_ffi.platforms` entry point (importlib, never an
import statement), so the cpu platform's runtime stays out of the bindings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("hip_ffi", "hip_cpu", "hip_core", "hip_runtime", "hip_backend")
PACKAGE_DIRS = {layer: layer.replace("_", "-") for layer in LAYERS}


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
