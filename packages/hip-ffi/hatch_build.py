"""Wheel build hook: parse the C declarations into `hip_ffi/_hip_cffi.py`.

CFFI out-of-line ABI mode (`set_source(name, None)`) turns the cdefs into serialized type
data in a pure-Python module, so the wheel is `py3-none-any`, importing it parses nothing,
and no C compiler is ever needed. The declarations themselves live in `src/hip_ffi/cdef/`.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

HERE = Path(__file__).resolve().parent
GENERATED = "hip_ffi/_hip_cffi.py"


def _load_builder() -> Any:
    # Load by path: importing the hip_ffi package itself would need the module we are building.
    spec = importlib.util.spec_from_file_location("_hip_ffi_build", HERE / "src/hip_ffi/_build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CustomBuildHook(BuildHookInterface):  # type: ignore[misc]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        builder = _load_builder()
        if version == "editable":
            # Editable installs import from src/, so the module goes there (git ignores it).
            builder.emit(HERE / "src" / GENERATED)
            return
        out = Path(tempfile.mkdtemp(prefix="hip_ffi_build_")) / "_hip_cffi.py"
        builder.emit(out)
        build_data["force_include"][str(out)] = GENERATED
