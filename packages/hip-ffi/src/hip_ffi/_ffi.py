"""The one cffi FFI object holding every declaration in cdef/ (generated at build time)."""

from __future__ import annotations

from typing import Any

try:
    from hip_ffi._hip_cffi import ffi as _ffi
except ImportError as error:  # a source checkout whose module was never generated
    raise ImportError(
        "hip_ffi._hip_cffi is missing: install the hip-ffi wheel, or generate it in a source "
        "checkout with `python packages/hip-ffi/src/hip_ffi/_build.py`"
    ) from error

ffi: Any = _ffi
NULL: Any = ffi.NULL
