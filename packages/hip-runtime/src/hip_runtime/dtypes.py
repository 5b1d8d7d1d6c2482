"""Compatibility path: this module now lives at `hip_runtime.tensors.dtypes`.

hip-runtime's modules were grouped into folders by layer (issue 40); this path is kept because the
kernels' comments (kernels/dtypes.h, cast.hip) named `hip_runtime.dtypes` as the host's table of
kernel suffixes, and code written against earlier releases imports dtypes from it. It only
re-exports the public names (the same objects); new code imports `hip_runtime.tensors.dtypes`, and
nothing inside the package imports this path.
"""

from __future__ import annotations

from hip_runtime.tensors.dtypes import (
    DL_BFLOAT,
    DL_BOOL,
    DL_FLOAT,
    DL_INT,
    DL_UINT,
    FLOAT_TYPES,
    SUFFIXES,
    DTypeLike,
    FloatType,
    as_dtype,
    bfloat16,
    bool_,
    float16,
    float32,
    float_type,
    from_dlpack,
    int32,
    suffix,
    to_dlpack,
)

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
