"""Kernel parameter types: parsed from `__global__` declarations, or declared.

A `Param` knows its C type, its size and alignment in the argument buffer, and how to write a
Python value into that buffer exactly as the C type (with a TypeError naming the parameter
when the value does not fit). Types: C scalars and their common typedefs (`uint`, `size_t`,
`int64_t`, `std::uint32_t`...), 16-bit floats, pointers, HIP's vector types by value
(`char1` ... `double4`, from a tuple, list or numpy array of their components) and user
structs by value, whose layout is given once (a numpy structured dtype or a ctypes Structure,
in `types={"Name": layout}`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hip_core.kernel_scan import KernelDecl, scan_kernels
from hip_core.struct_layout import StructLayout, struct_layout, vector_components

#: C scalar spellings -> (cffi type used to store it, size in bytes, kind).
_SCALARS: dict[str, tuple[str, int, str]] = {}
for _names, _entry in (
    (("bool", "_Bool"), ("_Bool", 1, "bool")),
    (("char", "signed char", "int8_t"), ("int8_t", 1, "int")),
    (("unsigned char", "uint8_t"), ("uint8_t", 1, "int")),
    (("short", "short int", "signed short", "int16_t"), ("int16_t", 2, "int")),
    (("unsigned short", "unsigned short int", "uint16_t"), ("uint16_t", 2, "int")),
    (("int", "signed", "signed int", "int32_t"), ("int32_t", 4, "int")),
    (("unsigned", "unsigned int", "uint32_t"), ("uint32_t", 4, "int")),
    (
        ("long", "long int", "long long", "long long int", "int64_t", "ptrdiff_t", "ssize_t"),
        ("int64_t", 8, "int"),
    ),
    (
        (
            "unsigned long",
            "unsigned long int",
            "unsigned long long",
            "unsigned long long int",
            "uint64_t",
            "size_t",
        ),
        ("uint64_t", 8, "int"),
    ),
    (("float",), ("float", 4, "float")),
    (("double",), ("double", 8, "float")),
    (("__half", "half", "_Float16"), ("uint16_t", 2, "half")),
    (
        ("__hip_bfloat16", "hip_bfloat16", "__nv_bfloat16", "__bf16", "bfloat16"),
        ("uint16_t", 2, "bfloat16"),
    ),
):
    for _name in _names:
        _SCALARS[_name] = _entry
for _alias, _name in (
    ("uchar", "unsigned char"), ("ushort", "unsigned short"), ("uint", "unsigned int"),
    ("ulong", "unsigned long"), ("intptr_t", "long"), ("uintptr_t", "unsigned long"),
    ("longlong", "long long"), ("ulonglong", "unsigned long long"), ("int8_t", "signed char"),
    ("hipDeviceptr_t", "unsigned long"), ("unsigned long long int", "unsigned long long"),
):  # fmt: skip
    _SCALARS.setdefault(_alias, _SCALARS[_name])
# HIP's vector types: element spelling -> (element C type, count); sizes and alignments are
# CUDA's (and the cpu platform's): N=3 is unpadded, N=2/4 aligned to their size up to 16.
_VECTOR = re.compile(
    r"(char|uchar|short|ushort|int|uint|long|ulong|longlong|ulonglong|float|double)([1-4])"
)
_VECTOR_ELEMENTS = {
    "char": "signed char", "uchar": "unsigned char", "short": "short", "ushort": "unsigned short",
    "int": "int", "uint": "unsigned int", "long": "long", "ulong": "unsigned long",
    "longlong": "long long", "ulonglong": "unsigned long long", "float": "float",
    "double": "double",
}  # fmt: skip

_QUALIFIERS = re.compile(
    r"\b(const|volatile|__restrict__|__restrict|restrict|struct|class)\b|\bstd::"
)


@dataclass(frozen=True)
class Param:
    """One kernel parameter: `decl` as written, stored as `storage` (a cffi type)."""

    index: int
    decl: str
    storage: str  # cffi type of the slot (a vector's: its element's; a struct's: "char")
    size: int
    kind: str  # "int", "float", "half", "bfloat16", "bool", "pointer", "vector" or "struct"
    align: int = 0  # 0: the size (every scalar)
    count: int = 1  # a vector's components
    layout: Any = field(default=None, compare=False)  # a struct's StructLayout

    def describe(self) -> str:
        return f"parameter {self.index} ({self.decl})"


def parse_param(index: int, decl: str, types: Mapping[str, Any] | None = None) -> Param:
    """A Param from one C parameter declaration, e.g. "const float* __restrict__ x"; `types`
    gives user structs' layouts by type name (see StructLayout)."""
    text = " ".join(_QUALIFIERS.sub(" ", decl).split())
    if "*" in text or "[" in text:
        return Param(index, decl.strip(), "uintptr_t", 8, "pointer")
    words = text.split()
    # Drop a trailing parameter name: what remains must be a known type.
    for candidate in (" ".join(words), " ".join(words[:-1])):
        if candidate in _SCALARS:
            storage, size, kind = _SCALARS[candidate]
            return Param(index, decl.strip(), storage, size, kind)
        vector = _VECTOR.fullmatch(candidate)
        if vector:
            storage, size, _ = _SCALARS[_VECTOR_ELEMENTS[vector.group(1)]]
            count = int(vector.group(2))
            align = size if count == 3 else min(size * count, 16)
            return Param(index, decl.strip(), storage, size * count, "vector", align, count)
        for name in (candidate, candidate.rpartition("::")[2]):
            if types and name and name in types:
                layout = struct_layout(name, types[name])
                return Param(
                    index, decl.strip(), "char", layout.size, "struct", layout.align, 1, layout
                )
    raise TypeError(
        f"parameter {index} ({decl.strip()}): unsupported kernel parameter type (pass "
        "signature=[...], or the struct's layout in types={...})"
    )


