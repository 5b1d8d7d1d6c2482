"""Deterministic release of HIP handles, with a finalizer as a silent safety net."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from typing import Any

#: Bumped whenever any resource is released. Caches of raw handles and pointers (a kernel's
#: packed arguments and launch configuration) are valid only within one generation, so a closed
#: stream or freed buffer is never used through a stale cache.
generation = 0


def _bump_generation() -> None:
    global generation
    generation += 1


class ClosedError(ValueError):
    """The object was closed (or never opened); nothing was done."""


class Resource:
    """Base of objects owning a HIP handle: `close()`, context manager, safety-net finalizer.

    Subclasses call `_own(release, *args)` once the handle exists; `release(*args)` then runs
    exactly once: at `close()`, at `with` exit, or when the object is collected. The finalizer
    never runs at interpreter exit (the runtime may be gone by then) and never raises.
    """

    __slots__ = ("__weakref__", "_finalizer")

    def _own(self, release: Callable[..., Any], *args: Any) -> None:
        finalizer = weakref.finalize(self, _release_quietly, release, args)
        finalizer.atexit = False
        self._finalizer = finalizer

    @property
    def closed(self) -> bool:
        finalizer = getattr(self, "_finalizer", None)
        return finalizer is None or not finalizer.alive

    def close(self) -> None:
        """Release the handle now. Closing twice is harmless."""
        finalizer = getattr(self, "_finalizer", None)
        detached = finalizer.detach() if finalizer is not None else None
        if detached is not None:  # (object, _release_quietly, (release, args), kwargs)
            release, args = detached[2]
            _bump_generation()
            release(*args)  # an explicit close reports failures

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError(f"{type(self).__name__} is closed")

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _release_quietly(release: Callable[..., Any], args: tuple[Any, ...]) -> None:
    _bump_generation()
    with contextlib.suppress(Exception):  # a safety net must never raise from a finalizer
        release(*args)
