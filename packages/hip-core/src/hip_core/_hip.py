"""The HipApi that hip-core calls, loaded once on first use (never at import)."""

from __future__ import annotations

import threading
from typing import Any

import hip_ffi

_lock = threading.Lock()
_api: Any = None


def hip() -> Any:
    """The process's HipApi (`hip_ffi.load()`: HIP_PLATFORM, else detection), loaded on first
    use. Public as `hip_core.hip_api()` for layers that make raw calls hip-core does not wrap
    (hipBLAS); they must check the statuses with `hip_core.errors.check*`."""
    global _api
    if _api is None:
        with _lock:
            if _api is None:
                _api = hip_ffi.load()
    return _api
