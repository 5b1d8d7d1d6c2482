"""Kernels: typed, checked launches that reuse their argument packing.

Each Kernel owns one argument buffer laid out like the C parameter list, a `void*[]` pointing
into it, and one HIP_LAUNCH_CONFIG. A launch whose arguments and geometry are the previous
one's writes nothing: it only calls hipDrvLaunchKernelEx. "The previous one's" is strict, so
that this fast path accepts exactly what a first launch accepts: arguments compare equal and
each number has the same type (4.0 or True never pass for a cached 4), pointers are the same
buffer, None or an equal DevicePointer (other pointer-like objects are read again each time:
their address may change and their `==` may not mean "the same memory"), and the geometry is
the same tuple object or an equal plain int (a list may have been changed in place), or the
same LaunchConfig object (`hip_core.launch_config`: its fields are those tuples). Any
closed resource (a buffer, view, stream or module) invalidates the reuse, and a refused launch
leaves nothing to reuse. A kernel with a vector or struct parameter packs at every launch (a
tuple's `==` cannot tell 1 from 1.0); kernels of scalars and pointers keep the fast path.
The runtime copies the arguments at launch, so the buffer may be rewritten by the next launch
at once.

The price of that comparison: a kernel holds a reference to the arguments of its last launch
(not to their data's contents), so a buffer passed to it is freed only once the kernel is
launched with other arguments, `forget_arguments()` is called, or the kernel is dropped.
Comparing by identity alone would be cheaper but unsafe: a new view can reuse a dead one's id.
While a stream is being captured, launches take the checked path, and the graph keeps the
kernel's module and the arguments (see `hip_core.graph`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hip_core import _capture, _resource
from hip_core._checks import integer
from hip_core._hip import hip
from hip_core.errors import check, error_for
from hip_core.launch_config import MISSING, Dim3, LaunchConfig, resolve
from hip_core.memory import DeviceBuffer, PinnedBuffer
from hip_core.prepared import PreparedLaunch, argument_buffer
from hip_core.signature import DevicePointer, Param
from hip_core.stream import checked_handle
from hip_ffi.constants import FUNC_ATTRIBUTES, LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION

if TYPE_CHECKING:
    from hip_core.module import Module
    from hip_core.stream import Stream

_UNSET: Any = object()  # "not configured": no value a caller passes is this object
_NUMBERS = frozenset({"int", "float", "half", "bfloat16", "bool"})
_BY_VALUE = frozenset({"vector", "struct"})


#: Pointer arguments whose `==` means "the same memory" (identity, or DevicePointer's fields).
_REUSABLE_POINTERS = frozenset({type(None), DevicePointer, DeviceBuffer, PinnedBuffer})
#: Arguments whose object, kept alive, always packs to the same bytes (`_pack` writes such an
#: argument again only when it is another object; a closed buffer drops every packing).
_IMMUTABLE = frozenset({int, float, bool, *_REUSABLE_POINTERS})


class Kernel:
    """A `__global__` function of a loaded Module, with its parameter types.

    `launch(grid, block, *args, shared_mem=0, stream=None)`, or `launch(config, *args)` with
    a `LaunchConfig` of the same four, queues it on the stream (the null stream when None) and
    returns at once. `prepare` and `launch_cooperative` take the same two forms. Arguments are
    checked against the parameter types first: a wrong count or type raises TypeError naming
    the parameter, and nothing is launched.
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
        self._storage, self._pointers, self._writers, _ = argument_buffer(ffi, self.params)
        self._numbers = tuple(i for i, p in enumerate(self.params) if p.kind in _NUMBERS)
        self._pointers_at = tuple(i for i, p in enumerate(self.params) if p.kind == "pointer")
        # Vectors and structs are packed at every launch: a tuple's `==` cannot tell 1 from 1.0
        # (which an integer component refuses) and a numpy array's gives no bool.
        self._repacked = any(p.kind in _BY_VALUE for p in self.params)
        self._typed = self._numbers + self._pointers_at  # compared by type before by value
        self._config = ffi.new("HIP_LAUNCH_CONFIG*")
        # The last packing: its arguments, and (index, type) of each number among them.
        self._packed: tuple[Any, ...] | None = None
        self._types: tuple[tuple[int, type], ...] = ()
        # The geometry of the last launch; `_grid = _UNSET` means "configure again".
        self._grid: Any = _UNSET
        self._block: Any = _UNSET
        self._shared_mem: Any = _UNSET
        self._stream: Stream | None = None
        self._generation = -1
        self._max_threads: int | None = None  # this function's block-size limit, read once
        self._attributes: Any = None  # HIP_LAUNCH_ATTRIBUTE[] of every launch (start_early)

    def launch(
        self,
        grid: Dim3 | LaunchConfig,
        block: Dim3 | Any = MISSING,
        *args: Any,
        shared_mem: int = MISSING,
        stream: Stream | None = MISSING,
    ) -> None:
        """Queue one launch of `grid` blocks of `block` threads with `shared_mem` dynamic bytes
        per block on `stream` (None or not given: the null stream; default `shared_mem` 0);
        returns once queued. Or `launch(config, *args)`: those four from a `LaunchConfig`
        (whose fields' units and checks are these; then no `shared_mem=` or `stream=`).

        `grid` and `block`: an integer or 1-3 integers (any integral type, not bool).
        """
        if type(grid) is LaunchConfig:  # (`resolve`'s reading, inline: the hot path)
            if shared_mem is not MISSING or stream is not MISSING:
                resolve(grid, block, args, shared_mem, stream)  # raises its TypeError
            if block is not MISSING:
                args = (block, *args)
            grid, block, shared_mem, stream = grid.parts
        lock = self._lock
        lock.acquire()
        try:
            # Fast path: nothing closed since the last launch and the same arguments and
            # geometry, compared strictly (see the module doc): only the launch call.
            if self._generation != _resource.generation:
                self._revalidate(grid, block, args, shared_mem, stream)
            # Types first: a value of another type (a tensor where an int was) is a new
            # argument, and its `==` must not run (a DeviceTensor's `==` queues a kernel).
            packed = self._packed
            repack = packed is None or len(args) != len(packed)
            if not repack:
                for index, kind in self._types:
                    if type(args[index]) is not kind:
                        repack = True
                        break
                else:
                    try:
                        repack = args != packed
                    except Exception:  # an argument's `==` failed: check it as a new one
                        repack = True
            if repack:
                self._pack(args)
            cached = self._grid
            if (
                (grid is not cached and (type(grid) is not int or grid != cached))
                or (block is not self._block and (type(block) is not int or block != self._block))
                or (
                    shared_mem is not self._shared_mem
                    and (type(shared_mem) is not int or shared_mem != self._shared_mem)
                )
                or stream is not self._stream
            ):
                self._configure(grid, block, shared_mem, stream)
            status = self._launch_fast(self._config, self.handle, self._pointers, self._null)
            if status:
                status = self._launch(self._config, self.handle, self._pointers, self._null)
        finally:
            lock.release()
        if status:
            raise error_for(status, "hipDrvLaunchKernelEx", f"kernel {self.name}")

    def _revalidate(
        self, grid: Any, block: Any, args: tuple[Any, ...], shared_mem: Any, stream: Any
    ) -> None:
        """After a release (or while a capture runs): forget the packing and configuration,
        and during a capture check this launch now and make the graph keep what it uses."""
        self.module._check_open()
        self._packed, self._grid = None, _UNSET
        capturing = bool(_capture.captures)
        # While a capture runs, every launch (refused ones too) comes back here.
        self._generation = -1 if capturing else _resource.generation
        if capturing:
            self._pack(args)
            config = self._configure(grid, block, shared_mem, stream)
            _capture.keep_captured(config.stream, (self.module, args))

    def __call__(
        self,
        grid: Dim3 | LaunchConfig,
        block: Dim3 | Any = MISSING,
        *args: Any,
        shared_mem: int = MISSING,
        stream: Stream | None = MISSING,
    ) -> None:
        self.launch(grid, block, *args, shared_mem=shared_mem, stream=stream)

    def _pack(self, args: tuple[Any, ...]) -> None:
        written = self._packed  # the last packing, when it was of reusable arguments
        self._packed = None  # a failure below must not leave a half-written "valid" packing
        if len(args) != len(self.params):
            signature = ", ".join(p.decl for p in self.params)
            raise TypeError(
                f"{self.name}({signature}) takes {len(self.params)} arguments, got {len(args)}"
            )
        if written is None or self._repacked:
            for write, value in zip(self._writers, args, strict=True):
                write(value)
        else:
            # Where one argument changed (a layer's weights, between launches of one plan),
            # the others need not be written again: the same object of an immutable kind
            # (held by the last packing since it was checked and written, so not a new one
            # at a dead one's id) is the same value in the buffer.
            k = 0
            for write, value in zip(self._writers, args, strict=True):
                if value is not written[k] or type(value) not in _IMMUTABLE:
                    write(value)
                k += 1  # noqa: SIM113 (enumerate is a call too)
        if self._repacked:
            return  # packed again at the next launch (see __init__)
        for index in self._pointers_at:
            if type(args[index]) not in _REUSABLE_POINTERS:
                return  # not reusable: read again at the next launch (see the module doc)
        self._types = tuple([(i, type(args[i])) for i in self._typed])
        self._packed = args

    def _configure(self, grid: Any, block: Any, shared_mem: Any, stream: Any) -> LaunchConfig:
        """Check the geometry and stream as `launch` was given them (`block`, `shared_mem` and
        `stream` MISSING when not given) and write them into the launch configuration."""
        self._grid = _UNSET  # a failure below must not leave a half-set "valid" configuration
        config, _ = resolve(grid, block, (), shared_mem, stream)
        self._fill_config(self._config, config)
        # Cached as given only when immutable (ints, tuples; MISSING, the default): a list may
        # change in place.
        self._block = block if type(block) in (int, tuple) else _UNSET
        self._shared_mem = (
            shared_mem if type(shared_mem) is int or shared_mem is MISSING else _UNSET
        )
        self._stream = stream
        self._grid = grid if type(grid) in (int, tuple) else _UNSET
        return config

    def _fill_config(self, struct: Any, config: LaunchConfig) -> None:
        """Check `config` against this kernel (its threads per block) and its stream (open),
        and write it into `struct` (a HIP_LAUNCH_CONFIG)."""
        if self._max_threads is None:
            self._max_threads = self.attribute("MAX_THREADS_PER_BLOCK")
        threads = config.threads_per_block
        if threads > self._max_threads:
            raise ValueError(
                f"block {config.block!r} has {threads} threads; {self.name} allows at most "
                f"{self._max_threads} per block"
            )
        handle = checked_handle(config.stream)
        struct.gridDimX, struct.gridDimY, struct.gridDimZ = config.grid
        struct.blockDimX, struct.blockDimY, struct.blockDimZ = config.block
        struct.sharedMemBytes = config.shared_mem
        struct.hStream = handle
        attributes = self._attributes  # (set once, never replaced: lives as long as self)
        if attributes is None:
            struct.attrs, struct.numAttrs = self._null, 0
        else:
            struct.attrs, struct.numAttrs = attributes, len(attributes)

    def start_early(self) -> bool:
        """Let this kernel's later launches start before the kernel ahead of them on their
        stream has finished, where the device can (`DeviceProperties.early_start`: CUDA's
        programmatic dependent launch); returns whether they will. Elsewhere launches stay
        fully ordered and this returns False.

        Only for a kernel whose every block first waits for the kernel ahead (the kernels'
        `hipk::wait_for_previous_grid()`, griddepcontrol.wait) and until then touches no memory
        but L2 prefetches (always safe: L2 is where writes meet); after the wait it sees all
        earlier work on the stream, as an ordinary launch does. It saves the launch and the
        first loads' latency of a chain of short kernels (a decode step's products: H200,
        issue 38). Applies to launches and `prepare` calls after it; launches on other streams
        and graph capture are unaffected (a captured launch keeps the attribute)."""
        self.module._check_open()
        if not self.module.device.properties.early_start:
            return False
        with self._lock:  # (kernels are shared: two threads may ask at once)
            if self._attributes is None:
                # Set once and kept with the kernel: launch configurations (this kernel's, its
                # prepared launches', which hold the kernel) point into it.
                attributes = hip().ffi.new("HIP_LAUNCH_ATTRIBUTE[1]")
                attributes[0].id = LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
                attributes[0].value[0] = 1  # programmaticStreamSerializationAllowed
                self._attributes = attributes
                self._grid = _UNSET  # the next launch writes its configuration again
        return True

    def prepare(
        self,
        grid: Dim3 | LaunchConfig,
        block: Dim3 | Any = MISSING,
        *args: Any,
        shared_mem: int = MISSING,
        stream: Stream | None = MISSING,
    ) -> PreparedLaunch:
        """A launch of fixed geometry, stream and non-pointer arguments, checked now (as
        `launch` checks them, in either of its forms) and packed once, whose pointer arguments
        are given at each call as plain addresses: see `PreparedLaunch`. Nothing is launched
        here."""
        self.module._check_open()
        config, args = resolve(grid, block, args, shared_mem, stream)
        return PreparedLaunch(self, config, args)

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

    def set_max_dynamic_shared_memory(self, nbytes: int) -> None:
        """Let launches of this kernel take up to `nbytes` bytes of dynamic shared memory
        (hipFuncSetAttribute(hipFuncAttributeMaxDynamicSharedMemorySize)).

        NVIDIA GPUs give a launch 48 KiB (less the kernel's static shared memory) until this
        raises the ceiling, up to the device's opt-in limit (SharedMemPerBlockOptin; where the
        runtime has none, as ROCm 5's "CUDA only" attribute, the per-block limit) less the
        static part. Where launches may already take `nbytes` (AMD's and the cpu platform's
        64 KiB, or an earlier call) nothing is called. Raises ValueError above the limit,
        before anything is set. Not stream-ordered: it applies to every later launch.
        """
        from hip_core.errors import HipError

        self.module._check_open()
        size = integer(nbytes, "nbytes")
        device = self.module.device
        static = self.attribute("SHARED_SIZE_BYTES")
        try:
            limit = device.attribute("SharedMemPerBlockOptin") - static
        except HipError:
            limit = device.properties.shared_memory_per_block - static
        if not 0 <= size <= limit:
            raise ValueError(
                f"{self.name}: {nbytes!r} bytes of dynamic shared memory; this device allows "
                f"0 to {limit} (its opt-in limit less {static} bytes of static shared memory)"
            )
        if size <= self.attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES"):
            return
        api = hip()
        attribute = FUNC_ATTRIBUTES["MAX_DYNAMIC_SHARED_SIZE_BYTES"]
        with device:
            check(api.hipFuncSetAttribute(self.handle, attribute, size), "hipFuncSetAttribute")

    def __repr__(self) -> str:
        return f"<Kernel {self.name}({', '.join(p.decl for p in self.params)})>"

    def launch_cooperative(
        self,
        grid: Dim3 | LaunchConfig,
        block: Dim3 | Any = MISSING,
        *args: Any,
        shared_mem: int = MISSING,
        stream: Stream | None = MISSING,
    ) -> None:
        """Queue one cooperative launch (hipModuleLaunchCooperativeKernel) on `stream` (the
        null stream when None), given as `launch` is (a LaunchConfig or grid, block and the
        keywords): every block is resident at once, so the kernel may wait for
        the whole grid (cooperative groups' this_grid().sync()). The grid may have at most
        `max_active_blocks(block threads, shared_mem)` x the device's multiprocessors blocks
        (one per core on the cpu platform); a larger one raises HipError
        (hipErrorCooperativeLaunchTooLarge). Arguments are checked as `launch` checks them
        (TypeError before anything is queued); each call packs them anew."""
        self.module._check_open()
        config, args = resolve(grid, block, args, shared_mem, stream)
        if len(args) != len(self.params):
            signature = ", ".join(p.decl for p in self.params)
            raise TypeError(
                f"{self.name}({signature}) takes {len(self.params)} arguments, got {len(args)}"
            )
        api = hip()
        storage, pointers, writers, _ = argument_buffer(api.ffi, self.params)
        for write, value in zip(writers, args, strict=True):
            write(value)
        handle = checked_handle(config.stream)
        status = api.hipModuleLaunchCooperativeKernel(
            self.handle, *config.grid, *config.block, config.shared_mem, handle, pointers
        )
        del storage  # the runtime copied the arguments during the call
        if status:
            raise error_for(status, "hipModuleLaunchCooperativeKernel", f"kernel {self.name}")
