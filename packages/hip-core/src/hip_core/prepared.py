"""Prepared launches (`Kernel.prepare`): one kernel launch packed once, called with its
pointer arguments; and the argument buffer every launch packs into (`argument_buffer`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hip_core import _capture, _resource
from hip_core._hip import hip
from hip_core.signature import Param, value_writer

if TYPE_CHECKING:
    from hip_core.kernel import Kernel
    from hip_core.launch_config import LaunchConfig


def argument_buffer(
    ffi: Any, params: Sequence[Param]
) -> tuple[Any, Any, tuple[Any, ...], list[int]]:
    """(storage, void*[] into it, a value writer per parameter, offsets): one argument buffer,
    each slot aligned as the C ABI lays them out. The runtime reads each argument through its
    own pointer, with the size the kernel's code gives it; the spare 16 bytes at the end keep
    a read of a vector padded to 16 bytes (a 3-vector on some compilers) inside the buffer."""
    offsets, end = [], 0
    for p in params:
        align = p.align or p.size
        end = -(-end // align) * align
        offsets.append(end)
        end += p.size
    storage = ffi.new("char[]", end + 16)
    base = ffi.cast("char*", storage)
    pointers = ffi.new("void*[]", [ffi.cast("void*", base + o) for o in offsets] or [ffi.NULL])
    writers = tuple(
        value_writer(p, ffi.cast(p.storage + "*", base + o))
        for p, o in zip(params, offsets, strict=True)
    )
    return storage, pointers, writers, offsets


class PreparedLaunch:
    """One kernel launch packed once (`Kernel.prepare`), called with its pointer arguments.

    `prepared(address, ...)` (one int per pointer parameter, in order) writes the addresses
    into its own argument buffer and launches: the cheapest launch there is from Python (issue
    15: an op's launch plan holds one). It returns True when it launched, False when it did
    not and the caller must take `Kernel.launch` with the same arguments instead, which then
    checks, raises or records as that does: while a capture runs (a graph must keep what a
    launch names, which a raw address cannot tell), when another thread is inside this same
    object (its buffer is being written), after a module or stream it names was closed, or
    when the launch failed (a failed launch has no effect; the checked path re-issues it for
    HIP's status). The addresses are not checked: the caller has checked that its memory is
    open, and work on it is stream-ordered before any reuse of that memory.

    Thread safety: the buffer is written and launched while this object's one token is taken
    (a try-lock that never waits: a second thread takes the checked path), so sharing one is
    safe.
    """

    __slots__ = ("_config", "_count", "_fast", "_generation", "_handle", "_last", "_lock",
                 "_null", "_pointers", "_run", "_slots", "_storage", "_stream",
                 "kernel")  # fmt: skip

    def __init__(self, kernel: Kernel, config: LaunchConfig, args: tuple[Any, ...]) -> None:
        params = kernel.params
        if len(args) != len(params):
            kernel._pack(args)  # raises the launch's TypeError
        ffi = hip().ffi
        self._storage, self._pointers, writers, offsets = argument_buffer(ffi, params)
        for write, value in zip(writers, args, strict=True):
            write(value)
        base = ffi.cast("char*", self._storage)
        at = [o for p, o in zip(params, offsets, strict=True) if p.kind == "pointer"]
        # Consecutive pointer slots (the usual C parameter list: the pointers first) are one
        # array written by one slice assignment; others one cell each.
        step = ffi.sizeof("uintptr_t")
        consecutive = bool(at) and at == list(range(at[0], at[0] + step * len(at), step))
        self._run = ffi.cast("uintptr_t*", base + at[0]) if consecutive else None
        self._count = len(at)
        self._slots = tuple(ffi.cast("uintptr_t*", base + o) for o in at)
        self._config = ffi.new("HIP_LAUNCH_CONFIG*")
        kernel._fill_config(self._config, config)
        self.kernel = kernel
        self._handle = kernel.handle
        self._fast = kernel._launch_fast
        self._null = ffi.NULL
        self._stream = config.stream
        # The buffer's owner: a one-entry list, taken by `pop()` and given back by `append()`
        # (both atomic, and a tenth of a non-blocking Lock.acquire's argument parsing).
        self._lock = [True]
        self._generation = _resource.generation
        self._last: tuple[int, ...] | None = None  # the addresses in the buffer now

    def __call__(self, *addresses: int) -> bool:
        if self._generation != _resource.generation and not self._revalidate():
            return False
        if _capture.captures:
            return False
        lock = self._lock
        try:
            lock.pop()
        except IndexError:  # another thread is inside
            return False
        try:
            if addresses != self._last:  # (a pool's reuse repeats them: nothing to write)
                self._last = None  # a failure below leaves nothing to trust
                run = self._run
                if run is not None and len(addresses) == self._count:
                    run[0 : self._count] = addresses
                else:
                    for slot, address in zip(self._slots, addresses, strict=True):
                        slot[0] = address
                self._last = addresses
            status = self._fast(self._config, self._handle, self._pointers, self._null)
        finally:
            lock.append(True)
        return not status

    def _revalidate(self) -> bool:
        """After a release anywhere: whether the module and stream are still open."""
        stream = self._stream
        if self.kernel.module.closed or (stream is not None and stream.closed):
            return False
        self._generation = _resource.generation
        return True
