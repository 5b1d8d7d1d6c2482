"""Closures that give CUDA entry points HIP's signatures, enum values and status codes.

Every wrapper costs one Python call on top of the cffi call and does work only when the status
is not zero: success returns 0 at once. Failure translates the CUDA code through the tables in
`error_codes`. Driver-API calls also recover, once, from a thread with no current context
(see `DriverState`) and remember their error for hipGetLastError.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from hip_ffi import constants
from hip_ffi._ffi import ffi
from hip_ffi.platforms.nvidia.error_codes import (
    CUDART_TO_HIP,
    CURESULT_TO_HIP,
    HIP_TO_CUDART,
    HIP_UNKNOWN,
)
from hip_ffi.platforms.nvidia.tables import EVENT_AMD_ONLY, HOST_MALLOC_AMD_ONLY, LAUNCH_PARAM

Native = Callable[..., int]
INVALID_VALUE = constants.ERROR_CODES["hipErrorInvalidValue"]
#: CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_INVALID_CONTEXT: what a driver call answers on a
#: thread where nothing made a context current yet.
_NO_CONTEXT = frozenset({3, 201})
#: An `extra` array longer than this is taken as unterminated rather than read on.
_MAX_EXTRA = 64


class DriverState:
    """Context recovery and the last error of the driver-API calls, per thread.

    The driver API (cuModuleLoadData, cuLaunchKernel, cuMemsetD8...) needs a current context,
    which the runtime API only makes current when a runtime call first needs one on that
    thread. Rather than check before every call, a driver call that fails for want of a
    context makes the current device's primary context current (cudaFree(NULL): the runtime
    initializes the driver and binds the primary context to this thread, as HIP does) and
    retries once. Hot paths therefore pay nothing.
    """

    def __init__(self, cuda_free: Native, cu_init: Native) -> None:
        self._cuda_free = cuda_free
        self._cu_init = cu_init
        self._local = threading.local()

    def make_context_current(self) -> bool:
        return self._cuda_free(ffi.NULL) == 0

    def initialize_driver(self) -> bool:
        return self._cu_init(0) == 0

    def record(self, code: int) -> int:
        """Remember `code` as this thread's last error and return it."""
        self._local.last = code
        return code

    def take_last(self) -> int:
        code: int = getattr(self._local, "last", 0)
        self._local.last = 0
        return code

    def peek_last(self) -> int:
        code: int = getattr(self._local, "last", 0)
        return code

    def context_call(self, native: Native, name: str) -> Native:
        """`native` (a driver call that needs a context) as a HIP function called `name`."""
        return driver(native, self, name, needs_context=True)

    def device_call(self, native: Native, name: str) -> Native:
        """`native` (a driver call that needs only cuInit) as a HIP function called `name`."""
        return driver(native, self, name, needs_context=False)


def translated(native: Native, name: str, table: Mapping[int, int], unknown: int) -> Native:
    """`native` as the HIP function `name`: success returns 0 at once (no translation cost), a
    failure status becomes its row of `table` (a CUDA code -> HIP code table), else `unknown`."""
    lookup = table.get

    def call(*args: Any) -> int:
        status = native(*args)
        return lookup(status, unknown) if status else 0

    return _named(call, name)


def runtime(native: Native, name: str) -> Native:
    """A runtime-API call whose cudaError_t is returned as hipError_t."""
    return translated(native, name, CUDART_TO_HIP, HIP_UNKNOWN)


def driver_failure(native: Native, state: DriverState, *, needs_context: bool = True) -> Native:
    """The slow path of a driver call: `fail(status, *args)` -> hipError_t.

    Retries once after recovery when the status says no context / no driver init; records
    and returns the translated code otherwise.
    """
    recover = state.make_context_current if needs_context else state.initialize_driver
    table = CURESULT_TO_HIP.get
    record = state.record

    def fail(status: int, *args: Any) -> int:
        if status in _NO_CONTEXT and recover():
            status = native(*args)
            if not status:
                return 0
        return record(table(status, HIP_UNKNOWN))

    return fail


