"""The nvidia platform's wrappers, driven by fake CUDA functions (no GPU, no CUDA library)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest

from hip_ffi import constants
from hip_ffi._ffi import ffi
from hip_ffi.platforms.nvidia import wrappers

E = constants.ERROR_CODES


class Recorder:
    """A fake native function: records its calls and answers from a queue of statuses."""

    def __init__(self, *statuses: int, effect: Callable[..., None] | None = None) -> None:
        self.statuses = list(statuses)
        self.calls: list[tuple[Any, ...]] = []
        self.effect = effect

    def __call__(self, *args: Any) -> int:
        self.calls.append(args)
        if self.effect is not None:
            self.effect(*args)
        return self.statuses.pop(0) if self.statuses else 0


def make_state(free_status: int = 0) -> tuple[wrappers.DriverState, Recorder, Recorder]:
    cuda_free, cu_init = Recorder(free_status), Recorder(0)
    return wrappers.DriverState(cuda_free, cu_init), cuda_free, cu_init


def test_runtime_wrapper_translates_only_failures() -> None:
    native = Recorder(0, 2, 912, 123456)
    call = wrappers.runtime(native, "hipMalloc")
    assert call.__name__ == "hipMalloc"
    assert call("a", 1) == 0
    assert call() == E["hipErrorOutOfMemory"]  # cudaErrorMemoryAllocation
    assert call() == E["hipErrorInvalidConfiguration"]  # cudaErrorInvalidClusterSize
    assert call() == E["hipErrorUnknown"]  # a code no table knows
    assert native.calls[0] == ("a", 1)


def test_driver_call_makes_the_primary_context_current_and_retries_once() -> None:
    state, cuda_free, _ = make_state()
    native = Recorder(201, 0)  # CUDA_ERROR_INVALID_CONTEXT, then success
    call = state.context_call(native, "hipModuleLoadData")
    assert call("module", b"image") == 0
    assert len(cuda_free.calls) == 1 and cuda_free.calls[0][0] == ffi.NULL
    assert native.calls == [("module", b"image")] * 2
    assert state.take_last() == 0


def test_driver_call_reports_when_recovery_fails() -> None:
    state, _, _ = make_state(free_status=100)  # no device
    native = Recorder(201)
    call = state.context_call(native, "hipMemsetD8")
    assert call(1, 2, 3) == E["hipErrorInvalidContext"]
    assert len(native.calls) == 1, "no retry when the context could not be made current"
    assert state.peek_last() == E["hipErrorInvalidContext"]
    assert state.take_last() == E["hipErrorInvalidContext"]
    assert state.take_last() == 0


def test_device_call_initializes_the_driver_without_a_context() -> None:
    state, cuda_free, cu_init = make_state()
    native = Recorder(3, 0)  # CUDA_ERROR_NOT_INITIALIZED, then success
    assert state.device_call(native, "hipDeviceGet")("out", 0) == 0
    assert cu_init.calls == [(0,)] and cuda_free.calls == []


def test_other_driver_errors_are_translated_without_a_retry() -> None:
    state, cuda_free, _ = make_state()
    native = Recorder(218)  # CUDA_ERROR_INVALID_PTX
    assert state.context_call(native, "hipModuleLoadData")() == E["hipErrorInvalidKernelFile"]
    assert cuda_free.calls == [] and len(native.calls) == 1


def _extra(*keys_and_values: Any) -> Any:
    return ffi.new(
        "void*[]", [ffi.cast("void*", v) if isinstance(v, int) else v for v in keys_and_values]
    )


def _keys(array: Any, count: int) -> list[int]:
    return [int(ffi.cast("uintptr_t", array[i])) for i in range(count)]


def test_extra_array_gets_cuda_keys_and_keeps_the_values() -> None:
    buffer, size = ffi.new("char[24]"), ffi.new("size_t*", 24)
    hip = _extra(1, buffer, 2, size, 3)
    cuda = wrappers.translate_extra(hip)
    assert _keys(cuda, 5)[0::2] == [1, 2, 0]
    assert cuda[1] == ffi.cast("void*", buffer) and cuda[3] == ffi.cast("void*", size)


def test_extra_array_with_an_unknown_key_or_no_terminator_is_rejected() -> None:
    assert wrappers.translate_extra(_extra(7, 0, 3)) is None
    assert wrappers.translate_extra(_extra(*([1, 0] * 40))) is None


def test_module_launch_translates_extra_only_when_given() -> None:
    state, _, _ = make_state()
    native = Recorder()
    launch = wrappers.module_launch_kernel(native, state)
    params = ffi.new("void*[1]")
    assert launch("f", 1, 2, 3, 4, 5, 6, 0, ffi.NULL, params, ffi.NULL) == 0
    assert native.calls[-1] == ("f", 1, 2, 3, 4, 5, 6, 0, ffi.NULL, params, ffi.NULL)
    buffer, size = ffi.new("char[8]"), ffi.new("size_t*", 8)
    assert launch("f", 1, 1, 1, 1, 1, 1, 0, ffi.NULL, ffi.NULL, _extra(1, buffer, 2, size, 3)) == 0
    assert _keys(native.calls[-1][-1], 5)[0::2] == [1, 2, 0]
    assert (
        launch("f", 1, 1, 1, 1, 1, 1, 0, ffi.NULL, ffi.NULL, _extra(9, 3))
        == E["hipErrorInvalidValue"]
    )
    assert len(native.calls) == 2, "a bad extra array never reaches CUDA"


def test_launch_ex_passes_the_callers_config_through() -> None:
    state, cuda_free, _ = make_state()
    native = Recorder(201, 0)
    launch = wrappers.launch_kernel_ex(native, state)
    config = ffi.new("HIP_LAUNCH_CONFIG*")
    assert launch(config, "f", ffi.NULL, ffi.NULL) == 0
    assert native.calls[0][0] is config and len(native.calls) == 2 and len(cuda_free.calls) == 1
    failing = wrappers.launch_kernel_ex(Recorder(701), state)
    assert failing(config, "f", ffi.NULL, ffi.NULL) == E["hipErrorLaunchOutOfResources"]


def test_error_names_are_hips_and_cached() -> None:
    name = wrappers.error_name()
    assert ffi.string(name(2)) == b"hipErrorOutOfMemory"
    assert ffi.string(name(0)) == b"hipSuccess"
    assert ffi.string(name(424242)) == b"hipErrorUnknown"
    assert name(1) is name(1), "one cached cdata per code"
    assert ffi.typeof(name(1)) is ffi.typeof("const char*")


def test_error_strings_are_cudas_where_the_meaning_is_shared() -> None:
    described: list[int] = []

    def cuda_string(code: int) -> Any:
        described.append(code)
        return ffi.NULL

    string = wrappers.error_string(cuda_string, wrappers.error_name())
    string(E["hipErrorInvalidTexture"])
    assert described == [18], "HIP's 912 is CUDA's 18"
    assert ffi.string(string(E["hipErrorRuntimeMemory"])) == b"hipErrorRuntimeMemory"


def test_last_error_prefers_the_runtimes_and_resets_both() -> None:
    state, _, _ = make_state()
    state.record(E["hipErrorInvalidContext"])
    get = wrappers.last_error(Recorder(0, 0), state, reset=True)
    assert get() == E["hipErrorInvalidContext"]
    assert get() == 0
    state.record(E["hipErrorInvalidContext"])
    peek = wrappers.last_error(Recorder(2, 0, 0), state, reset=False)
    assert peek() == E["hipErrorOutOfMemory"]
    assert peek() == E["hipErrorInvalidContext"] and peek() == E["hipErrorInvalidContext"]


def test_graph_instantiate_takes_hips_five_arguments() -> None:
    native = Recorder(0, 1)
    instantiate = wrappers.graph_instantiate(native)
    node = ffi.new("hipGraphNode_t*", ffi.cast("hipGraphNode_t", 8))
    log = ffi.new("char[64]", b"stale")
    assert instantiate("exec", "graph", node, log, 64) == 0
    assert native.calls[0] == ("exec", "graph", 0)
    assert node[0] == ffi.NULL and ffi.string(log) == b""
    assert instantiate("exec", "graph", ffi.NULL, log, 8) == E["hipErrorInvalidValue"]
    assert ffi.string(log) == b"hipErro"  # truncated to the buffer, NUL-terminated


def test_occupancy_inserts_the_null_callback() -> None:
    state, _, _ = make_state()
    native = Recorder()
    call = wrappers.occupancy_max_potential_block_size(native, state)
    assert call("grid", "block", "f", 128, 1024) == 0
    assert native.calls == [("grid", "block", "f", ffi.NULL, 128, 1024)]


def test_amd_only_flags_are_dropped() -> None:
    native = Recorder()
    wrappers.host_malloc(native)("ptr", 64, 0x40000000 | constants.HOST_MALLOC_MAPPED)
    assert native.calls[-1] == ("ptr", 64, constants.HOST_MALLOC_MAPPED)
    wrappers.event_create(native)("event", 0x80000000 | constants.EVENT_DISABLE_TIMING)
    assert native.calls[-1] == ("event", constants.EVENT_DISABLE_TIMING)


@pytest.mark.parametrize("packed", [struct.pack("<ifQQ", 3, 2.0, 16, 32)])
def test_extra_translation_leaves_the_argument_buffer_alone(packed: bytes) -> None:
    buffer = ffi.new("char[]", packed)
    size = ffi.new("size_t*", len(packed))
    cuda = wrappers.translate_extra(_extra(1, buffer, 2, size, 3))
    assert ffi.buffer(ffi.cast("char*", cuda[1]), len(packed))[:] == packed


def test_host_memcpy_native_copies_on_the_null_stream_then_waits_for_it() -> None:
    """hipMemcpy's native entry: host->device and device->host as the driver's async copy of
    that direction on the null stream and its synchronize (the first failure's CUDA status,
    no synchronize after a failed copy); device to device stays cudaMemcpy."""
    memcpy, to_device_async, to_host_async = Recorder(), Recorder(0), Recorder(1, 0, 0)
    synchronize = Recorder(0, 700)
    copy = wrappers.host_memcpy_native(memcpy, to_device_async, to_host_async, synchronize)
    to_device, to_host = constants.MEMCPY_HOST_TO_DEVICE, constants.MEMCPY_DEVICE_TO_HOST
    assert copy("d", "s", 4096, to_device) == 0
    assert to_device_async.calls == [("d", "s", 4096, ffi.NULL)]
    assert synchronize.calls == [(ffi.NULL,)]
    assert copy("h", "d", 8, to_host) == 1  # the async copy failed: nothing waited on
    assert len(synchronize.calls) == 1
    assert copy("h", "d", 8, to_host) == 700  # the synchronize's status
    assert to_host_async.calls == [("h", "d", 8, ffi.NULL)] * 2
    assert copy("d", "s", 8, constants.MEMCPY_DEVICE_TO_DEVICE) == 0
    assert memcpy.calls == [("d", "s", 8, constants.MEMCPY_DEVICE_TO_DEVICE)]
