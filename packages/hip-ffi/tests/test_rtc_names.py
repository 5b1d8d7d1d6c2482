"""hiprtc name expressions on amd, and what each front end adds to a program (deprecated
spellings, platform macro, typedefs). The cpu platform's are hip-cpu's test_cpu_rtc_names.py."""

from __future__ import annotations

from typing import Any

from hip_ffi.platforms.amd.rtc import PROLOGUE
from hip_ffi.platforms.nvidia.tables import PRE_INCLUDE, RTC_HEADERS
from hip_ffi.rtc import DEPRECATED_SPELLINGS, compile_source

SOURCE = r"""
template <int N> __global__ void fill(int* p) { p[hipThreadIdx_x] = N; }
namespace ns { __global__ void one(int* p) { HIP_DYNAMIC_SHARED(int, s) s[0] = 1; p[0] = s[0]; } }
extern "C" __global__ void plain(int* p) { p[0] = 2; }
"""
NAMES = ["fill<64>", "&fill< 8 >", "ns::one", "plain"]


def test_every_front_end_adds_the_deprecated_spellings() -> None:
    assert "#define hipGridDim_z gridDim.z" in DEPRECATED_SPELLINGS
    assert DEPRECATED_SPELLINGS.encode() in PROLOGUE and PROLOGUE.endswith(b"#line 1\n")
    stand_in = RTC_HEADERS[PRE_INCLUDE]
    assert DEPRECATED_SPELLINGS in stand_in and "typedef unsigned int uint;" in stand_in


def test_amd_lowers_to_the_mangled_names(amd: Any) -> None:
    result = compile_source(
        amd, SOURCE, name="names.hip", options=["--offload-arch=gfx90a"], name_expressions=NAMES
    )
    assert result.ok, result.log
    assert result.lowered == {
        "fill<64>": "_Z4fillILi64EEvPi", "&fill< 8 >": "_Z4fillILi8EEvPi",
        "ns::one": "_ZN2ns3oneEPi", "plain": "plain",
    }  # fmt: skip
