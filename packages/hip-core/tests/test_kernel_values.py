"""Arguments by value beyond C scalars: HIP vector types, common typedefs and user structs
with a layout given once; every bad one is a TypeError before anything is launched."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from hip_core import Device, Module, Program
from hip_core.signature import parse_param, parse_signature

SOURCE = r"""
#include <hip/hip_runtime.h>
struct Mixed { float f; double d; int i; };      // padded: d at 8, i at 16, 24 bytes
struct Pair { int a; int b; };

__global__ void vectors(double* out, int2 a, uchar4 b, double2 c, float3 d, longlong2 e) {
    double* o = out;
    o[0] = a.x; o[1] = a.y; o[2] = b.x; o[3] = b.w; o[4] = c.x; o[5] = c.y;
    o[6] = d.x; o[7] = d.z; o[8] = (double)e.x; o[9] = (double)e.y;
}

__global__ void typedefs(unsigned long long* out, uint a, size_t b, int64_t c, uint32_t d) {
    out[0] = a; out[1] = b; out[2] = (unsigned long long)c; out[3] = d;
}

__global__ void structs(double* out, Mixed m, const Pair p) {
    out[0] = m.f; out[1] = m.d; out[2] = m.i; out[3] = p.a; out[4] = p.b;
}
"""
MIXED = np.dtype([("f", "f4"), ("d", "f8"), ("i", "i4")], align=True)


class Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int), ("b", ctypes.c_int)]


@pytest.fixture
def module(device: Device, cache_dir: Path) -> Module:
    return Program(SOURCE, name="values.hip", types={"Mixed": MIXED, "Pair": Pair}).load(device)


def _read(device: Device, buffer: object, dtype: type, count: int) -> np.ndarray:
    device.synchronize()
    out = np.empty(count, dtype)
    buffer.copy_to(out)  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize(
    ("spelling", "size", "align"),
    [("char1", 1, 1), ("uchar2", 2, 2), ("short3", 6, 2), ("ushort4", 8, 8), ("int2", 8, 8),
     ("uint3", 12, 4), ("long4", 32, 16), ("ulonglong2", 16, 16), ("float4", 16, 16),
     ("double3", 24, 8), ("double4", 32, 16)],
)  # fmt: skip
def test_vector_types_have_cuda_sizes_and_alignments(spelling: str, size: int, align: int) -> None:
    param = parse_param(0, f"const {spelling} v")
    assert (param.kind, param.size, param.align) == ("vector", size, align)


def test_common_typedefs_are_known() -> None:
    params = parse_signature(["uint", "size_t", "std::size_t", "int64_t", "uint32_t", "ptrdiff_t",
                              "std::uint8_t", "ushort", "uchar"])  # fmt: skip
    assert [p.storage for p in params] == [
        "uint32_t", "uint64_t", "uint64_t", "int64_t", "uint32_t", "int64_t", "uint8_t",
        "uint16_t", "uint8_t",
    ]  # fmt: skip


def test_vectors_by_value_from_tuples_lists_and_arrays(device: Device, module: Module) -> None:
    out = device.allocate(8 * 10)
    kernel = module.get_kernel("vectors")
    kernel.launch(1, 1, out, (-3, 4), [1, 2, 3, 250], np.array([0.5, -1.5]),
                  np.array([1.0, 2.0, 3.0], np.float32), (-(2**40), 2**40))  # fmt: skip
    expected = [-3, 4, 1, 250, 0.5, -1.5, 1.0, 3.0, -(2**40), 2**40]
    np.testing.assert_array_equal(_read(device, out, np.float64, 10), expected)


def test_typedef_parameters(device: Device, module: Module) -> None:
    out = device.allocate(8 * 4)
    module.get_kernel("typedefs").launch(1, 1, out, 2**32 - 1, 2**40, -5, 7)
    assert _read(device, out, np.uint64, 4).tolist() == [2**32 - 1, 2**40, 2**64 - 5, 7]
    with pytest.raises(TypeError, match=r"parameter 1 \(uint a\): -1 does not fit"):
        module.get_kernel("typedefs").launch(1, 1, out, -1, 0, 0, 0)


def test_structs_from_numpy_and_ctypes(device: Device, module: Module) -> None:
    out = device.allocate(8 * 5)
    kernel = module.get_kernel("structs")
    kernel.launch(1, 1, out, (1.5, -2.25, 7), Pair(3, 4))
    np.testing.assert_array_equal(_read(device, out, np.float64, 5), [1.5, -2.25, 7, 3, 4])
    kernel.launch(1, 1, out, np.array((0.5, 8.0, -1), MIXED), (5, 6))
    kernel.launch(1, 1, out, {"f": 2.0, "d": 3.0, "i": 4}, (5, 6))
    np.testing.assert_array_equal(_read(device, out, np.float64, 5), [2, 3, 4, 5, 6])


@pytest.mark.parametrize(
    ("index", "value", "message"),
    [
        (1, (1, 2, 3), r"parameter 1 \(int2 a\): expects 2 components, got 3"),
        (1, (1.0, 2), r"parameter 1 \(int2 a\), component x: expects an integer, got float"),
        (1, "ab", r"parameter 1 \(int2 a\): expects 2 components"),
        (2, (1, 2, 3, 256), r"parameter 2 \(uchar4 b\), component w: 256 does not fit"),
        (4, np.zeros(4, np.float32), r"parameter 4 \(float3 d\): expects 3 components"),
    ],
)
def test_bad_vectors_raise_before_launch(
    device: Device, module: Module, index: int, value: object, message: str
) -> None:
    out = device.allocate(8 * 10)
    out.fill(0)
    args: list[object] = [out, (0, 0), (0, 0, 0, 0), (0.0, 0.0), (0.0, 0.0, 0.0), (0, 0)]
    kernel = module.get_kernel("vectors")
    kernel.launch(1, 1, *args)  # a good launch first: the bad one must not reuse its packing
    out.fill(0xFF)
    args[index] = value
    with pytest.raises((TypeError, OverflowError), match=message):
        kernel.launch(1, 1, *args)
    assert (_read(device, out, np.uint8, 80) == 0xFF).all()  # nothing ran


@pytest.mark.parametrize(
    ("mixed", "pair", "message"),
    [
        ((1.0, 2.0), Pair(), r"parameter 1 \(Mixed m\): Mixed has 3 fields, got 2"),
        ((1.0, 2.0, 3.5), Pair(), r"Mixed.i expects an integer, got float"),
        ((True, 2.0, 3), Pair(), r"Mixed.f expects a number, got bool"),
        ({"f": 1.0, "d": 2.0}, Pair(), r"no value for field 'i'"),
        (np.zeros(1, np.dtype([("f", "f4")])), Pair(), r"expects a Mixed"),
        ((1.0, 2.0, 3), (1, 2.5), r"parameter 2 \(const Pair p\)"),
        ((1.0, 2.0, 3), Pair, r"parameter 2 \(const Pair p\): expects a Pair"),
    ],
)
def test_bad_structs_raise_before_launch(
    device: Device, module: Module, mixed: object, pair: object, message: str
) -> None:
    out = device.allocate(8 * 5)
    out.fill(0xFF)
    with pytest.raises(TypeError, match=message):
        module.get_kernel("structs").launch(1, 1, out, mixed, pair)
    assert (_read(device, out, np.uint8, 40) == 0xFF).all()


def test_a_dtype_without_c_layout_is_refused(device: Device, cache_dir: Path) -> None:
    packed = np.dtype([("f", "f4"), ("d", "f8"), ("i", "i4")])  # no padding: not C's layout
    module = Program(SOURCE, name="values.hip", types={"Mixed": packed, "Pair": Pair}).load(device)
    with pytest.raises(TypeError, match=r"align=True"):
        module.get_kernel("structs")
    with pytest.raises(TypeError, match="numpy structured dtype or a ctypes Structure"):
        parse_param(0, "Pair p", {"Pair": "int a; int b"})
