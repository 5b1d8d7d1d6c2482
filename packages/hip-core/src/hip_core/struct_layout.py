"""User structs and HIP vectors passed to kernels by value: their layouts and their bytes.

A struct's layout is given once, as a numpy structured dtype or a ctypes Structure class, and
must be the C compiler's layout of the struct: each field at its natural alignment (numpy:
`np.dtype([...], align=True)`; ctypes does this by itself unless `_pack_` says otherwise). A
dtype whose offsets or size differ from that is refused with the fix (a silently shifted field
would be read as garbage by the kernel).

Values: an instance of the layout (a numpy structured scalar or 0-d/1-element array of that
dtype, or an instance of the ctypes class), or a tuple of the fields in order (a dict by field
name for a dtype); each field checked as its type (an integer field takes no float or bool).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StructLayout:
    """`name`'s size and alignment in bytes, and `pack(value) -> bytes` (TypeError if `value`
    is not one of these structs)."""

    name: str
    size: int
    align: int
    pack: Callable[[Any], bytes]


def struct_layout(name: str, layout: Any) -> StructLayout:
    """The StructLayout of `layout` (a numpy structured dtype or a ctypes Structure class)."""
    if isinstance(layout, StructLayout):
        return layout
    if isinstance(layout, type) and issubclass(layout, ctypes.Structure):
        return _ctypes_layout(name, layout)
    if getattr(layout, "names", None) and hasattr(layout, "itemsize"):
        return _numpy_layout(name, layout)
    raise TypeError(
        f"the layout of struct {name} must be a numpy structured dtype or a ctypes Structure "
        f"class, not {type(layout).__name__}"
    )


def _ctypes_layout(name: str, cls: type[ctypes.Structure]) -> StructLayout:
    def pack(value: Any) -> bytes:
        if isinstance(value, cls):
            return bytes(value)
        if isinstance(value, tuple):
            fields = [f[0] for f in cls._fields_]
            if len(value) != len(fields):
                raise TypeError(f"{name} has {len(fields)} fields, got {len(value)} values")
            try:
                return bytes(cls(*value))
            except (TypeError, ValueError) as error:
                raise TypeError(f"{name}: {error}") from None
        raise TypeError(f"expects a {name} ({cls.__name__} or a tuple), got {type(value).__name__}")

    return StructLayout(name, ctypes.sizeof(cls), ctypes.alignment(cls), pack)


def _c_offsets(dtype: Any) -> tuple[list[int], int, int]:
    """The offsets, size and alignment C gives a struct of `dtype`'s fields, in order."""
    offsets, end, align = [], 0, 1
    for field in dtype.names:
        sub = dtype.fields[field][0]
        field_align = _alignment(sub)
        end = -(-end // field_align) * field_align
        offsets.append(end)
        end += sub.itemsize
        align = max(align, field_align)
    return offsets, -(-end // align) * align, align


def _alignment(dtype: Any) -> int:
    if dtype.names:
        return _c_offsets(dtype)[2]
    return int(dtype.base.alignment)


def _numpy_layout(name: str, dtype: Any) -> StructLayout:
    import numpy as np

    offsets, size, align = _c_offsets(dtype)
    actual = [dtype.fields[field][1] for field in dtype.names]
    if actual != offsets or dtype.itemsize != size:
        raise TypeError(
            f"the numpy dtype given for struct {name} is not laid out as C lays out the struct "
            f"(offsets {actual}, {dtype.itemsize} bytes; C: {offsets}, {size} bytes): build it "
            "with np.dtype([...], align=True)"
        )

    def pack(value: Any) -> bytes:
        if isinstance(value, (np.void, np.ndarray)):
            if value.dtype != dtype or value.size != 1:
                raise TypeError(f"expects a {name} ({dtype}), got {value.dtype} x {value.size}")
            return bytes(value.tobytes())
        if isinstance(value, dict):
            value = tuple(value[f] if f in value else _missing(name, f) for f in dtype.names)
        if not isinstance(value, tuple):
            raise TypeError(
                f"expects a {name} (its numpy dtype or a tuple), got {type(value).__name__}"
            )
        if len(value) != len(dtype.names):
            raise TypeError(f"{name} has {len(dtype.names)} fields, got {len(value)} values")
        for field, item in zip(dtype.names, value, strict=True):
            _check_field(name, field, dtype.fields[field][0], item)
        try:
            return bytes(np.array(value, dtype=dtype).tobytes())
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name}: {error}") from None

    return StructLayout(name, size, align, pack)


def _missing(name: str, field: str) -> Any:
    raise TypeError(f"{name}: no value for field {field!r}")


def _check_field(name: str, field: str, dtype: Any, value: Any) -> None:
    """An integer field takes integers, a float field numbers (never a bool or a string)."""
    if dtype.shape != ():
        return  # an array field: numpy checks its shape
    if dtype.kind in "iu" and (isinstance(value, bool) or not hasattr(value, "__index__")):
        raise TypeError(f"{name}.{field} expects an integer, got {type(value).__name__}")
    if dtype.kind == "f" and (
        isinstance(value, (bool, str, bytes)) or not hasattr(value, "__float__")
    ):
        raise TypeError(f"{name}.{field} expects a number, got {type(value).__name__}")


def vector_components(value: Any, count: int) -> list[Any]:
    """The `count` components of a vector argument: a tuple or list, or a numpy array of shape
    (count,)."""
    if isinstance(value, (tuple, list)):
        items = list(value)
    elif hasattr(value, "tolist") and getattr(value, "shape", None) == (count,):
        items = value.tolist()
    else:
        raise TypeError(
            f"expects {count} components (a tuple, list or numpy array), got {type(value).__name__}"
        )
    if len(items) != count:
        raise TypeError(f"expects {count} components, got {len(items)}")
    return items
