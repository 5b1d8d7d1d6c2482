"""The cpu stream engine's lock, as held by a thread: `with engine.held:` (streams.py).

Kept apart from the engine because what it counts is what the engine's finalizer rules rest on
(Engine.must_not_wait): how deeply this thread holds the lock, visible to a finalizer that
garbage collection runs anywhere inside or around a critical section.
"""

from __future__ import annotations

import threading


class Held:
    """`with engine.held:` takes the engine's (re-entrant) lock and counts, per thread, how
    deeply this thread holds it.

    The count goes up before the lock is taken and down after it is let go: a finalizer that
    garbage collection runs on this thread anywhere in between sees a count above zero and
    defers its release (Engine.must_not_wait) instead of waiting inside a critical section.
    """

    def __init__(self, cond: threading.Condition, local: threading.local) -> None:
        self._cond = cond
        self._local = local

    def __enter__(self) -> None:
        local = self._local
        local.depth = getattr(local, "depth", 0) + 1
        try:
            self._cond.acquire()
        except BaseException:  # interrupted (Ctrl-C) before the lock was taken
            local.depth -= 1
            raise

    def __exit__(self, *exc: object) -> None:
        self._cond.release()
        self._local.depth -= 1