def parse_signature(
    types: Sequence[str], structs: Mapping[str, Any] | None = None
) -> tuple[Param, ...]:
    """Params from C type spellings, e.g. ("const float*", "int", "float4", "Params")."""
    return tuple(parse_param(i, t, structs) for i, t in enumerate(types))


def kernel_params(
    decl: KernelDecl, arguments: Sequence[str] = (), structs: Mapping[str, Any] | None = None
) -> tuple[Param, ...]:
    """The Params of a scanned kernel; for a template, of the instantiation whose template
    `arguments` are given (each template parameter replaced by its argument as a word)."""
    values = dict(zip(decl.template, arguments, strict=False))
    for name, default in zip(decl.template, decl.defaults, strict=True):
        if name not in values and default is not None:
            values[name] = default
    decls = list(decl.params)
    if values:
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, values)) + r")\b")
        decls = [pattern.sub(lambda m: values[m.group(1)], d) for d in decls]
    return parse_signature(decls, structs)


def kernels_in_source(
    source: str, structs: Mapping[str, Any] | None = None
) -> dict[str, tuple[Param, ...]]:
    """Every non-template `__global__` function of a source with its parameters, by qualified
    name; `structs`: the layouts of structs passed by value, as `Program(types=)` takes them.
    TypeError for a parameter type that is not known."""
    return {
        name: kernel_params(decl, (), structs)
        for name, decl in scan_kernels(source).items()
        if not decl.template
    }


# --- writing values --------------------------------------------------------------------------


def device_address(value: Any) -> int:
    """The device address of a pointer argument.

    Accepts hip-core buffers (anything with an int `ptr` and a `closed` flag), objects with
    `__cuda_array_interface__` (CuPy, torch on CUDA, Numba), objects with `data_ptr()`
    (torch), a `DevicePointer`, or None (a null pointer). A plain int is refused: it is too
    easy to pass a host address or a length by mistake; wrap it in DevicePointer.
    """
    ptr = getattr(value, "ptr", None)
    if type(ptr) is int:
        if getattr(value, "closed", False):
            raise TypeError("is closed")
        return ptr
    if value is None:
        return 0
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is not None:
        return int(interface["data"][0])
    data_ptr = getattr(value, "data_ptr", None)
    if callable(data_ptr):
        return int(data_ptr())
    raise TypeError(
        f"expects a device pointer (a buffer, view, DevicePointer), got {type(value).__name__}"
    )


