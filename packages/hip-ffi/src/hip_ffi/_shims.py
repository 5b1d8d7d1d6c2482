"""Surface functions written in terms of other surface functions, for platforms that lack them.

Each takes the platform's already-bound functions and returns a callable with the HIP C
signature; none of them is on a hot path unless its platform lacks the native call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from hip_ffi._ffi import ffi


def launch_kernel_ex(module_launch_kernel: Callable[..., int]) -> Callable[..., int]:
    """hipDrvLaunchKernelEx over hipModuleLaunchKernel (launch attributes are not supported)."""

    def hipDrvLaunchKernelEx(config: Any, function: Any, params: Any, extra: Any) -> int:
        if config.numAttrs:
            return 1  # hipErrorInvalidValue: attributes need the native entry point
        return module_launch_kernel(
            function,
            config.gridDimX, config.gridDimY, config.gridDimZ,
            config.blockDimX, config.blockDimY, config.blockDimZ,
            config.sharedMemBytes, config.hStream, params, extra,
        )  # fmt: skip

    return hipDrvLaunchKernelEx


def memcpy_with_stream(
    memcpy_async: Callable[..., int], stream_synchronize: Callable[[Any], int]
) -> Callable[..., int]:
    """hipMemcpyWithStream: an async copy on `stream`, then wait for that stream only."""

    def hipMemcpyWithStream(dst: Any, src: Any, size: int, kind: int, stream: Any) -> int:
        return memcpy_async(dst, src, size, kind, stream) or stream_synchronize(stream)

    return hipMemcpyWithStream


def launch_host_func(stream_add_callback: Callable[..., int]) -> Callable[..., int]:
    """hipLaunchHostFunc over hipStreamAddCallback (ROCm < 5.3 has only the latter).

    The callback's C signature differs (it also gets the stream and a status), so one C
    trampoline unpacks a handle holding the caller's (function, userData) and calls it. The
    handle stays referenced here until the callback has run.
    """
    pending: dict[int, Any] = {}
    lock = threading.Lock()

    @ffi.callback("void(hipStream_t, hipError_t, void*)")
    def trampoline(_stream: Any, _status: int, handle: Any) -> None:
        function, user_data = ffi.from_handle(handle)
        with lock:
            pending.pop(int(ffi.cast("uintptr_t", handle)), None)
        function(user_data)

    def hipLaunchHostFunc(stream: Any, function: Any, user_data: Any) -> int:
        handle = ffi.new_handle((function, user_data))
        with lock:
            pending[int(ffi.cast("uintptr_t", handle))] = handle
        status = stream_add_callback(stream, trampoline, handle, 0)
        if status != 0:
            with lock:
                pending.pop(int(ffi.cast("uintptr_t", handle)), None)
        return status

    hipLaunchHostFunc.trampoline = trampoline  # type: ignore[attr-defined]  # keep it alive
    return hipLaunchHostFunc
