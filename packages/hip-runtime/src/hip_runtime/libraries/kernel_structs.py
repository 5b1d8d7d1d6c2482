"""The structs kernel entry points take by value, as numpy dtypes laid out as C lays them out.

A kernel whose arguments are many scalars (a layout of several axes) takes one struct instead:
hip-core packs it from the dtype given to its Program (`types={"CopyArgs": COPY_ARGS}`, see
hip_core.struct_layout), and `kernel_sources.program` gives each source its structs from
STRUCTS. Each dtype is built with `align=True`, so every field sits at its C alignment (an
8-byte field after an int starts 4 bytes later); the field order and types must be the
struct's in the kernel source, which packages/hip-runtime/tests/test_kernel_structs.py
checks on the device (sizeof, alignment and each field's offset and size, read by a kernel).

Values: `StructValues(dtype)(*fields)`, the fields in order with each array's elements spelled
out, makes one (a read-only 1-element array; hip-core copies its bytes at the launch). It
packs with a `struct.Struct` derived from the dtype (a quarter of `np.array(tuple, dtype)`'s
12 µs) and hands the same array back for the same fields (one layout copied launch after
launch: a dictionary look-up).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

COPY_RANK = 8  # HIPK_COPY_RANK (kernels/copy.hip)
INDEX_RANK = 6  # HIPK_INDEX_RANK (kernels/indexing.hip)

_I8, _I4 = np.dtype("<i8"), np.dtype("<i4")

#: kernels/copy.hip's CopyArgs: copy_<u>(src, dst, CopyArgs).
COPY_ARGS = np.dtype(
    [
        ("n", _I8),  # elements to copy
        ("rank", _I4),  # axes used (then 4 bytes of padding)
        ("size", _I8, (COPY_RANK,)),  # row-major sizes
        ("src", _I8, (COPY_RANK,)),  # src's strides (elements)
        ("dst", _I8, (COPY_RANK,)),  # dst's strides (elements)
    ],
    align=True,
)

#: kernels/indexing.hip's IndexArgs: gather_<u>(x, index, y, IndexArgs) and
#: scatter_add_<t>(y, index, src, IndexArgs).
INDEX_ARGS = np.dtype(
    [
        ("n", _I8),  # elements of index's layout
        ("rank", _I4),  # axes used
        ("wide", _I4),  # int64 ids (1) or int32 (0)
        ("size_along", _I8),  # the indexed tensor's size along the axis
        ("along", _I8),  # and its stride there (elements)
        ("size", _I8, (INDEX_RANK,)),  # index's sizes
        ("big", _I8, (INDEX_RANK,)),  # the indexed tensor's strides (0 on the axis)
        ("index", _I8, (INDEX_RANK,)),  # index's strides
        ("other", _I8, (INDEX_RANK,)),  # the other tensor's strides (y or src)
    ],
    align=True,
)

GEMV_LINKS = 4  # HIPK_GEMV_LINKS (kernels/gemv_chain.hip)
_F4 = np.dtype("<f4")

#: kernels/gemv_chain.hip's GemvChain: gemv_chain_r<R>_<t>(GemvChain). Per link: the device
#: addresses of w, x, y, residual and norm (0: none), then n, k, slices, fusion (0 plain,
#: 1 norm, 2 swiglu) and the end of its blocks in the grid.
GEMV_CHAIN = np.dtype(
    [
        *((name, _I8, (GEMV_LINKS,)) for name in ("w", "x", "y", "residual", "norm")),
        *((name, _I4, (GEMV_LINKS,)) for name in ("n", "k", "slices", "fusion", "end")),
        ("links", _I4),  # links used
        ("rows", _I4),  # rows of x (every link's)
        ("eps", _F4),  # the norms' epsilon
        ("counters", _I8),  # unsigned int [2 * GEMV_LINKS], zero between launches
    ],
    align=True,
)

#: kernel source -> {struct name as the entry points spell it (namespace dropped): dtype}.
STRUCTS: dict[str, dict[str, np.dtype[Any]]] = {
    "copy.hip": {"CopyArgs": COPY_ARGS},
    "indexing.hip": {"IndexArgs": INDEX_ARGS},
    "gemv_chain.hip": {"GemvChain": GEMV_CHAIN},
}

_KEPT = 1024  # distinct values a StructValues keeps (then it starts again)


class StructValues:
    """Values of the struct `dtype` (a structured dtype of integer and float fields, scalars or
    1-D arrays): `values(*fields)` -> a read-only 1-element array of `dtype`. struct.error for
    a field that is not of its type or does not fit it (the callers pass checked shapes)."""

    def __init__(self, dtype: np.dtype[Any]) -> None:
        self.dtype = dtype
        self._struct = struct.Struct(_format(dtype))
        self._made: dict[tuple[Any, ...], np.ndarray] = {}

    def __call__(self, *fields: Any) -> np.ndarray:
        found = self._made.get(fields)
        if found is None:
            if len(self._made) >= _KEPT:
                self._made.clear()
            found = self._made[fields] = np.frombuffer(self._struct.pack(*fields), self.dtype)
        return found


#: (numpy kind, bytes) -> the struct module's code of that standard size ("<" formats).
_CODES = {("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q", ("u", 1): "B",
          ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q", ("f", 4): "f", ("f", 8): "d"}  # fmt: skip


def _format(dtype: np.dtype[Any]) -> str:
    """The struct-module format of `dtype`'s bytes: its fields in order, padding as `x`."""
    parts, end = ["<"], 0
    for name in dtype.names or ():
        field, offset = dtype.fields[name][:2]  # type: ignore[index]
        code = _CODES.get((field.base.kind, field.base.itemsize))
        if code is None or len(field.shape) > 1 or field.base.byteorder == ">":
            raise TypeError(f"field {name} ({field}): integers, floats or 1-D arrays of them")
        parts.append(f"{offset - end}x{field.shape[0] if field.shape else 1}{code}")
        end = offset + field.itemsize
    parts.append(f"{dtype.itemsize - end}x")
    return "".join(parts)


__all__ = [
    "COPY_ARGS", "COPY_RANK", "GEMV_CHAIN", "GEMV_LINKS", "INDEX_ARGS", "INDEX_RANK", "STRUCTS",
    "StructValues",
]  # fmt: skip
