"""hiprtc name expressions on the cpu platform and its kernel scan for namespaces (amd's are
hip-ffi's test_rtc_names.py)."""

from __future__ import annotations

import hip_ffi
from hip_cpu import source_scan
from hip_ffi.constants import HIPRTC_RESULTS
from hip_ffi.rtc import compile_source

SOURCE = r"""
template <int N> __global__ void fill(int* p) { p[hipThreadIdx_x] = N; }
namespace ns { __global__ void one(int* p) { HIP_DYNAMIC_SHARED(int, s) s[0] = 1; p[0] = s[0]; } }
extern "C" __global__ void plain(int* p) { p[0] = 2; }
"""
NAMES = ["fill<64>", "&fill< 8 >", "ns::one", "plain"]


def test_the_cpu_scan_qualifies_kernels_and_extern_shared_arrays() -> None:
    g, s = source_scan.GLOBAL_MARKER, source_scan.SHARED_MARKER
    text = (
        f'namespace a {{ namespace b {{ void {g} k(int x) {{ "}}"; extern {s} float t[]; }} }}'
        f" {g} void q() {{}} struct S {{ static {g} void m(); }}; }}\n"
        f'namespace {{ {g} void anon(); }}\nextern "C" {{ {g} void c(float*); }}\n'
        f"template <int N> {g} void t(float*);\nextern {s} int top[];\n"
    )
    assert source_scan.find_kernels(text) == ["a::b::k", "a::q", "anon", "c"]
    assert source_scan.find_dynamic_shared(text) == ["_ZN1a1b1tE", "top"]
    assert source_scan.canonical(" & k < unsigned  int , 3 > ") == "k<unsigned int,3>"
    assert source_scan.entry_symbol("saxpy") == "saxpy"
    assert source_scan.entry_symbol("ns::k<64>") == "__hipcpu_x_ns_3a_3ak_3c64_3e"


def test_cpu_lowered_names_and_hiprtc_s_rules() -> None:
    api = hip_ffi.load("cpu")
    result = compile_source(api, SOURCE, name="names.hip", name_expressions=NAMES)
    assert result.ok, result.log
    assert result.lowered == {
        "fill<64>": "fill<64>", "&fill< 8 >": "fill<8>", "ns::one": "ns::one", "plain": "plain"
    }  # fmt: skip
    ffi = api.ffi
    program = ffi.new("hiprtcProgram*")
    assert api.hiprtcCreateProgram(program, SOURCE.encode(), b"n.hip", 0, ffi.NULL, ffi.NULL) == 0
    out = ffi.new("const char**")
    assert api.hiprtcAddNameExpression(program[0], b"fill<64>") == 0
    before = HIPRTC_RESULTS["HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION"]
    assert api.hiprtcGetLoweredName(program[0], b"fill<64>", out) == before
    assert api.hiprtcCompileProgram(program[0], 0, ffi.NULL) == 0
    after = HIPRTC_RESULTS["HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION"]
    assert api.hiprtcAddNameExpression(program[0], b"fill<8>") == after
    invalid = HIPRTC_RESULTS["HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID"]
    assert api.hiprtcGetLoweredName(program[0], b"fill<8>", out) == invalid
    assert api.hiprtcGetLoweredName(program[0], b"fill<64>", out) == 0
    assert ffi.string(out[0]) == b"fill<64>"
    assert api.hiprtcDestroyProgram(program) == 0


def test_an_expression_naming_nothing_fails_the_compile() -> None:
    result = compile_source(hip_ffi.load("cpu"), SOURCE, name_expressions=["fill<1, 2>"])
    assert result.status == HIPRTC_RESULTS["HIPRTC_ERROR_COMPILATION"], result.log
