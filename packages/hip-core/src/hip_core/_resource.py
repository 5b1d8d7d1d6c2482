"""Deterministic release of HIP handles, with a finalizer as a silent safety net."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

#: Bumped whenever a resource that a launch can name (a stream, a buffer or view, a module) is
#: closed. Caches of raw handles and pointers (a kernel's packed arguments and launch
#: configuration) are valid only within one generation, so a closed stream or buffer is never
#: used through a stale cache (even one whose close freed nothing, such as a view or a borrowed
#: stream: the slow path refuses those too). A collection does not bump it: a cache holds
#: references to what it packed, so nothing it names can be collected; and events, graphs and
#: pools never reach a kernel's packing, so closing them leaves every cache valid (issue 15:
#: each dropped op output used to send every kernel's next launch down the checked path).
generation = 0


_is_finalizing = sys.is_finalizing  # (read at every collection: one global, not two lookups)

#: Captures (hip_core.capture blocks) in progress in this process, and the releases of objects
#: collected meanwhile. A collection can happen anywhere, the cyclic collector's included, so
#: it can land inside a capture block; there, a release (hipFree, hipModuleUnload,
#: hipEventDestroy…) is a call the capturing thread must not make: CUDA invalidates the capture
#: (hipErrorStreamCaptureInvalidated at the block's next launch, seen on the H200 when a
#: module from an earlier loop was collected mid-capture). Those releases wait for the last
#: capture to end (`capture_ended`). An explicit close() is the caller's own call and runs.
_captures_open = 0
_deferred_releases: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []


def _bump_generation() -> None:
    global generation
    generation += 1


def capture_began() -> None:
    """A capture block began: collections release nothing until every one has ended."""
    global _captures_open
    _captures_open += 1


def capture_ended() -> None:
    """A capture block ended (its graph made or dropped): the last one runs the releases
    deferred meanwhile (each once; a failure is dropped, as a collection's would be)."""
    global _captures_open
    _captures_open -= 1
    while not _captures_open and _deferred_releases:
        release, args = _deferred_releases.pop()
        try:
            release(*args)
        except Exception:  # (what the finalizer would have done with it)
            continue


def nothing(*_: Any) -> None:
    """The release of something not owned (a null or borrowed stream, borrowed memory)."""


class ClosedError(ValueError):
    """The object was closed (or never opened); nothing was done."""


class Resource:
    """Base of objects owning a HIP handle: `close()`, context manager, safety-net finalizer.

    Subclasses call `_own(release, *args)` once the handle exists; `release(*args)` then runs
    exactly once: at `close()`, at `with` exit, or when the object is collected (`__del__`,
    which costs nothing at creation, unlike a weakref.finalize). The collection path never runs
    while the interpreter shuts down (the runtime may be gone by then) and never raises.

    Holders: something that still uses the handle on the device after Python has let go of the
    object (a graph that captured a buffer or a kernel of a module) calls `_hold()`, and
    `_let_go()` when it is done. `close()` of a held resource retires it at once (`closed`,
    ClosedError from then on) but defers the release until the last holder lets go.
    """

    __slots__ = ("__weakref__", "_deferred", "_holders", "_releaser", "_releaser_args")

    #: Whether closing one may leave a launch cache naming it (see `generation`); False for
    #: classes a kernel's arguments or stream can never be (events, graphs, pools).
    _named_by_launches = True

    def _own(self, release: Callable[..., Any], *args: Any) -> None:
        self._releaser_args = args
        self._releaser: Callable[..., Any] | None = release
        # Set, not left to getattr's default: a missing slot costs an AttributeError raised
        # and caught on every close and collection (0.3-0.5 µs each, issue 15).
        self._holders = 0
        self._deferred: Callable[..., Any] | None = None

    @property
    def closed(self) -> bool:
        return getattr(self, "_releaser", None) is None

    def close(self) -> None:
        """Release the handle now (or, while a graph holds it, once the last one lets go).
        Closing twice is harmless."""
        release = getattr(self, "_releaser", None)
        if release is None:
            return
        self._releaser = None
        if self._named_by_launches:
            _bump_generation()
        if self._holders:
            self._deferred = release
        elif release is not nothing:
            release(*self._releaser_args)  # an explicit close reports failures

    def _hold_target(self) -> Resource:
        """What a holder of this object holds (a buffer: its allocation)."""
        return self

    def _hold(self) -> None:
        """Keep the handle valid, whatever `close()` is called meanwhile, until `_let_go()`."""
        self._holders = getattr(self, "_holders", 0) + 1

    def _let_go(self) -> None:
        """Undo one `_hold()`; the last one runs a release that `close()` deferred."""
        self._holders -= 1
        release = getattr(self, "_deferred", None)
        if not self._holders and release is not None:
            self._deferred = None
            release(*self._releaser_args)

    def __del__(self) -> None:
        # Collected while open, or closed while held and never let go (its holders are
        # garbage too): release either way.
        try:  # (plain reads: `_own` sets both; a getattr with a default costs twice as much)
            release = self._releaser or self._deferred
        except AttributeError:  # never owned anything (its constructor raised first)
            return
        if release is None or release is nothing or _is_finalizing():
            return
        self._releaser = self._deferred = None
        if _captures_open:  # (see _captures_open: released when the capture ends)
            _deferred_releases.append((release, self._releaser_args))
            return
        try:  # (not contextlib.suppress: a context manager per collection costs 0.4 µs)
            release(*self._releaser_args)
        except Exception:  # a safety net must never raise from a finalizer
            return

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError(f"{type(self).__name__} is closed")

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
