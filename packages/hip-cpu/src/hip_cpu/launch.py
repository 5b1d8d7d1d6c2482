"""Kernel launches of the cpu platform: checks, argument packing, and the queued grid.

hipModuleLaunchKernel checks the configuration before anything is queued:
- a zero dimension: hipErrorInvalidValue;
- more than 1024 threads per block, a block dimension over (1024, 1024, 64), or a grid
  dimension over (2^31-1, 65535, 65535): hipErrorInvalidConfiguration;
- dynamic shared memory over 64 KiB: hipErrorInvalidValue;
- kernelParams and extra both given, or neither for a kernel with parameters, or an `extra`
  buffer smaller than the kernel's parameters: hipErrorInvalidValue.
The arguments are copied when the call is made (the caller may reuse its buffers at once),
packed by the kernel's own parameter layout, and the grid is queued on the stream. It runs on
the stream's worker thread, its blocks spread over every core (hip_cpu_executor.h). A failing
kernel (__trap, a device assert, a bad access: faults.py) reports its error at the next
synchronize of the stream, its message on stderr and, for the thread that synchronized, in
`HipApi.error_detail(code)`: "kernel NAME: illegal address 0x... (write, SIGSEGV) in block
[x,y,z], thread [x,y,z]".
"""

from __future__ import annotations

import sys
from typing import Any

from hip_cpu import device, faults, shared_objects, status, toolchain
from hip_cpu.modules import KERNELS, Function
from hip_cpu.streams import ENGINE
from hip_ffi._ffi import ffi
from hip_ffi._shims import launch_kernel_ex
from hip_ffi.constants import (
    ERROR_CODES,
    FUNC_ATTRIBUTES,
    LAUNCH_PARAM_BUFFER_POINTER,
    LAUNCH_PARAM_BUFFER_SIZE,
    LAUNCH_PARAM_END,
)
from hip_ffi.handles import address, is_null, items

MESSAGE_BYTES = 1024


_BLOCK_X, _BLOCK_Y, _BLOCK_Z = device.MAX_BLOCK_DIM
_GRID_X, _GRID_Y, _GRID_Z = device.MAX_GRID_DIM


def _configuration_error(gx: int, gy: int, gz: int, bx: int, by: int, bz: int) -> int:
    if not (gx and gy and gz and bx and by and bz):
        return status.INVALID_VALUE
    if bx * by * bz > device.MAX_THREADS_PER_BLOCK:
        return status.INVALID_CONFIGURATION
    if bx > _BLOCK_X or by > _BLOCK_Y or bz > _BLOCK_Z:
        return status.INVALID_CONFIGURATION
    if gx > _GRID_X or gy > _GRID_Y or gz > _GRID_Z:
        return status.INVALID_CONFIGURATION
    return status.SUCCESS


def _extra_buffer(extra: Any) -> tuple[int, int] | None:
    """(address, size) of the argument buffer in an `extra` array, None if malformed."""

    def entry(i: int) -> Any:  # read lazily: the array ends at its end tag
        if isinstance(extra, list | tuple):
            return extra[i] if i < len(extra) else None
        return extra[i]

    pointer = size = None
    for i in range(0, 16, 2):  # a few (tag, value) pairs, then the end tag
        tag = address(entry(i))
        if tag in (LAUNCH_PARAM_END, 0):
            break
        if tag == LAUNCH_PARAM_BUFFER_POINTER:
            pointer = address(entry(i + 1))
        elif tag == LAUNCH_PARAM_BUFFER_SIZE:
            size = int(ffi.cast("size_t*", entry(i + 1))[0])
        else:
            return None
    return (pointer, size) if pointer is not None and size is not None else None


