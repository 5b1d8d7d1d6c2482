"""Many narrow rows several to a warp (kernels/rows.h's run_narrow_rows, the layernorm_narrow
and add_layernorm_narrow kernels, OpsBase._narrow_row_launch): when the host takes them, and
their rows against hip_runtime.testing's float64 references — row counts that leave the last
warp and block partly empty, rows from one vector to the longest a warp holds, rows whose
statistics rescale next to ordinary ones in the same warp, a slice of columns, and the
kernel's own way with rows it cannot read as vectors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend, testing
from hip_runtime.ops.norms import narrow_rows_per_warp


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def narrow_rows(backend: HipBackend, op: str, itemsize: int) -> int:
    """Rows enough for narrow launches of full blocks, and 3 more: a last warp partly empty."""
    warps = 256 // backend.device.properties.warp_size
    multiprocessors = backend.device.properties.multiprocessors
    return narrow_rows_per_warp(op, itemsize) * warps * 2 * multiprocessors + 3


def launch_of(backend: HipBackend, op: str, x: np.ndarray, strides: tuple[int, int, int]) -> object:
    """The narrow launch the host picks for x (aligned operands), or None."""
    rows, cols = x.shape
    dx = backend.from_numpy(x)
    rows_per_warp = narrow_rows_per_warp(op, x.dtype.itemsize)
    return backend._narrow_row_launch(rows, cols, x.dtype.itemsize, rows_per_warp, (dx,), strides)


def test_many_narrow_aligned_rows_take_the_narrow_kernels(backend: HipBackend) -> None:
    warp = backend.device.properties.warp_size
    rows = narrow_rows(backend, "layernorm", 2)
    x = np.zeros((rows, 384), testing.DTYPES["bf16"])
    grid, block = launch_of(backend, "layernorm", x, (1, 384, 0))  # type: ignore[misc]
    assert block == (warp, 256 // warp)
    assert grid * block[1] * 4 >= rows > (grid - 1) * block[1] * 4
    longest = np.zeros((rows, 16 * warp), np.float32)
    assert launch_of(backend, "layernorm", longest, (1, 16 * warp, 0)) is not None
    few = backend.device.properties.multiprocessors  # (2 warps a multiprocessor needed)
    for shape, strides in (
        ((rows, 16 * warp + 4), (1, 16 * warp + 4, 0)),  # longer than 16 elements a lane
        ((rows, 102), (1, 102, 0)),  # not whole 16-byte vectors
        ((few, 384), (1, 384, 0)),  # too few rows to fill the device
        ((rows, 384), (1, 386, 0)),  # rows 386 elements apart: not on 16-byte boundaries
    ):
        assert launch_of(backend, "layernorm", np.zeros(shape, np.float32), strides) is None


@pytest.mark.parametrize("cols", ["one vector", 384, "longest"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("op", ["layernorm", "add_layernorm"])
def test_narrow_rows_match_the_reference(
    backend: HipBackend, op: str, dtype: str, cols: int | str, kernel_launches: list[str]
) -> None:
    itemsize = 4 if dtype == "f32" else 2
    width = {"one vector": 16 // itemsize, "longest": 16 * backend.device.properties.warp_size}
    n = width.get(cols, cols)  # type: ignore[call-overload]
    rows = narrow_rows(backend, op, itemsize)
    rng = np.random.default_rng(n + rows)
    x = testing.random(rng, (rows, n), dtype, scale=2.0, shift=1.0)
    if dtype != "f16":  # (f16's squares never leave f32's range)
        x[5] *= np.float32(1e25)  # a warp rescales one of its rows, not the others
        x[rows - 2] *= np.float32(1e-30)  # (a tiny row: its eps keeps it from rescaling)
    assert launch_of(backend, op, x, (1, n, 0)) is not None
    weight, bias = testing.random(rng, n, dtype), testing.random(rng, n, dtype)
    w, b = backend.from_numpy(weight), backend.from_numpy(bias)
    if op == "layernorm":
        expected = testing.layernorm(x, weight, bias)
        run = lambda dx, **out: backend.layernorm(dx, w, b, **out)  # noqa: E731
    else:
        residual = testing.random(rng, (rows, n), dtype)
        input_bias = testing.random(rng, n, dtype)
        exact = x.astype(np.float64) + residual.astype(np.float64) + input_bias.astype(np.float64)
        expected = testing.layernorm(exact, weight, bias)
        dr, db = backend.from_numpy(residual), backend.from_numpy(input_bias)
        run = lambda dx, **out: backend.layernorm(  # noqa: E731
            dx, w, b, residual=dr, input_bias=db, **out
        )
    if op == "add_layernorm" and dtype != "f16":
        # The huge row rescales through memory, its sum rounded to the dtype (add_norm.h).
        # (The tiny one does not: the residual's elements dominate its sums.)
        rounded = (x[5].astype(np.float32) + residual[5] + input_bias).astype(x.dtype)
        row = testing.layernorm(rounded[None], weight, bias)
        expected.value[5], expected.magnitude[5] = row.value[0], row.magnitude[0]
    dx = backend.from_numpy(x)
    kernel_launches.clear()
    got = testing.call_twice(run, dx)  # the checked call, its plan, out=
    testing.assert_close(got, expected, dtype)
    assert kernel_launches == [f"{op}_narrow_{dtype}"] * 2  # (the checked calls: first, out=)


def test_a_slice_of_columns(backend: HipBackend, kernel_launches: list[str]) -> None:
    """Rows 400 elements apart, 384 of each: narrow from an aligned start, not from another."""
    rows = narrow_rows(backend, "layernorm", 2)
    rng = np.random.default_rng(2)
    wide = testing.random(rng, (rows, 400), "bf16")
    assert launch_of(backend, "layernorm", wide[:, :384], (1, 400, 0)) is not None
    dwide = backend.from_numpy(wide)
    kernel_launches.clear()
    for start in (8, 4):  # 16 bytes in: narrow; 8 bytes in: the other kernel's scalar rows
        got = backend.layernorm(dwide[:, start : start + 384]).to_numpy()
        testing.assert_close(got, testing.layernorm(wide[:, start : start + 384]), "bf16")
    assert kernel_launches == ["layernorm_narrow_bf16", "layernorm_bf16"]


@pytest.mark.parametrize("cols", [24, 1000])  # scalar rows held in registers, streamed ones
@pytest.mark.parametrize(("op", "dtype"), [("layernorm", "f32"), ("add_layernorm", "bf16")])
def test_the_narrow_kernel_takes_rows_it_cannot_read_as_vectors(
    backend: HipBackend, op: str, dtype: str, cols: int
) -> None:
    """Launched on rows that start off 16-byte boundaries (the host never does that), the
    kernel takes each warp's rows one by one, as scalars."""
    warp = backend.device.properties.warp_size
    per_warp = narrow_rows_per_warp(op, testing.DTYPES[dtype].itemsize)
    rows = 2 * 2 * per_warp * 2 + 1  # 2 blocks of 2 warps, and a row of a third block
    rng = np.random.default_rng(cols)
    x = testing.random(rng, (rows, cols), dtype)
    flat = backend.from_numpy(np.concatenate([np.zeros(1, x.dtype), x.reshape(-1)]))
    dx = flat[1:]  # one element past an aligned start
    y = backend.empty((rows, cols), x.dtype)
    kernel = backend._kernel("norms.hip", f"{op}_narrow_{dtype}")
    if op == "layernorm":
        operands: tuple[object, ...] = (dx, None, None)
        expected = testing.layernorm(x)
    else:
        residual = testing.random(rng, (rows, cols), dtype)
        operands = (dx, backend.from_numpy(residual), None, None, None)
        total = x.astype(np.float32) + residual.astype(np.float32)
        if cols == 1000:  # streamed rows sum into y first, rounded to the dtype (add_norm.h)
            total = total.astype(x.dtype)
        expected = testing.layernorm(total)
    kernel.launch(-(-rows // (2 * per_warp)), (warp, 2), *operands, y, rows, cols, 1e-5, 1,
                  cols, 0, stream=backend.stream)  # fmt: skip
    testing.assert_close(y.to_numpy(), expected, dtype)
