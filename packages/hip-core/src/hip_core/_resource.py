"""Deterministic release of HIP handles, with a finalizer as a silent safety net."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

#: Bumped whenever any resource is released. Caches of raw handles and pointers (a kernel's
#: packed arguments and launch configuration) are valid only within one generation, so a closed
#: stream or freed buffer is never used through a stale cache.
generation = 0


def _bump_generation() -> None:
    global generation
    generation += 1


def nothing(*_: Any) -> None:
    """The release of something not owned (a null or borrowed stream, borrowed memory): it frees
    nothing, so closing it invalidates no cache."""


class ClosedError(ValueError):
    """The object was closed (or never opened); nothing was done."""


class Resource:
    """Base of objects owning a HIP handle: `close()`, context manager, safety-net finalizer.

    Subclasses call `_own(release, *args)` once the handle exists; `release(*args)` then runs
    exactly once: at `close()`, at `with` exit, or when the object is collected (`__del__`,
    which costs nothing at creation, unlike a weakref.finalize). The collection path never runs
    while the interpreter shuts down (the runtime may be gone by then) and never raises.
    """

    __slots__ = ("__weakref__", "_releaser", "_releaser_args")

    def _own(self, release: Callable[..., Any], *args: Any) -> None:
        self._releaser_args = args
        self._releaser: Callable[..., Any] | None = release

    @property
    def closed(self) -> bool:
        return getattr(self, "_releaser", None) is None

    def close(self) -> None:
        """Release the handle now. Closing twice is harmless."""
        release = getattr(self, "_releaser", None)
        if release is not None:
            self._releaser = None
            if release is not nothing:
                _bump_generation()
                release(*self._releaser_args)  # an explicit close reports failures

    def __del__(self) -> None:
        release = getattr(self, "_releaser", None)
        if release is None or release is nothing or sys.is_finalizing():
            return
        self._releaser = None
        _bump_generation()
        with contextlib.suppress(Exception):  # a safety net must never raise from a finalizer
            release(*self._releaser_args)

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError(f"{type(self).__name__} is closed")

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
