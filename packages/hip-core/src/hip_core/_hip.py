"""The HipApi that hip-core calls: loaded once on first use (never at import), switchable."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import hip_ffi

_lock = threading.Lock()
_api: Any = None


def hip() -> Any:
    """The process's HipApi (`hip_ffi.load()`: HIP_PLATFORM, else detection), loaded on first
    use. Public as `hip_core.hip_api()` for layers that make raw calls hip-core does not wrap
    (hipBLAS) or read the platform's `traits`; they must check the statuses with
    `hip_core.errors.check*`."""
    global _api
    if _api is None:
        with _lock:
            if _api is None:
                _api = hip_ffi.load()
    return _api


@contextmanager
def use_platform(name: str) -> Iterator[Any]:
    """Make `hip_ffi.load(name)` hip-core's process-wide HipApi inside the block (yielded), and
    restore the previous one after, even when the block raises.

    For tests that run on several platforms in one process. The switch is process-wide, not
    per thread, so nothing else may be using hip-core meanwhile; resources made inside the block
    belong to that platform and must not be used after it. `Device(i)` inside the block is that
    platform's device (Device objects are kept per platform).
    """
    global _api
    api = hip_ffi.load(name)
    with _lock:
        previous, _api = _api, api
    try:
        yield api
    finally:
        with _lock:
            _api = previous