def driver(native: Native, state: DriverState, name: str, *, needs_context: bool = True) -> Native:
    """A driver-API call whose CUresult is returned as hipError_t (see DriverState)."""
    fail = driver_failure(native, state, needs_context=needs_context)

    def call(*args: Any) -> int:
        status = native(*args)
        return fail(status, *args) if status else 0

    return _named(call, name)


def translate_extra(extra: Any) -> Any:
    """HIP's `extra` launch array with CUDA's keys (HIP_LAUNCH_PARAM_END is 3, CUDA's is 0).

    Returns a new `void*[]` array, or None when the array holds an unknown key or no
    terminator within 64 entries. A NULL key also ends the array, as in CUDA.
    """
    keys = LAUNCH_PARAM
    end = constants.LAUNCH_PARAM_END
    out: list[Any] = []
    index = 0
    while index < _MAX_EXTRA:
        key = int(ffi.cast("uintptr_t", extra[index]))
        if key in (end, 0):
            out.append(ffi.NULL)
            return ffi.new("void*[]", out)
        if key not in keys:
            return None
        out += [ffi.cast("void*", keys[key]), extra[index + 1]]
        index += 2
    return None


def module_launch_kernel(native: Native, state: DriverState) -> Native:
    """hipModuleLaunchKernel over cuLaunchKernel (same arguments; `extra` keys translated)."""
    fail = driver_failure(native, state)
    record = state.record

    def hipModuleLaunchKernel(
        f: Any,
        gx: int, gy: int, gz: int,
        bx: int, by: int, bz: int,
        shared: int, stream: Any, params: Any, extra: Any,
    ) -> int:  # fmt: skip
        if extra:
            extra = translate_extra(extra)
            if extra is None:
                return record(INVALID_VALUE)
        status = native(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
        if status:
            return fail(status, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
        return 0

    return hipModuleLaunchKernel


def launch_kernel_ex(native: Native, state: DriverState) -> Native:
    """hipDrvLaunchKernelEx over cuLaunchKernelEx.

    HIP_LAUNCH_CONFIG has CUlaunchConfig's layout, so the caller's (reusable) config goes
    through untouched; launch attributes pass through with CUDA's numbering, which HIP's shares
    (AccessPolicyWindow 1, Cooperative 2, Priority 8).
    """
    fail = driver_failure(native, state)
    record = state.record

    def hipDrvLaunchKernelEx(config: Any, f: Any, params: Any, extra: Any) -> int:
        if extra:
            extra = translate_extra(extra)
            if extra is None:
                return record(INVALID_VALUE)
        status = native(config, f, params, extra)
        return fail(status, config, f, params, extra) if status else 0

    return hipDrvLaunchKernelEx


def error_name() -> Native:
    """hipGetErrorName: HIP's name of a hipError_t, as a cached `const char*`."""
    names_by_code = constants.ERROR_NAMES.items()
    arrays = {code: ffi.new("char[]", text.encode()) for code, text in names_by_code}
    names = {code: ffi.cast("const char*", array) for code, array in arrays.items()}
    unknown = names[HIP_UNKNOWN]

    def hipGetErrorName(code: int) -> Any:
        return names.get(code, unknown)

    hipGetErrorName.keep_alive = arrays  # type: ignore[attr-defined]  # the casts point into these
    return hipGetErrorName


def error_string(cuda_get_error_string: Callable[[int], Any], get_name: Native) -> Native:
    """hipGetErrorString: CUDA's description where a cudaError_t means the same, else the name."""

    def hipGetErrorString(code: int) -> Any:
        twin = HIP_TO_CUDART.get(code)
        return get_name(code) if twin is None else cuda_get_error_string(twin)

    return hipGetErrorString


def last_error(cuda_last_error: Native, state: DriverState, *, reset: bool) -> Native:
    """hipGetLastError (reset) / hipPeekAtLastError: the runtime's last error, else the driver
    calls' (HIP returns the last error of any call, launches included)."""
    table = CUDART_TO_HIP.get
    mine = state.take_last if reset else state.peek_last

    def call() -> int:
        status = cuda_last_error()
        driver_code = mine()
        return table(status, HIP_UNKNOWN) if status else driver_code

    return _named(call, "hipGetLastError" if reset else "hipPeekAtLastError")


def graph_instantiate(native: Native) -> Native:
    """HIP's five-argument hipGraphInstantiate over CUDA 12's (exec, graph, flags=0).

    CUDA 12 has no error node or log: `*pErrorNode` is set to NULL and the log buffer gets an
    empty string, or the error's name when instantiation fails.
    """
    table = CUDART_TO_HIP.get

    def hipGraphInstantiate(
        exec_out: Any, graph: Any, error_node: Any, log: Any, log_size: int
    ) -> int:
        status = native(exec_out, graph, 0)
        code = table(status, HIP_UNKNOWN) if status else 0
        if error_node:
            error_node[0] = ffi.NULL
        if log and log_size > 0:
            text = constants.ERROR_NAMES.get(code, "").encode()[: log_size - 1] if code else b""
            ffi.memmove(log, text + b"\0", len(text) + 1)
        return code

    return hipGraphInstantiate


def occupancy_max_potential_block_size(native: Native, state: DriverState) -> Native:
    """hipModuleOccupancyMaxPotentialBlockSize over cuOccupancyMaxPotentialBlockSize (which
    takes an extra callback for per-block-size shared memory: always NULL here)."""

    def reordered(grid: Any, block: Any, f: Any, dynamic_shared: int, limit: int) -> int:
        return native(grid, block, f, ffi.NULL, dynamic_shared, limit)

    return driver(reordered, state, "hipModuleOccupancyMaxPotentialBlockSize")


def host_malloc(native: Native) -> Native:
    """hipHostMalloc over cudaHostAlloc: page-locked host memory; AMD-only flags dropped."""
    keep = ~HOST_MALLOC_AMD_ONLY

    def hipHostMalloc(ptr: Any, size: int, flags: int) -> int:
        return native(ptr, size, flags & keep)

    return runtime(hipHostMalloc, "hipHostMalloc")


def event_create(native: Native) -> Native:
    """hipEventCreateWithFlags over cudaEventCreateWithFlags; AMD-only flags dropped."""
    keep = ~EVENT_AMD_ONLY

    def hipEventCreateWithFlags(event: Any, flags: int) -> int:
        return native(event, flags & keep)

    return runtime(hipEventCreateWithFlags, "hipEventCreateWithFlags")


def host_memcpy_native(
    memcpy: Native, to_device_async: Native, to_host_async: Native, synchronize: Native
) -> Native:
    """hipMemcpy's native entry (`HipApi.fast`, CUDA statuses): a host->device (device->host)
    copy as the driver's cuMemcpyHtoDAsync_v2 (cuMemcpyDtoHAsync_v2) on the legacy null
    stream and cuStreamSynchronize of it, which order and block as cudaMemcpy does: an async
    copy and a synchronize cost 0.5-0.7 µs less than cudaMemcpy at 4 KiB pinned on an H100
    (bench_core.py's raw C rows), and the driver's calls less than the runtime's. Device to
    device (whose cudaMemcpy does not wait) stays cudaMemcpy. A failure of either call leaves
    nothing that a repeat would undo."""
    null = ffi.NULL
    to_device, to_host = constants.MEMCPY_HOST_TO_DEVICE, constants.MEMCPY_DEVICE_TO_HOST

    def host_memcpy(dst: Any, src: Any, size: int, kind: int) -> int:
        if kind == to_device:
            return to_device_async(dst, src, size, null) or synchronize(null)
        if kind == to_host:
            return to_host_async(dst, src, size, null) or synchronize(null)
        return memcpy(dst, src, size, kind)

    return host_memcpy


def _named(function: Native, name: str) -> Native:
    function.__name__ = function.__qualname__ = name
    return function