def _pack(kernel: Function, params: Any, extra: Any) -> Any:
    """The packed arguments (a cdata buffer), or an error code."""
    given_params, given_extra = not is_null(params), not is_null(extra)
    if given_params and given_extra:
        return status.INVALID_VALUE
    buffer = ffi.new("char[]", max(kernel.arg_size, 1))
    if given_params:
        sources = items(params, len(kernel.offsets))
        for (offset, size), source in zip(kernel.offsets, sources, strict=True):
            if is_null(source):
                return status.INVALID_VALUE
            ffi.memmove(buffer + offset, source, size)
    elif given_extra:
        found = _extra_buffer(extra)
        if found is None or found[1] < kernel.arg_size or (kernel.arg_size and not found[0]):
            return status.INVALID_VALUE
        ffi.memmove(buffer, ffi.cast("char*", found[0]), kernel.arg_size)
    elif kernel.offsets:
        return status.INVALID_VALUE
    return buffer


def hipModuleLaunchKernel(
    function: Any,
    grid_x: int, grid_y: int, grid_z: int,
    block_x: int, block_y: int, block_z: int,
    shared_bytes: int, stream: Any, params: Any, extra: Any,
) -> int:  # fmt: skip
    """Queue the grid on `stream` (asynchronous); see the module docstring for the checks."""
    grid, block = (grid_x, grid_y, grid_z), (block_x, block_y, block_z)
    return _launch(function, grid, block, shared_bytes, stream, params, extra, 0)


def hipModuleLaunchCooperativeKernel(
    function: Any,
    grid_x: int, grid_y: int, grid_z: int,
    block_x: int, block_y: int, block_z: int,
    shared_bytes: int, stream: Any, params: Any,
) -> int:  # fmt: skip
    """Queue a cooperative grid: every block on an OS thread of its own, all at once, so that
    a grid sync can wait for the others. At most one block per core (what the occupancy
    calls report), else hipErrorCooperativeLaunchTooLarge; otherwise as hipModuleLaunchKernel."""
    grid, block = (grid_x, grid_y, grid_z), (block_x, block_y, block_z)
    if grid_x * grid_y * grid_z > device.host().cores and _configuration_error(*grid, *block) == 0:
        return ERROR_CODES["hipErrorCooperativeLaunchTooLarge"]
    flags = shared_objects.LAUNCH_COOPERATIVE
    return _launch(function, grid, block, shared_bytes, stream, params, ffi.NULL, flags)


def _launch(
    function: Any,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shared_bytes: int,
    stream: Any,
    params: Any,
    extra: Any,
    flags: int,
) -> int:
    kernel = KERNELS.get(function)
    resolved = ENGINE.resolve(stream)
    if kernel is None or resolved is None:
        return status.INVALID_HANDLE
    grid_x, grid_y, grid_z = grid
    block_x, block_y, block_z = block
    error = _configuration_error(grid_x, grid_y, grid_z, block_x, block_y, block_z)
    if error:
        return error
    if shared_bytes > shared_objects.MAX_DYNAMIC_SHARED:
        return status.INVALID_VALUE
    arguments = _pack(kernel, params, extra)
    if isinstance(arguments, int):
        return arguments
    try:
        runtime = shared_objects.runtime()
    except RuntimeError as failure:
        print(f"hip-ffi cpu: {failure}", file=sys.stderr)
        return status.NOT_INITIALIZED
    message = ffi.new("char[]", MESSAGE_BYTES)
    slots = ffi.new(
        "unsigned long long[]",
        [
            toolchain.ABI_VERSION, grid_x, grid_y, grid_z, block_x, block_y, block_z,
            shared_bytes, address(arguments),
            runtime.table, address(message), MESSAGE_BYTES,
            flags | (shared_objects.LAUNCH_CHECKED if faults.CHECKED else 0),
        ],
    )  # fmt: skip
    module = kernel.module

    def run(_arguments: Any = arguments) -> int:  # holds the packed arguments while queued
        if not module.enter():  # unloaded under a graph that still holds this launch
            return status.INVALID_HANDLE
        try:
            result = int(kernel.entry(slots))
        finally:
            module.exit()
        if result:
            text = ffi.string(message).decode(errors="replace")
            print(f"hip-ffi cpu: kernel {kernel.name} failed: {text}", file=sys.stderr)
            status.note_failure(f"kernel {kernel.name}: {text}")
        return result

    return ENGINE.submit(resolved, run)