@dataclass(frozen=True)
class DevicePointer:
    """A raw device address passed to a pointer parameter."""

    ptr: int
    closed: bool = False


def _half_bits(value: float) -> int:
    try:
        return int.from_bytes(struct.pack("<e", value), "little")
    except OverflowError:  # beyond half's range: infinity, as a C conversion gives
        return 0xFC00 if value < 0 else 0x7C00


def _bfloat16_bits(value: float) -> int:
    bits = int.from_bytes(struct.pack("<f", value), "little")
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return (bits >> 16) | 0x40  # NaN stays NaN (quiet)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF  # round to nearest even


def _float_value(value: Any) -> float:
    if type(value) is float:
        return value
    if isinstance(value, (bool, str, bytes)) or not hasattr(value, "__float__"):
        raise TypeError(f"expects a number, got {type(value).__name__}")
    return float(value)


def _half_value(value: Any) -> int:
    return _half_bits(_float_value(value))


def _bfloat16_value(value: Any) -> int:
    return _bfloat16_bits(_float_value(value))


#: What a pointer or floating-point parameter stores for a value (TypeError when none fits).
_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "pointer": device_address,
    "float": _float_value,
    "half": _half_value,
    "bfloat16": _bfloat16_value,
}


def value_writer(param: Param, slot: Any) -> Callable[[Any], None]:
    """A function storing a Python value into `slot` (a typed cffi pointer) as `param`'s type."""
    where = param.describe()

    def fail(error: Exception) -> TypeError:
        return TypeError(f"{where}: {error}")

    if param.kind == "int":

        def write_int(value: Any) -> None:
            if type(value) is not int:
                # numpy integers and other __index__ types are integers; a bool is a mistake.
                if isinstance(value, bool) or not hasattr(value, "__index__"):
                    raise fail(TypeError(f"expects an integer, got {type(value).__name__}"))
                value = value.__index__()
            try:
                slot[0] = value
            except OverflowError:
                raise fail(OverflowError(f"{value} does not fit in {param.storage}")) from None

        return write_int
    if param.kind == "bool":

        def write_bool(value: Any) -> None:
            if not isinstance(value, int) or value not in (0, 1):
                raise fail(TypeError(f"expects a bool, got {value!r}"))
            slot[0] = bool(value)

        return write_bool
    if param.kind == "vector":
        return _vector_writer(param, slot, fail)
    if param.kind == "struct":
        layout: StructLayout = param.layout

        def write_struct(value: Any) -> None:
            try:
                data = layout.pack(value)
            except TypeError as error:
                raise fail(error) from None
            slot[0 : len(data)] = data

        return write_struct
    convert = _CONVERTERS[param.kind]

    def write(value: Any) -> None:
        try:
            slot[0] = convert(value)
        except TypeError as error:
            raise fail(error) from None

    return write


_FLOATS = ("float", "double")


def _vector_writer(
    param: Param, slot: Any, fail: Callable[[Exception], TypeError]
) -> Callable[[Any], None]:
    """Writes a vector's components, each checked as its element type; an error names the
    parameter and the component ("parameter 1 (float3 v), component z: ...")."""
    size, kind = param.size // param.count, "float" if param.storage in _FLOATS else "int"
    element = Param(param.index, param.decl, param.storage, size, kind)
    skip = len(element.describe()) + 2  # the element writer's "parameter i (decl): " prefix
    writers = [
        (axis, value_writer(element, slot + i)) for i, axis in enumerate("xyzw"[: param.count])
    ]

    def write_vector(value: Any) -> None:
        try:
            components = vector_components(value, param.count)
        except TypeError as error:
            raise fail(error) from None
        for (axis, write), component in zip(writers, components, strict=True):
            try:
                write(component)
            except (TypeError, OverflowError) as error:
                message = f"{param.describe()}, component {axis}: {str(error)[skip:]}"
                raise type(error)(message) from None

    return write_vector
