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


#: Layers above hip-core use its public names only (`hip_core.X`, its public modules); the one
#: exception is the lazy-export helper every layer's `__init__` shares.
_PRIVATE_ALLOWED = {"hip_core._lazy"}


def _private_imports(path: Path, below: set[str]) -> list[str]:
    """`layer._module` or `from layer import _name` of a layer in `below`, as written."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            modules = [node.module, *(n for n in names if n.rsplit(".", 1)[1].startswith("_"))]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            private = any(p.startswith("_") for p in parts[1:])
            if parts[0] in below and private and module not in _PRIVATE_ALLOWED:
                found.append(module)
    return found


@pytest.mark.parametrize("layer", LAYERS[LAYERS.index("hip_runtime") :])
def test_layers_above_hip_core_import_no_private_module_below(layer: str) -> None:
    """hip_runtime and hip_backend import nothing private of hip_ffi and hip_core (whose
    private modules may change with any release of those layers)."""
    below = {"hip_ffi", "hip_core"}
    sources = list((ROOT / "packages" / PACKAGE_DIRS[layer] / "src" / layer).rglob("*.py"))
    assert sources, layer
    private = {str(path.relative_to(ROOT)): _private_imports(path, below) for path in sources}
    assert {path: names for path, names in private.items() if names} == {}