hipDrvLaunchKernelEx = launch_kernel_ex(hipModuleLaunchKernel)


def hipFuncGetAttribute(value: Any, attribute: int, function: Any) -> int:
    """Limits of a kernel. Static shared memory, registers and local memory are not measured
    here and read 0."""
    if KERNELS.get(function) is None:
        return status.INVALID_HANDLE
    if value == ffi.NULL:
        return status.INVALID_VALUE
    table = {
        FUNC_ATTRIBUTES["MAX_THREADS_PER_BLOCK"]: device.MAX_THREADS_PER_BLOCK,
        FUNC_ATTRIBUTES["SHARED_SIZE_BYTES"]: 0,
        FUNC_ATTRIBUTES["CONST_SIZE_BYTES"]: 0,
        FUNC_ATTRIBUTES["LOCAL_SIZE_BYTES"]: 0,
        FUNC_ATTRIBUTES["NUM_REGS"]: 0,
        FUNC_ATTRIBUTES["PTX_VERSION"]: 0,
        FUNC_ATTRIBUTES["BINARY_VERSION"]: 0,
        FUNC_ATTRIBUTES["CACHE_MODE_CA"]: 0,
        FUNC_ATTRIBUTES["MAX_DYNAMIC_SHARED_SIZE_BYTES"]: shared_objects.MAX_DYNAMIC_SHARED,
        FUNC_ATTRIBUTES["PREFERRED_SHARED_MEMORY_CARVEOUT"]: -1,
    }
    if attribute not in table:
        return status.INVALID_VALUE
    value[0] = table[attribute]
    return status.SUCCESS


#: hipFuncSetAttribute's values by (function address, attribute): recorded, never needed here
#: (a launch may take up to 64 KiB of dynamic shared memory whatever was set).
FUNC_SETTINGS: dict[tuple[int, int], int] = {}


def hipFuncSetAttribute(function: Any, attribute: int, value: int) -> int:
    """Accepts the settable attributes (max dynamic shared memory up to the 64 KiB a launch
    may take; the carveout, a hint, -1 or 0..100) and records them."""
    if KERNELS.get(function) is None:
        return status.INVALID_DEVICE_FUNCTION
    if attribute == FUNC_ATTRIBUTES["MAX_DYNAMIC_SHARED_SIZE_BYTES"]:
        valid = 0 <= value <= shared_objects.MAX_DYNAMIC_SHARED
    elif attribute == FUNC_ATTRIBUTES["PREFERRED_SHARED_MEMORY_CARVEOUT"]:
        valid = -1 <= value <= 100
    else:
        valid = False
    if not valid:
        return status.INVALID_VALUE
    FUNC_SETTINGS[(address(function), attribute)] = value
    return status.SUCCESS


def hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(
    blocks: Any, function: Any, block_size: int, dynamic_shared: int
) -> int:
    """1 for any valid block: a multiprocessor (core) runs one block at a time."""
    if KERNELS.get(function) is None:
        return status.INVALID_HANDLE
    if blocks == ffi.NULL:
        return status.INVALID_VALUE
    fits = 0 < block_size <= device.MAX_THREADS_PER_BLOCK
    blocks[0] = 1 if fits and dynamic_shared <= shared_objects.MAX_DYNAMIC_SHARED else 0
    return status.SUCCESS


def hipModuleOccupancyMaxPotentialBlockSize(
    grid_size: Any, block_size: Any, function: Any, dynamic_shared: int, limit: int
) -> int:
    """The largest block allowed (more threads per block amortize a block's start) and one
    block per core."""
    if KERNELS.get(function) is None:
        return status.INVALID_HANDLE
    if grid_size == ffi.NULL or block_size == ffi.NULL:
        return status.INVALID_VALUE
    if dynamic_shared > shared_objects.MAX_DYNAMIC_SHARED:
        return status.INVALID_VALUE
    block_size[0] = min(limit, device.MAX_THREADS_PER_BLOCK) if limit > 0 else 1024
    grid_size[0] = device.host().cores
    return status.SUCCESS
