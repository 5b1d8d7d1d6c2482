"""The surface, the C declarations and the constant tables agree with each other."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import resources

from hip_ffi import constants, surface


def _declared_functions() -> set[str]:
    cdef = resources.files("hip_ffi") / "cdef"
    text = "\n".join(f.read_text() for f in cdef.iterdir() if f.name.endswith(".h"))
    return set(re.findall(r"^[\w\s\*]+?\b(\w+)\s*\(", text, flags=re.MULTILINE))


def test_every_surface_function_is_declared_in_the_cdefs() -> None:
    missing = [name for name in surface.ALL if name not in _declared_functions()]
    assert missing == []


def test_surface_names_are_unique() -> None:
    assert len(set(surface.ALL)) == len(surface.ALL)


def test_error_names_are_canonical_and_cover_every_code() -> None:
    assert constants.ERROR_NAMES[0] == "hipSuccess"
    assert constants.ERROR_NAMES[2] == "hipErrorOutOfMemory"  # not the alias MemoryAllocation
    assert set(constants.ERROR_NAMES) == set(constants.ERROR_CODES.values())


def test_import_opens_no_library_and_imports_neither_numpy_nor_cffi() -> None:
    # In a fresh interpreter: importing hip_ffi must stay cheap (libraries open in load()).
    code = (
        "import sys, hip_ffi; "
        "heavy = [m for m in ('numpy', 'hip_ffi._hip_cffi', '_cffi_backend') if m in sys.modules]; "
        "maps = open('/proc/self/maps').read(); "
        "libs = [n for n in ('libamdhip64', 'libcudart', 'libcuda.so') if n in maps]; "
        "print(heavy, libs)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"
