"""The module paths kept when hip-runtime's flat modules moved into folders (issue 40): each old
path users were shown still imports, both spellings, and gives the very objects of the new one;
nothing in the packages imports the old paths themselves.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

MOVED = {
    "hip_runtime.kernel_sources": "hip_runtime.libraries.kernel_sources",
    "hip_runtime.dtypes": "hip_runtime.tensors.dtypes",
    "hip_runtime.tensor": "hip_runtime.tensors.tensor",
    "hip_runtime.dnn": "hip_runtime.libraries.dnn",
    "hip_runtime.testing_conv": "hip_runtime.testing.conv",
}
PACKAGES = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_re_exports_every_public_name_of_the_new_module(old: str) -> None:
    module, new = importlib.import_module(old), importlib.import_module(MOVED[old])
    assert set(module.__all__) == set(new.__all__)
    for name in module.__all__:
        assert getattr(module, name) is getattr(new, name), name


def test_the_old_paths_import_as_names_of_the_package() -> None:
    import hip_runtime
    from hip_runtime import dnn, dtypes, kernel_sources, tensor, testing_conv

    for module in (dnn, dtypes, kernel_sources, tensor, testing_conv):
        assert module.__name__ in MOVED
        assert getattr(hip_runtime, module.__name__.rsplit(".", 1)[1]) is module


def test_nothing_in_the_packages_imports_an_old_path() -> None:
    shims = {PACKAGES / "hip-runtime/src" / (old.replace(".", "/") + ".py") for old in MOVED}
    users = []
    for path in sorted(PACKAGES.glob("*/src/**/*.py")):
        if path in shims:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                names = {f"{node.module}.{alias.name}" for alias in node.names} | {node.module}
            elif isinstance(node, ast.Import):
                names = {alias.name for alias in node.names}
            else:
                continue
            users += [f"{path.relative_to(PACKAGES)}: {name}" for name in names & set(MOVED)]
    assert users == []
