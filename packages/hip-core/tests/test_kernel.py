"""Typed kernel launches: every C parameter type, checked arguments, reuse of packing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hip_core import ClosedError, Device, DevicePointer, Module, Program
from hip_core.signature import kernels_in_source, parse_param

SOURCE = r"""
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

extern "C" __global__ void scalars(
    long long* out, signed char a, unsigned char b, short c, unsigned short d, int e,
    unsigned int f, long long g, unsigned long long h, bool flag) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e;
        out[5] = (long long)f; out[6] = g; out[7] = (long long)(h >> 1); out[8] = flag ? 1 : 0;
    }
}

extern "C" __global__ void floats(double* out, float x, double y, __half z) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = x; out[1] = y; out[2] = (double)__half2float(z);
    }
}

extern "C" __global__ void axpy(float a, const float* __restrict__ x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = a * x[i] + y[i];
    }
}
"""


@pytest.fixture
def module(device: Device, cache_dir: Path) -> Module:
    return Program(SOURCE, name="kernels.hip").load(device)


def test_signatures_are_parsed_from_the_source() -> None:
    kernels = kernels_in_source(SOURCE)
    assert [p.kind for p in kernels["axpy"]] == ["float", "pointer", "pointer", "int"]
    assert [p.storage for p in kernels["scalars"]][1:] == [
        "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t",
        "int64_t", "uint64_t", "_Bool",
    ]  # fmt: skip
    assert parse_param(0, "const float* __restrict__ x").kind == "pointer"
    with pytest.raises(TypeError, match="unsupported kernel parameter type"):
        parse_param(3, "struct Foo foo")


def _download(buffer: object, dtype: type, count: int) -> np.ndarray:
    out = np.empty(count, dtype=dtype)
    buffer.copy_to(out)  # type: ignore[attr-defined]
    return out


def test_every_integer_width_and_bool_is_packed_exactly(device: Device, module: Module) -> None:
    out = device.allocate(9 * 8)
    args = (-128, 255, -32768, 65535, -(2**31), 2**32 - 1, -(2**63), 2**64 - 2, True)
    module.get_kernel("scalars").launch(1, 1, out, *args)
    device.synchronize()
    expected = [*args[:7], (2**64 - 2) >> 1, 1]
    assert _download(out, np.int64, 9).tolist() == expected


def test_float_double_and_half(device: Device, module: Module) -> None:
    out = device.allocate(3 * 8)
    module.get_kernel("floats").launch(1, 1, out, 1.5, 2.0**-40, 0.333)
    device.synchronize()
    got = _download(out, np.float64, 3)
    assert got[0] == 1.5 and got[1] == 2.0**-40
    assert got[2] == float(np.float16(0.333))


def test_axpy_matches_numpy_with_reused_packing(device: Device, module: Module) -> None:
    rng = np.random.default_rng()
    n = 100_003
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy = device.allocate(x.nbytes), device.allocate(y.nbytes)
    dx.copy_from(x)
    dy.copy_from(y)
    stream = device.create_stream()
    kernel = module.get_kernel("axpy")
    for _ in range(3):  # same arguments: the packed buffer is reused
        kernel.launch(64, 256, 2.0, dx, dy, n, stream=stream)
    stream.sync()
    expected = y + 3 * (2.0 * x)
    np.testing.assert_allclose(_download(dy, np.float32, n), expected, rtol=1e-5, atol=1e-5)
    kernel.launch(64, 256, -1.0, dx.view(0, 8), dy, 2, stream=stream)  # changed args repack
    stream.sync()
    np.testing.assert_allclose(
        _download(dy, np.float32, 2), expected[:2] - x[:2], rtol=1e-5, atol=1e-5
    )


def test_a_changed_pointer_repacks_only_what_changed(device: Device, module: Module) -> None:
    """Launches alternating between two outputs with the same other arguments (a layer's
    weights changing between launches of one op): each lands in its own output, and a changed
    scalar after them is packed too."""
    n = 1000
    x = np.arange(n, dtype=np.float32)
    dx = device.allocate(x.nbytes)
    dx.copy_from(x)
    outputs = [device.allocate(x.nbytes) for _ in range(2)]
    for out in outputs:
        out.copy_from(np.zeros(n, np.float32))
    stream = device.create_stream()
    kernel = module.get_kernel("axpy")
    alpha, count = 2.0, n
    for i in range(6):
        kernel.launch(4, 256, alpha, dx, outputs[i % 2], count, stream=stream)
    kernel.launch(4, 256, -1.0, dx, outputs[1], 10, stream=stream)  # a scalar changed too
    stream.sync()
    np.testing.assert_allclose(_download(outputs[0], np.float32, n), 6 * x)
    expected = 6 * x
    expected[:10] -= x[:10]
    np.testing.assert_allclose(_download(outputs[1], np.float32, n), expected)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((2.0, None, None), "takes 4 arguments, got 3"),
        (("two", None, None, 1), r"parameter 0 \(float a\): expects a number"),
        (
            (2.0, b"host", None, 1),
            r"parameter 1 \(const float\* __restrict__ x\): expects a device pointer",
        ),
        ((2.0, 12345, None, 1), r"parameter 1 .*expects a device pointer"),
        ((2.0, None, None, 1.5), r"parameter 3 \(int n\): expects an integer"),
        ((2.0, None, None, True), r"parameter 3 \(int n\): expects an integer"),
        ((2.0, None, None, 2**31), r"parameter 3 \(int n\): 2147483648 does not fit in int32_t"),
    ],
)
def test_bad_arguments_raise_type_errors_and_launch_nothing(
    device: Device, module: Module, args: tuple[object, ...], message: str
) -> None:
    y = device.allocate(8)
    y.copy_from(np.ones(2, dtype=np.float32))
    kernel = module.get_kernel("axpy")
    with pytest.raises((TypeError, OverflowError), match=message):
        kernel.launch(1, 2, *[y if a is None else a for a in args])
    device.synchronize()
    assert _download(y, np.float32, 2).tolist() == [1.0, 1.0]  # untouched


class Noisy:
    """An argument whose `==` has side effects (as a DeviceTensor's, which queues a kernel)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        Noisy.compared += 1
        return False

    __hash__ = object.__hash__


def test_a_value_of_another_type_is_never_compared_with_the_cached_one(
    device: Device, module: Module
) -> None:
    y = device.allocate(8)
    kernel = module.get_kernel("axpy")
    kernel.launch(1, 2, 2.0, y, y, 1)  # cached: numbers and buffers
    for args in ((2.0, y, y, Noisy()), (Noisy(), y, y, 1), (2.0, Noisy(), y, 1)):
        with pytest.raises(TypeError):
            kernel.launch(1, 2, *args)
        kernel.launch(1, 2, 2.0, y, y, 1)  # cached again
    device.synchronize()
    assert Noisy.compared == 0


def test_closed_buffers_and_streams_are_refused_even_after_a_cached_launch(
    device: Device, module: Module
) -> None:
    x, y = device.allocate(8), device.allocate(8)
    stream = device.create_stream()
    kernel = module.get_kernel("axpy")
    kernel.launch(1, 2, 1.0, x, y, 2, stream=stream)
    stream.sync()
    x.close()
    with pytest.raises(TypeError, match=r"parameter 1 .*closed"):
        kernel.launch(1, 2, 1.0, x, y, 2, stream=stream)
    x2 = device.allocate(8)
    stream.close()
    with pytest.raises(ClosedError):
        kernel.launch(1, 2, 1.0, x2, y, 2, stream=stream)


def test_raw_device_pointer_wrapper(device: Device, module: Module) -> None:
    x, y = device.allocate(8), device.allocate(8)
    x.copy_from(np.full(2, 2.0, dtype=np.float32))
    y.copy_from(np.zeros(2, dtype=np.float32))
    module.get_kernel("axpy").launch(1, 2, 3.0, DevicePointer(x.ptr), DevicePointer(y.ptr), 2)
    device.synchronize()
    assert _download(y, np.float32, 2).tolist() == [6.0, 6.0]


def test_bad_geometry(device: Device, module: Module) -> None:
    kernel = module.get_kernel("axpy")
    x = device.allocate(8)
    with pytest.raises(ValueError, match="grid dimensions"):
        kernel.launch(0, 1, 1.0, x, x, 0)
    with pytest.raises(TypeError, match="block must be"):
        kernel.launch(1, (1, 2, 3, 4), 1.0, x, x, 0)
    with pytest.raises(ValueError, match="4096 threads; axpy allows at most"):
        kernel.launch(1, 4096, 1.0, x, x, 0)  # more threads per block than any device allows


def test_prebuilt_module_with_declared_signature(device: Device, cache_dir: Path) -> None:
    code = Program(SOURCE).compile(device)
    module = Module.from_bytes(code, device)  # no source: types must be declared
    with pytest.raises(TypeError, match="pass signature"):
        module.get_kernel("axpy")
    kernel = module.get_kernel("axpy", signature=["float", "const float*", "float*", "int"])
    y = device.allocate(4)
    y.copy_from(np.ones(1, dtype=np.float32))
    kernel.launch(1, 1, 1.0, y, y, 1)
    device.synchronize()
    assert _download(y, np.float32, 1).tolist() == [2.0]
    assert kernel.attribute("MAX_THREADS_PER_BLOCK") >= 256


def test_unloaded_module_refuses_launches(device: Device, module: Module) -> None:
    kernel = module.get_kernel("axpy")
    x = device.allocate(8)
    module.close()
    with pytest.raises(ClosedError):
        kernel.launch(1, 1, 1.0, x, x, 0)


def test_launch_from_a_fresh_thread(device: Device, module: Module) -> None:
    # A new thread has no current context on NVIDIA: the native launch fails, the surface
    # call recovers the context, and the launch happens exactly once.
    import threading

    y = device.allocate(8)
    y.copy_from(np.zeros(2, dtype=np.float32))
    x = device.allocate(8)
    x.copy_from(np.ones(2, dtype=np.float32))
    kernel = module.get_kernel("axpy")
    errors: list[BaseException] = []

    def work() -> None:
        try:
            kernel.launch(1, 2, 5.0, x, y, 2)
            device.synchronize()
        except BaseException as error:  # reported to the main thread below
            errors.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert errors == []
    assert _download(y, np.float32, 2).tolist() == [5.0, 5.0]


def test_forget_arguments_releases_the_last_launch_buffers(device: Device, module: Module) -> None:
    import weakref

    x, y = device.allocate(8), device.allocate(8)
    kernel = module.get_kernel("axpy")
    kernel.launch(1, 2, 1.0, x, y, 2)
    device.synchronize()
    watch = weakref.ref(x._owner)
    del x
    assert watch() is not None  # still referenced by the packed arguments
    kernel.forget_arguments()
    import gc

    gc.collect()
    assert watch() is None
    kernel.launch(1, 2, 1.0, y, y, 2)  # packs again
    device.synchronize()
