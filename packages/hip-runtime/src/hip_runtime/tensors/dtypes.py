"""Element types: numpy dtypes (bfloat16 through ml_dtypes) and what each layer calls them.

A DeviceTensor may hold any fixed-size numpy dtype (ids are int32, masks uint8…); the kernels
and hipBLAS take the three float types below, named by their kernel suffix (`layernorm_bf16`),
their hipDataType (gemm-ex) and their DLPack type code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from hip_ffi.constants import HIP_R_16BF, HIP_R_16F, HIP_R_32F

float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
bfloat16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
int32 = np.dtype(np.int32)
bool_ = np.dtype(np.bool_)

DTypeLike = Any  # whatever np.dtype() accepts: np.float32, "float16", ml_dtypes.bfloat16…


@dataclass(frozen=True)
class FloatType:
    """A float type the kernels and hipBLAS take."""

    dtype: np.dtype[Any]
    suffix: str  # kernel name suffix: "f32", "f16", "bf16"
    hip_data_type: int  # hipDataType for gemm-ex


FLOAT_TYPES: dict[np.dtype[Any], FloatType] = {
    t.dtype: t
    for t in (
        FloatType(float32, "f32", HIP_R_32F),
        FloatType(float16, "f16", HIP_R_16F),
        FloatType(bfloat16, "bf16", HIP_R_16BF),
    )
}

#: Every dtype the generated kernels take (kernels/dtypes.h), by kernel-name suffix.
SUFFIXES: dict[np.dtype[Any], str] = {
    np.dtype(t): name
    for t, name in (
        (np.float32, "f32"), (np.float64, "f64"), (np.float16, "f16"), (ml_dtypes.bfloat16, "bf16"),
        (np.int8, "i8"), (np.int16, "i16"), (np.int32, "i32"), (np.int64, "i64"),
        (np.uint8, "u8"), (np.uint32, "u32"), (np.bool_, "b8"),
    )
}  # fmt: skip


def suffix(dtype: np.dtype[Any], what: str = "tensor") -> str:
    """The kernel-name suffix of `dtype` ("f32", "bf16", "i64", "b8"…; kernels/dtypes.h);
    ValueError naming `what` for a dtype no kernel takes (u16, u64, complex…)."""
    found = SUFFIXES.get(dtype)
    if found is None:
        names = ", ".join(str(t) for t in SUFFIXES)
        raise ValueError(f"{what} has dtype {dtype}; the kernels take {names}")
    return found


# DLPack's DLDataTypeCode values (dlpack.h).
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_BOOL = 0, 1, 2, 4, 6
_DL_CODES = {"i": DL_INT, "u": DL_UINT, "f": DL_FLOAT, "b": DL_BOOL}


def as_dtype(dtype: DTypeLike) -> np.dtype[Any]:
    """`dtype` as a numpy dtype ("bfloat16" and "bf16" name ml_dtypes' bfloat16)."""
    if isinstance(dtype, str) and dtype in ("bfloat16", "bf16"):
        return bfloat16
    if isinstance(dtype, str) and dtype in ("f32", "f16"):
        return float32 if dtype == "f32" else float16  # the kernel suffixes name them too
    try:
        result = np.dtype(dtype)
    except TypeError as error:
        raise ValueError(f"not a dtype: {dtype!r}") from error
    if result.hasobject or result.itemsize == 0 or result.fields is not None:
        raise ValueError(f"{result} cannot live in device memory (need a fixed-size number type)")
    return result


def float_type(dtype: DTypeLike, what: str = "tensor") -> FloatType:
    """The FloatType of `dtype`; ValueError naming `what` if the kernels do not take it."""
    found = FLOAT_TYPES.get(as_dtype(dtype))
    if found is None:
        names = ", ".join(str(t) for t in FLOAT_TYPES)
        raise ValueError(f"{what} has dtype {as_dtype(dtype)}; this op takes {names}")
    return found


def to_dlpack(dtype: np.dtype[Any]) -> tuple[int, int]:
    """(DLDataTypeCode, bits) of a numpy dtype; ValueError for types DLPack cannot name."""
    if dtype == bfloat16:
        return DL_BFLOAT, 16
    code = _DL_CODES.get(dtype.kind)
    if code is None or not dtype.isnative:
        raise ValueError(f"DLPack has no type for {dtype}")
    return code, dtype.itemsize * 8


def from_dlpack(code: int, bits: int, lanes: int) -> np.dtype[Any]:
    """The numpy dtype of a DLDataType; ValueError for vector lanes and unknown codes."""
    if lanes != 1:
        raise ValueError(f"DLPack vector types ({lanes} lanes) are not supported")
    if code == DL_BFLOAT and bits == 16:
        return bfloat16
    if code == DL_BOOL and bits == 8:
        return np.dtype(np.bool_)
    kind = {DL_INT: "i", DL_UINT: "u", DL_FLOAT: "f"}.get(code)
    if kind is None or bits % 8:
        raise ValueError(f"unsupported DLPack dtype code {code} with {bits} bits")
    try:
        return np.dtype(f"{kind}{bits // 8}")
    except TypeError as error:
        raise ValueError(f"unsupported DLPack dtype code {code} with {bits} bits") from error


__all__ = [
    "DL_BFLOAT",
    "DL_BOOL",
    "DL_FLOAT",
    "DL_INT",
    "DL_UINT",
    "FLOAT_TYPES",
    "SUFFIXES",
    "DTypeLike",
    "FloatType",
    "as_dtype",
    "bfloat16",
    "bool_",
    "float16",
    "float32",
    "float_type",
    "from_dlpack",
    "int32",
    "suffix",
    "to_dlpack",
]
