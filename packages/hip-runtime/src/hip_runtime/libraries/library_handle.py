"""A vendor library's handle bound to one stream: the lifecycle Blas and Dnn share.

Construction makes the handle (the library's create call, with the stream's device current)
and binds it to the stream (its set-stream call), so all its work is queued there; a failure
of either raises the library's error (its `check`) and leaves no handle behind (one whose
stream could not be set is destroyed at once). From then on it is a hip_core.Resource: the
subclass's `release(api, handle, *owned)` runs exactly once, at `close()` (or `with` exit;
closing twice is harmless) or, for one collected unclosed, from the finalizer (which never
raises); `_check_open()` raises hip_core.ClosedError("<class> is closed") after that.

Device addresses go to these libraries as `void*` cdata; `_void` keeps one per address (a
cast per pointer per call costs more than the rest of a planned call, and the memory pool
hands repeated calls the same addresses).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from hip_core import Resource, Stream
from hip_core import hip_api as hip  # the raw library entry points (hip-core wraps none)

_VOIDS = 4096  # void* cdata a handle keeps, by address (then it starts again)


@dataclass(frozen=True)
class LibraryCalls:
    """A library's handle calls: the handle's cffi type (e.g. "hipblasHandle_t"), the names of
    its create and set-stream entry points, and `check(status, call)`, which raises the
    library's error for a failing status."""

    handle_type: str
    create: str
    set_stream: str
    check: Callable[[int, str], None]


class LibraryHandle(Resource):
    """A handle of the library `calls` names, its work queued on `stream` (bound once, at
    creation; see the module doc). `release(api, handle, *owned)` destroys it and `owned`."""

    calls: ClassVar[LibraryCalls]

    def __init__(self, stream: Stream, release: Callable[..., None], *owned: Any) -> None:
        calls = self.calls
        api = hip()
        out = api.ffi.new(f"{calls.handle_type}*")
        with stream.device:
            calls.check(getattr(api, calls.create)(out), calls.create)
        self._api = api
        self.handle = out[0]
        self.stream = stream
        self._voids: dict[int, Any] = {}  # address -> void* (`_void`)
        self._own(release, api, self.handle, *owned)
        try:
            calls.check(getattr(api, calls.set_stream)(self.handle, stream.handle),
                        calls.set_stream)  # fmt: skip
        except BaseException:
            with contextlib.suppress(Exception):  # the binding's error is the one to report
                self.close()
            raise

    def _void(self, address: int) -> Any:
        """`address` as a `void*` cdata, one per address (module doc). Holds no memory: a
        pointer value only."""
        found = self._voids.get(address)
        if found is None:
            if len(self._voids) >= _VOIDS:
                self._voids.clear()
            found = self._voids[address] = self._api.ffi.cast("void*", address)
        return found


__all__ = ["LibraryCalls", "LibraryHandle"]
