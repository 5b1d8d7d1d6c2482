"""The op codes of the pointwise kernel families: each tuple's order is the kernel's switch
(kernels/binary.hip, compare.hip, unary.hip, math.hip; cast.hip's targets by dtype). A new op
goes at the end of its tuple and into the kernel's switch together."""

from __future__ import annotations

from hip_runtime.tensors.dtypes import SUFFIXES

#: binary.hip's op codes, by position (power_<t> is pow's own kernel).
BINARY_OPS = (
    "add", "sub", "mul", "div", "maximum", "minimum", "swiglu", "bias_gelu_erf", "bias_gelu_tanh",
)  # fmt: skip
#: compare.hip's op codes.
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
#: unary.hip's op codes: the first six take integers too.
UNARY_OPS = ("abs", "neg", "sign", "sqr", "relu", "clamp", "recip", "floor", "ceil", "round",
             "affine")  # fmt: skip
#: math.hip's op codes (floats only).
MATH_OPS = ("exp", "log", "tanh", "sqrt", "rsqrt", "sigmoid", "silu", "gelu_erf", "gelu_tanh",
            "elu", "erf", "sin", "cos")  # fmt: skip

#: cast.hip's target codes, by dtype.
CAST_TARGETS = {dtype: index for index, dtype in enumerate(SUFFIXES)}
BINARY_CODE = {name: code for code, name in enumerate(BINARY_OPS)}
COMPARE_CODE = {name: code for code, name in enumerate(COMPARE_OPS)}
UNARY_CODE = {name: code for code, name in enumerate(UNARY_OPS)}
MATH_CODE = {name: code for code, name in enumerate(MATH_OPS)}

__all__ = [
    "BINARY_CODE",
    "BINARY_OPS",
    "CAST_TARGETS",
    "COMPARE_CODE",
    "COMPARE_OPS",
    "MATH_CODE",
    "MATH_OPS",
    "UNARY_CODE",
    "UNARY_OPS",
]
