"""Kernels: typed, checked launches that reuse their argument packing.

Each Kernel owns one argument buffer laid out like the C parameter list, a `void*[]` pointing
into it, and one HIP_LAUNCH_CONFIG. A launch with the same arguments (compared by equality,
buffers by identity) and the same geometry as the previous one writes nothing: it only calls
hipDrvLaunchKernelEx. Any released resource (a freed buffer, a closed stream) invalidates that
reuse, so a stale pointer is never launched. The runtime copies the arguments at launch, so the
buffer may be rewritten by the next launch at once.

The price of that comparison: a kernel holds a reference to the arguments of its last launch
(not to their data's contents), so a buffer passed to it is freed only once the kernel is
launched with other arguments, `forget_arguments()` is called, or the kernel is dropped.
Comparing by identity alone would be cheaper but unsafe: a new view can reuse a dead one's id.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hip_core import _resource
from hip_core._hip import hip
from hip_core.errors import check, error_for
from hip_core.signature import Param, value_writer
from hip_ffi.constants import FUNC_ATTRIBUTES

if TYPE_CHECKING:
    from hip_core.module import Module
    from hip_core.stream import Stream

Dim3 = int | Sequence[int]
_MAX_DIM = 2**31 - 1


def _dim3(value: Dim3, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in dims
    ):
        raise TypeError(f"{what} must be an int or 1-3 ints, not {value!r}")
    if not all(1 <= d <= _MAX_DIM for d in dims):
        raise ValueError(f"{what} dimensions must be between 1 and {_MAX_DIM}, not {value!r}")
    return (*dims, 1, 1)[:3]  # type: ignore[return-value]


class Kernel:
    """A `__global__` function of a loaded Module, with its parameter types.

    `launch(grid, block, *args, shared_mem=0, stream=None)` queues it on `stream` (the null
    stream when None) and returns at once. Arguments are checked against the parameter types
    first: a wrong count or type raises TypeError naming the parameter, and nothing is launched.
    """

    def __init__(self, module: Module, name: str, handle: Any, params: Sequence[Param]) -> None:
        api = hip()
        ffi = api.ffi
        self.module = module  # keeps the code loaded as long as the kernel exists
        self.name = name
        self.handle = handle
        self.params = tuple(params)
        # The native launch on the hot path; its (rare) failures are re-issued through the
        # surface function, which recovers a missing context and gives HIP's status.
        self._launch_fast = api.fast("hipDrvLaunchKernelEx")
        self._launch = api.hipDrvLaunchKernelEx
        self._null = ffi.NULL
        self._lock = threading.Lock()
        # One argument buffer, each slot aligned to its own size, as the C ABI lays them out.
        offsets, end = [], 0
        for p in self.params:
            end = -(-end // p.size) * p.size
            offsets.append(end)
            end += p.size
        self._storage = ffi.new("char[]", max(end, 1))
        base = ffi.cast("char*", self._storage)
        self._pointers = ffi.new(
            "void*[]", [ffi.cast("void*", base + o) for o in offsets] or [ffi.NULL]
        )
        self._writers = tuple(
            value_writer(p, ffi.cast(p.storage + "*", base + o))
            for p, o in zip(self.params, offsets, strict=True)
        )
        self._config = ffi.new("HIP_LAUNCH_CONFIG*")
        self._packed: tuple[Any, ...] | None = None
        # The geometry of the last launch; `_grid = None` means "configure again".
        self._grid: Dim3 | None = None
        self._block: Dim3 | None = None
        self._shared_mem = 0
        self._stream: Stream | None = None
        self._generation = -1
        self._max_threads: int | None = None  # this function's block-size limit, read once

    def launch(
        self,
        grid: Dim3,
        block: Dim3,
        *args: Any,
        shared_mem: int = 0,
        stream: Stream | None = None,
    ) -> None:
        """Queue one launch of `grid` blocks of `block` threads with `shared_mem` dynamic bytes."""
        lock = self._lock
        lock.acquire()
        try:
            # Fast path: nothing released since the last launch and the same arguments and
            # geometry (ints and cached tuples compare in nanoseconds): only the launch call.
            if (
                self._generation != _resource.generation
                or args != self._packed
                or grid != self._grid
                or block != self._block
                or shared_mem != self._shared_mem
                or stream is not self._stream
            ):
                self._prepare(grid, block, args, shared_mem, stream)
            status = self._launch_fast(self._config, self.handle, self._pointers, self._null)
            if status:
                status = self._launch(self._config, self.handle, self._pointers, self._null)
        finally:
            lock.release()
        if status:
            raise error_for(status, "hipDrvLaunchKernelEx", f"kernel {self.name}")

    def _prepare(
        self, grid: Dim3, block: Dim3, args: tuple[Any, ...], shared_mem: int, stream: Stream | None
    ) -> None:
        """Check and pack what changed since the last launch (everything, after a release)."""
        if self._generation != _resource.generation:  # something was released since
            self.module._check_open()
            self._packed = self._grid = None
            self._generation = _resource.generation
        if args != self._packed:
            self._pack(args)
        if (grid, block, shared_mem, stream) != (
            self._grid,
            self._block,
            self._shared_mem,
            self._stream,
        ):
            self._configure(grid, block, shared_mem, stream)

    def __call__(
        self, grid: Dim3, block: Dim3, *args: Any, shared_mem: int = 0, stream: Stream | None = None
    ) -> None:
        self.launch(grid, block, *args, shared_mem=shared_mem, stream=stream)

    def _pack(self, args: tuple[Any, ...]) -> None:
        self._packed = None  # a failure below must not leave a half-written "valid" packing
        if len(args) != len(self.params):
            signature = ", ".join(p.decl for p in self.params)
            raise TypeError(
                f"{self.name}({signature}) takes {len(self.params)} arguments, got {len(args)}"
            )
        for write, value in zip(self._writers, args, strict=True):
            write(value)
        self._packed = args

    def _configure(self, grid: Dim3, block: Dim3, shared_mem: int, stream: Stream | None) -> None:
        self._grid = None  # a failure below must not leave a half-set "valid" configuration
        gx, gy, gz = _dim3(grid, "grid")
        bx, by, bz = _dim3(block, "block")
        if self._max_threads is None:
            self._max_threads = self.attribute("MAX_THREADS_PER_BLOCK")
        if bx * by * bz > self._max_threads:
            raise ValueError(
                f"block {block!r} has {bx * by * bz} threads; {self.name} allows at most "
                f"{self._max_threads} per block"
            )
        if not isinstance(shared_mem, int) or shared_mem < 0:
            raise ValueError(f"shared_mem must be a byte count >= 0, not {shared_mem!r}")
        if stream is not None:
            stream._check_open()
        config = self._config
        config.gridDimX, config.gridDimY, config.gridDimZ = gx, gy, gz
        config.blockDimX, config.blockDimY, config.blockDimZ = bx, by, bz
        config.sharedMemBytes = shared_mem
        config.hStream = self._null if stream is None else stream.handle
        self._grid, self._block, self._shared_mem, self._stream = grid, block, shared_mem, stream

    def forget_arguments(self) -> None:
        """Drop the references to the last launch's arguments (the next launch packs anew)."""
        with self._lock:
            self._packed = None

    def attribute(self, name: str) -> int:
        """hipFuncGetAttribute, e.g. "NUM_REGS", "MAX_THREADS_PER_BLOCK", "SHARED_SIZE_BYTES"."""
        self.module._check_open()  # the function lives in the module's code
        api = hip()
        value = api.ffi.new("int*")
        check(
            api.hipFuncGetAttribute(value, FUNC_ATTRIBUTES[name], self.handle),
            "hipFuncGetAttribute",
        )
        return int(value[0])

    def max_active_blocks(self, block_size: int, shared_mem: int = 0) -> int:
        """Blocks of `block_size` threads that fit on one multiprocessor at once (occupancy)."""
        self.module._check_open()
        api = hip()
        value = api.ffi.new("int*")
        check(
            api.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(
                value, self.handle, block_size, shared_mem
            ),
            "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
        )
        return int(value[0])

    def __repr__(self) -> str:
        return f"<Kernel {self.name}({', '.join(p.decl for p in self.params)})>"
