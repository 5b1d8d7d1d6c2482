"""Every kernel source compiles with the real ROCm hiprtc, and declares exactly the expected
`extern "C"` entry points, each of which is a kernel symbol of the code object.

There is no AMD device here: hiprtc compiles for named architectures without one. gfx90a runs
64-lane warps, gfx1030 32-lane ones; the kernels must not care.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from hip_core.kernel_scan import scan_kernels
from hip_core.signature import kernel_params, kernels_in_source
from hip_ffi.rtc import compile_source
from hip_runtime.libraries import kernel_sources
from hip_runtime.libraries.kernel_sources import checkout_kernels
from hip_runtime.libraries.kernel_structs import STRUCTS
from hip_runtime.tensors.dtypes import SUFFIXES

TYPES = ("f32", "f16", "bf16")
FAMILIES = {
    "norms.hip": (
        "layernorm",
        "layernorm_narrow",
        "add_layernorm",
        "add_layernorm_narrow",
        "rmsnorm",
    ),
    "softmax.hip": ("softmax",),
    "rope.hip": (
        "rope_half",
        "rope_interleaved",
        "rope_and_cache_half",
        "rope_and_cache_interleaved",
        "rope_and_cache_rms_half",
        "rope_and_cache_rms_interleaved",
    ),
    "swiglu_rms.hip": ("swiglu_rms",),
    "transpose.hip": ("transpose",),
    "bias_gelu.hip": ("bias_gelu",),
}
EXPECTED = {source: {f"{op}_{t}" for op in ops for t in TYPES} for source, ops in FAMILIES.items()}
EXPECTED["dequant.hip"] = {f"dequant{s}_{q}_{t}" for s in ("", "_split") for q in ("q8_0", "q4_0") for t in TYPES} | {"split_rows_q8_0", "split_rows_q4_0"}  # fmt: skip  # noqa: E501
EXPECTED["copy.hip"] = {f"copy{t}_u{bits}" for t in ("", "_tiles") for bits in (8, 16, 32, 64)}
ALL = tuple(SUFFIXES.values())  # every dtype of kernels/dtypes.h: f32 ... u32, b8
NUMBERS = ALL[:-1]  # all but bool
EXPECTED["attention.hip"] = (
    {f"attention_d{d}_{t}" for d in (32, 64, 128, 256) for t in TYPES}
    | {f"attention_scalar_d64_{t}" for t in TYPES}
    | {f"attention_mma_d{d}_{t}" for d in (32, 64, 128) for t in TYPES[1:]}
)
EXPECTED["softmax.hip"] |= {f"softmax_axis_{t}" for t in TYPES}  # along any axis
EXPECTED["reduce.hip"] = {f"reduce_sum_{t}" for t in ALL} | {f"reduce_sum2_{t}" for t in TYPES[1:]}
EXPECTED["reduce_arg.hip"] = {f"reduce_arg_{t}" for t in ALL}
EXPECTED["reduce_max.hip"] = {f"reduce_max_{t}" for t in ALL}
EXPECTED["indexing.hip"] = (
    {f"index_select_u{bits}" for bits in (8, 16, 32, 64, 128)}
    | {f"gather_u{bits}" for bits in (8, 16, 32, 64)}
    | {f"scatter_add_{t}" for t in ALL}
)
EXPECTED["gemm_small.hip"] = {f"gemm_small_{t}" for t in ("f32", "f64", "f16", "bf16")}
EXPECTED["fill.hip"] = {f"{op}_u{bits}" for op in ("fill", "tril") for bits in (8, 16, 32, 64)} | {
    f"arange_{t}" for t in NUMBERS
}
EXPECTED["sort.hip"] = (
    {f"sort_block_{t}" for t in ALL}
    | {f"sort_merge_k{bits}" for bits in (32, 64)}
    | {f"sort_finish_u{bits}" for bits in (8, 16, 32, 64)}
)
# The pointwise families: a rows entry point and a strided (`_any`) one per dtype.
for family, types in (
    ("binary", NUMBERS), ("compare", ALL), ("unary", NUMBERS), ("math", NUMBERS[:4]),
    ("where", ALL), ("cast", ALL),
):  # fmt: skip
    EXPECTED[f"{family}.hip"] = {f"{family}{p}_{t}" for p in ("", "_any") for t in types}
EXPECTED["binary.hip"] |= {f"power{p}_{t}" for p in ("", "_any") for t in NUMBERS}
EXPECTED["attention_decode.hip"] = {
    f"attention_decode_{s}_{t}"
    for s in ("d64", "d128", "d256", "combine", "mma_d64", "mma_d128")
    for t in TYPES
}
EXPECTED["sampling.hip"] = {"sample_rows"}
EXPECTED["gemv.hip"] = {f"gemv_{f}r{r}_{t}" for f in ("", "norm_", "swiglu_") for r in (1, 2, 4, 8, 16) for t in TYPES}  # fmt: skip  # noqa: E501
EXPECTED["gemv_chain.hip"] = {f"gemv_chain_r{r}_{t}" for r in (1, 2, 4, 8) for t in TYPES}
EXPECTED["gemv_quant.hip"] = {f"gemv_{q}_r{r}_{t}" for q in ("q8_0", "q4_0") for r in (1, 4, 16) for t in TYPES}  # fmt: skip  # noqa: E501
EXPECTED["gemv_quant_split.hip"] = {f"gemv_split_{q}_r{r}_{t}" for q in ("q8_0", "q4_0") for r in (1, 4, 16) for t in TYPES}  # fmt: skip  # noqa: E501
EXPECTED.update({"conv.hip": {f"{op}_{t}" for op in ("im2col_nchw", "im2col_nhwc", "col2im", "conv_depthwise") for t in TYPES}, "pool.hip": {f"{op}_{t}" for op in ("pool2d", "max_pool2d_pairs", "max_pool2d_rows", "max_pool2d_row_pairs") for t in TYPES}, "pool_columns.hip": {f"max_pool2d_columns_{t}" for t in TYPES}, "pool_nhwc.hip": {f"max_pool2d_nhwc_{t}" for t in TYPES}, "pool_tiled_nhwc.hip": {f"max_pool2d_tiled_nhwc_{t}" for t in TYPES}, "resample.hip": {f"upsample2d_{t}" for t in TYPES}, "channel_norms.hip": {f"{op}_{t}" for op in ("group_norm", "group_norm_deep", "group_norm_on_chip", "batch_norm") for t in TYPES}})  # fmt: skip  # noqa: E501
# (a new source adds its EXPECTED entry above this line)

EM_AMDGPU = 224
SHT_SYMTAB, SHT_DYNSYM = 2, 11
STT_FUNC = 2


def test_the_sources_are_the_expected_families() -> None:
    assert set(kernel_sources.sources()) == set(EXPECTED)
    assert {"common.h", "rows.h", "pointwise.h", "dtypes.h"} <= set(kernel_sources.headers())
    program = kernel_sources.program("norms.hip")
    assert program.name == "norms.hip" and program.headers == kernel_sources.headers()
    with pytest.raises(KeyError, match=r"no kernel source 'norms'; there are: attention.hip"):
        kernel_sources.program("norms")


def test_a_source_checkout_reads_the_repository_kernels_folder() -> None:
    # From a checkout the sources come from the repository's kernels/, however deep
    # kernel_sources.py sits in the package (it moved into libraries/); an installed wheel
    # (nox's sessions) reads its own copy.
    repository = Path(__file__).resolve().parents[3]
    package = repository / "packages" / "hip-runtime" / "src" / "hip_runtime"
    assert checkout_kernels(package) == repository / "kernels"
    assert (package / "libraries" / "kernel_sources.py").is_file()
    found = Path(str(kernel_sources.kernels_dir()))
    installed = Path(str(kernel_sources.__file__)).parents[1] / "kernels"
    assert found == (installed if installed.is_dir() else repository / "kernels")
    assert {p.name for p in found.iterdir()} >= set(EXPECTED)


@pytest.mark.parametrize("source", sorted(EXPECTED))
def test_each_source_declares_exactly_its_kernels_with_parsable_parameters(source: str) -> None:
    structs = STRUCTS.get(source, {})  # the structs its entry points take by value
    declared = {  # TypeError if unparsable
        name: kernel_params(decl, structs=structs)
        for name, decl in scan_kernels(kernel_sources.sources()[source]).items()
        if not decl.template
    }
    assert set(declared) == EXPECTED[source]
    for name, params in declared.items():
        assert params, name
        # Sizes and counts are plain C integers, or a struct of them (kernel_structs); a 16-bit
        # float travels only behind a pointer.
        kinds = {p.kind for p in params}
        assert kinds <= {"pointer", "int", "float", *(["struct"] if structs else [])}, name


def elf_symbols(image: bytes) -> dict[str, int]:
    """{name: symbol type} of the defined symbols of a 64-bit little-endian ELF image."""
    (shoff,) = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)
    ]
    symbols: dict[str, int] = {}
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind not in (SHT_SYMTAB, SHT_DYNSYM):
            continue
        strings_offset = sections[link][4]
        for at in range(offset, offset + size, entsize):
            name_offset, info, _, shndx = struct.unpack_from("<IBBH", image, at)
            if shndx == 0:  # undefined
                continue
            end = image.index(b"\0", strings_offset + name_offset)
            symbols[image[strings_offset + name_offset : end].decode()] = info & 0xF
    return symbols


@pytest.mark.parametrize("arch", ["gfx90a", "gfx1030"])
@pytest.mark.parametrize("source", sorted(EXPECTED))
def test_hiprtc_compiles_every_kernel(amd: Any, source: str, arch: str) -> None:
    text = kernel_sources.sources()[source]
    result = compile_source(
        amd,
        text,
        name=source,
        options=[f"--offload-arch={arch}", "-O3"],
        headers=kernel_sources.headers(),
    )
    status, log, code = result.status, result.log, result.code
    assert status == 0, log
    assert "warning" not in log, log
    assert code[:4] == b"\x7fELF"
    assert struct.unpack_from("<H", code, 18)[0] == EM_AMDGPU
    symbols = elf_symbols(code)
    descriptors = {name[: -len(".kd")] for name in symbols if name.endswith(".kd")}
    assert descriptors == EXPECTED[source]
    for kernel in EXPECTED[source]:
        assert symbols.get(kernel) == STT_FUNC, f"{kernel} is not a function of the code object"


def test_per_dtype_entry_point_lists_are_written_out_with_their_types() -> None:
    lists = kernel_sources.type_lists(kernel_sources.headers()["dtypes.h"])
    assert [s for s, _ in lists["HIPK_ALL_TYPES"]] == [
        "f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "u32", "b8"
    ]  # fmt: skip
    text = (
        "#define NEG(S, T) \\\n"
        '    extern "C" __global__ void neg_##S(const T* x, T* y, long long n) { f<T>(x); }\n'
        "HIPK_FLOAT_TYPES(NEG)\n"
        "HIPK_NOT_A_LIST(NEG)\n"
    )
    declared = kernels_in_source(kernel_sources.expand_type_lists(text, lists))
    assert set(declared) == {"neg_f32", "neg_f64", "neg_f16", "neg_bf16"}
    assert [p.decl for p in declared["neg_bf16"]] == [
        "const hipk::bf16* x", "hipk::bf16* y", "long long n"
    ]  # fmt: skip
    assert "HIPK_NOT_A_LIST(NEG)" in kernel_sources.expand_type_lists(text, lists)
