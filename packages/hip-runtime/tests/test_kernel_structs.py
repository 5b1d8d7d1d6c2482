"""The structs kernels take by value (hip_runtime.libraries.kernel_structs) are laid out on the
host as the device compiler lays them out: a probe kernel compiled with each kernel source
writes sizeof, alignof and every field's offset and size, and they must equal the numpy
dtype's (a field shifted by padding the host did not expect would be read as garbage). Plus
StructValues' bytes against numpy's own packing, and the entry points hip-core reads."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import Device, Program
from hip_runtime.libraries import kernel_sources
from hip_runtime.libraries.kernel_structs import COPY_ARGS, INDEX_ARGS, STRUCTS, StructValues

CASES = [(source, name) for source, structs in STRUCTS.items() for name in structs]


def probe(type_name: str, dtype: np.dtype[Any]) -> str:
    """A kernel writing [sizeof, alignof, then (offset, size) of each field] of hipk::`type_name`
    (offsets by address arithmetic on a local: portable to every compiler, no offsetof)."""
    lines = [
        'extern "C" __global__ void probe_layout(long long* out) {',
        f"    hipk::{type_name} s;",
        "    const char* at = reinterpret_cast<const char*>(&s);",
        f"    out[0] = (long long)sizeof(hipk::{type_name});",
        f"    out[1] = (long long)alignof(hipk::{type_name});",
    ]
    for k, field in enumerate(dtype.names or ()):
        lines.append(
            f"    out[{2 + 2 * k}] = (long long)(reinterpret_cast<const char*>(&s.{field}) - at);"
        )
        lines.append(f"    out[{3 + 2 * k}] = (long long)sizeof(s.{field});")
    return "\n".join([*lines, "}", ""])


def host_layout(dtype: np.dtype[Any]) -> list[int]:
    """What the probe must write for `dtype`: its size, alignment and fields' offsets and sizes."""
    align = max(dtype.fields[f][0].base.alignment for f in dtype.names or ())
    out = [dtype.itemsize, align]
    for field in dtype.names or ():
        sub, offset = dtype.fields[field][:2]
        out += [offset, sub.itemsize]
    return out


@pytest.mark.parametrize(("source", "type_name"), CASES)
def test_host_layouts_are_the_devices(
    device: Device, program_cache: Path, source: str, type_name: str
) -> None:
    dtype = STRUCTS[source][type_name]
    text = kernel_sources.sources()[source] + "\n" + probe(type_name, dtype)
    program = Program(text, name=f"probe_{source}", headers=kernel_sources.headers(),
                      types=STRUCTS[source])  # fmt: skip
    module = program.load(device)
    expected = host_layout(dtype)
    out = device.allocate(8 * len(expected))
    out.fill(0xFF)
    module.get_kernel("probe_layout").launch(1, 1, out)
    device.synchronize()
    got = np.empty(len(expected), np.int64)
    out.copy_to(got)
    assert got.tolist() == expected


def test_the_padding_after_an_int_is_where_c_puts_it() -> None:
    """CopyArgs' arrays of 8-byte integers follow an int: 4 bytes of padding before them."""
    assert COPY_ARGS.fields["rank"][1] == 8 and COPY_ARGS.fields["size"][1] == 16
    assert INDEX_ARGS.fields["wide"][1] == 12 and INDEX_ARGS.fields["size_along"][1] == 16


@pytest.mark.parametrize("dtype", [COPY_ARGS, INDEX_ARGS], ids=["copy", "index"])
def test_struct_values_pack_as_numpy_does(dtype: np.dtype[Any]) -> None:
    rng = np.random.default_rng(7)
    reference = np.zeros((), dtype)
    flat: list[int] = []
    for field in dtype.names or ():
        sub = dtype.fields[field][0]
        values = rng.integers(-(2**40), 2**40, sub.shape or ()).astype(sub.base)
        reference[field] = values
        flat += np.atleast_1d(values).tolist()
    values = StructValues(dtype)
    made = values(*flat)
    assert made.dtype == dtype and made.size == 1 and not made.flags.writeable
    assert made.tobytes() == reference.tobytes()
    assert values(*flat) is made  # the same fields: the same array again
    with pytest.raises(struct.error):  # a field missing
        values(*flat[:-1])


@pytest.mark.parametrize(
    ("source", "kernel", "type_name"),
    [("copy.hip", "copy_u16", "CopyArgs"), ("indexing.hip", "gather_u32", "IndexArgs"),
     ("indexing.hip", "scatter_add_bf16", "IndexArgs")],
)  # fmt: skip
def test_entry_points_take_the_struct_by_value(
    kernel_module: Any, source: str, kernel: str, type_name: str
) -> None:
    params = kernel_module(source).get_kernel(kernel).params
    last = params[-1]
    assert (last.kind, last.size) == ("struct", STRUCTS[source][type_name].itemsize)
    assert [p.kind for p in params[:-1]] == ["pointer"] * (len(params) - 1)
