"""Kernels found by the names HIP code gives them: templates by name expression, C++-linkage
and namespaced kernels by their qualified names; the source scan behind it; and a kernel whose
parameter types cannot be read failing alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hip_core import Device, Program
from hip_core.kernel_scan import canonical, scan_kernels, template_arguments

SOURCE = r"""
#include <hip/hip_runtime.h>
struct Opaque { int a; };

template <typename T, int N = 2>
__global__ void scale(T* out, T value) { out[threadIdx.x] = value * N; }

__global__ void cxx(int* out, int v) { out[0] = v + 1; }  // C++ linkage: mangled on a GPU

namespace outer { namespace inner {
__global__ void nested(int* out, int v) { out[0] = v + 2; }
} }

namespace { __global__ void hidden(int* out, int v) { out[0] = v + 3; } }

extern "C" {
__global__ void plain_c(int* out, int v) { out[0] = v + 4; }
}

__global__ void needs_layout(int* out, Opaque o) { out[0] = o.a; }
"""


def _read(device: Device, buffer: object, dtype: type, count: int) -> np.ndarray:
    device.synchronize()
    out = np.empty(count, dtype)
    buffer.copy_to(out)  # type: ignore[attr-defined]
    return out


def test_the_scan_reads_namespaces_linkage_and_templates() -> None:
    found = scan_kernels(
        SOURCE + "\n#define K(n) __global__ void n(int x)\n// __global__ void c()\n"
    )
    assert set(found) == {
        "scale", "cxx", "outer::inner::nested", "hidden", "plain_c", "needs_layout"
    }  # fmt: skip
    assert found["scale"].template == ("T", "N") and found["scale"].defaults == (None, "2")
    assert found["plain_c"].c_linkage and not found["cxx"].c_linkage
    assert found["outer::inner::nested"].params == ("int* out", "int v")
    member = "struct S { static __global__ void m(int); };\nvoid f() { }\n"
    assert scan_kernels(member) == {}  # a member kernel has no name to look up
    assert canonical(" & k < unsigned  int , 3 > ") == "k<unsigned int,3>"
    assert template_arguments("ns::k< float , Pair<int,3> >") == ("ns::k", ("float", "Pair<int,3>"))


def test_launch_bounds_before_or_after_void_with_parenthesized_arguments() -> None:
    bounds = r"""
    extern "C" __global__ void __launch_bounds__((WARPS) * (32), 2) after(float* a) {}
    extern "C" __global__ __launch_bounds__((WARPS) * 32) void before(float* a, int n) {}
    extern "C" __global__ void
    __launch_bounds__(64)
    split(float* a) {}
    """
    found = scan_kernels(bounds)
    assert set(found) == {"after", "before", "split"}
    assert found["before"].params == ("float* a", "int n")


def test_programs_register_cxx_and_namespaced_kernels() -> None:
    program = Program(SOURCE, name_expressions=["scale<float, 3>"])
    assert program.lookup_names == (
        "scale<float, 3>", "cxx", "outer::inner::nested", "hidden", "needs_layout"
    )  # fmt: skip
    with pytest.raises(TypeError, match="name_expressions"):
        Program(SOURCE, name_expressions="scale<float>")  # type: ignore[arg-type]


def test_every_kind_of_name_launches(device: Device, cache_dir: Path) -> None:
    expressions = ["scale<float, 3>", "scale<int>"]
    module = Program(SOURCE, name="names.hip", name_expressions=expressions).load(device)
    out = device.allocate(64)
    for name, expected in (
        ("cxx", 8), ("outer::inner::nested", 9), ("hidden", 10), ("plain_c", 11)
    ):  # fmt: skip
        module.get_kernel(name).launch(1, 1, out, 7)
        assert _read(device, out, np.int32, 1)[0] == expected, name

    floats = module.get_kernel("scale< float , 3 >")  # spaces do not matter
    assert [p.decl for p in floats.params] == ["float* out", "float value"]
    floats.launch(1, 4, out, 1.5)
    np.testing.assert_array_equal(_read(device, out, np.float32, 4), [4.5] * 4)
    ints = module.get_kernel("scale<int>")  # N's default
    assert [p.kind for p in ints.params] == ["pointer", "int"]
    ints.launch(1, 4, out, 5)
    np.testing.assert_array_equal(_read(device, out, np.int32, 4), [10] * 4)
    with pytest.raises(TypeError, match=r"name_expressions=\['scale<double>'\]"):
        module.get_kernel("scale<double>")

    # From the cache, a new Program's module knows the lowered names too.
    again = Program(SOURCE, name="names.hip", name_expressions=expressions).load(device)
    again.get_kernel("outer::inner::nested").launch(1, 1, out, 1)
    assert _read(device, out, np.int32, 1)[0] == 3
    assert len(list(cache_dir.glob("*.bin"))) == 1


def test_an_unreadable_parameter_type_fails_only_its_kernel(
    device: Device, cache_dir: Path
) -> None:
    module = Program(SOURCE, name="names.hip").load(device)  # loads despite `Opaque o`
    with pytest.raises(TypeError, match=r"kernel 'needs_layout': parameter 1 \(Opaque o\)"):
        module.get_kernel("needs_layout")
    out = device.allocate(4)
    module.get_kernel("cxx").launch(1, 1, out, 1)  # the others work
    typed = Program(SOURCE, name="names.hip", types={"Opaque": np.dtype([("a", "i4")])})
    typed.load(device).get_kernel("needs_layout").launch(1, 1, out, (41,))
    assert _read(device, out, np.int32, 1)[0] == 41
