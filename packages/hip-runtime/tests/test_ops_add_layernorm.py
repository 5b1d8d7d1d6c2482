"""layernorm(x, weight, bias, residual=, input_bias=): LayerNorm(x + residual + input_bias) in
one launch (kernels/add_norm.h), against hip_runtime.testing's float64 reference, for every
path of the row kernels: stacked narrow rows, rows a block per row in registers, scalar rows
(columns not a multiple of 16 bytes), streamed rows (more than 32 × the block limit elements
as vectors, more than 8 × it as scalars), rows whose statistics rescale; in place (out = x,
out = residual), through plans, from a slice of columns; and the errors.

The reference is the layernorm of the exact sum where the kernel keeps the f32 sum in
registers, and of the sum rounded to the dtype where it goes through memory (streamed rows,
rescaled ones): in 16-bit types that rounding moves a row's mean by more than the tolerance
of the exact sum's reference allows for a near-zero element (bf16, 383 columns: 3 ulps).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import ClosedError, Device
from hip_runtime import HipBackend, testing

#: (rows, cols), rows None for enough rows to stack (`shape_of`): the path each takes with
#: 1024-thread blocks and the host's f32 geometry (32 elements a thread) is checked in
#: `test_the_shapes_take_the_paths_they_name`.
SHAPES = {
    "stacked vectors": (None, 384),  # 2-D blocks of 8 rows, each row a warp's registers
    "stacked scalars": (None, 383),  # 2-D blocks; 383 > 8 x 32: each part streams (wave64: not)
    "scalar registers": (3, 383),  # a block of 64 threads a row, 8 floats each
    "vector registers": (3, 4096),  # a block of 128 threads a row
    "streamed vectors": (2, 40000),  # past 32 x 1024
    "streamed scalars": (2, 20001),  # past 8 x 1024
}
#: Which addends a call passes: both, the residual only, the product's bias only.
ADDENDS = {"both": (True, True), "residual": (True, False), "input_bias": (False, True)}


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def reference(
    x: np.ndarray,
    residual: Any,
    input_bias: Any,
    weight: Any,
    bias: Any,
    eps: float = 1e-5,
    *,
    rounded: bool = False,
) -> testing.Reference:
    """The float64 layernorm of x + residual + input_bias: the exact sum, or (`rounded`) the
    sum in f32, left to right, rounded to x's dtype (as the kernel writes it to memory)."""
    v = x.astype(np.float64 if not rounded else np.float32)
    for addend in (residual, input_bias):
        if addend is not None:
            v = v + addend.astype(v.dtype)
    return testing.layernorm(v.astype(x.dtype) if rounded else v, weight, bias, eps=eps)


def assert_rows_close_to_either(
    got: np.ndarray, first: testing.Reference, second: testing.Reference, dtype: str
) -> None:
    """Each row of `got` within tolerance of that row of `first` or of `second`."""
    for r in range(got.shape[0]):
        one, other = (testing.Reference(e.value[r], e.magnitude[r]) for e in (first, second))
        try:
            testing.assert_close(got[r], one, dtype)
        except testing.Mismatch:
            testing.assert_close(got[r], other, dtype)


def shape_of(backend: HipBackend, shape: str) -> tuple[int, int]:
    """SHAPES[shape] on this device: a stacked shape's rows fill 8-row blocks, 4 to a
    multiprocessor, twice, and 5 rows more (a last block partly empty)."""
    rows, cols = SHAPES[shape]
    return rows or 8 * 4 * backend.device.properties.multiprocessors * 2 + 5, cols


def streams(backend: HipBackend, shape: str) -> bool:
    """Whether the kernel streams the rows of SHAPES[shape] (rows.h's run_rows, with the
    host's f32 geometry): their sums then go through memory, rounded to the dtype."""
    rows, cols = shape_of(backend, shape)
    _, block = backend._row_launch(rows, cols, 4)
    threads = block[0] if isinstance(block, tuple) else block
    vectors = cols % 8 == 0  # 16-byte vectors in every dtype (the tensors are aligned)
    return cols > (32 if vectors else 8) * threads  # (FloatTile: 32 floats, scalars 8)


def test_the_shapes_take_the_paths_they_name(backend: HipBackend) -> None:
    if backend.device.properties.max_threads_per_block != 1024:
        pytest.fail("SHAPES assume 1024-thread blocks (the cpu platform's and NVIDIA's)")
    for name in SHAPES:
        _, block = backend._row_launch(*shape_of(backend, name), 4)
        assert isinstance(block, tuple) == name.startswith("stacked"), (name, block)
        if name != "stacked scalars":  # (streamed by 32-lane warps, held by 64-lane ones)
            assert streams(backend, name) == name.startswith("streamed"), name


@pytest.mark.parametrize("addends", list(ADDENDS))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_matches_the_reference(backend: HipBackend, dtype: str, shape: str, addends: str) -> None:
    rows, cols = shape_of(backend, shape)
    rng = np.random.default_rng(cols * 7 + rows)
    with_residual, with_bias = ADDENDS[addends]
    x = testing.random(rng, (rows, cols), dtype, scale=2.0, shift=1.0)  # a mean far from 0
    residual = testing.random(rng, (rows, cols), dtype, scale=3.0) if with_residual else None
    input_bias = testing.random(rng, cols, dtype, shift=-2.0) if with_bias else None
    weight, bias = testing.random(rng, cols, dtype), testing.random(rng, cols, dtype)
    expected = reference(x, residual, input_bias, weight, bias, rounded=streams(backend, shape))
    up = [None if a is None else backend.from_numpy(a) for a in (residual, input_bias)]
    w, b = backend.from_numpy(weight), backend.from_numpy(bias)
    got = testing.call_twice(
        lambda dx, **out: backend.layernorm(dx, w, b, residual=up[0], input_bias=up[1], **out),
        backend.from_numpy(x),
    )  # (the first call, then its plan into an out=: the same bits)
    testing.assert_close(got, expected, dtype)


#: (scale, shift) of each row's x and residual: sums whose f32 squares overflow, a huge mean,
#: tiny rows (eps 0: nothing hides them), and a usual row (rows.h's rescaling). A block that
#: rescales one of its rows rescales all (rows.h's `agreed`): each from its sum rounded to the
#: dtype, so rows are checked against either reference.
RANGES = ((1e20, 0.0), (1e19, 3e19), (1e-30, 0.0), (1.0, 0.0), (1e-30, 5e-30))


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("dtype", ["f32", "bf16"])  # (f16's squares never leave f32's range)
def test_rows_of_any_finite_magnitude(backend: HipBackend, dtype: str, shape: str) -> None:
    rows, cols = shape_of(backend, shape)
    rng = np.random.default_rng(cols)
    x = testing.random(rng, (rows, cols), dtype)
    residual = testing.random(rng, (rows, cols), dtype)
    for k, (scale, shift) in enumerate(RANGES):  # a huge row next to ordinary ones too
        r = (k * 37) % rows
        x[r] = testing.random(rng, cols, dtype, scale=scale, shift=shift)
        residual[r] = testing.random(rng, cols, dtype, scale=scale, shift=shift)
    weight, bias = testing.random(rng, cols, dtype), testing.random(rng, cols, dtype)
    exact = reference(x, residual, None, weight, bias, eps=0.0)
    rounded = reference(x, residual, None, weight, bias, eps=0.0, rounded=True)
    got = backend.layernorm(
        backend.from_numpy(x), backend.from_numpy(weight), backend.from_numpy(bias), eps=0.0,
        residual=backend.from_numpy(residual),
    )  # fmt: skip
    assert_rows_close_to_either(got.to_numpy(), exact, rounded, dtype)


@pytest.mark.parametrize("into", ["x", "residual"])
@pytest.mark.parametrize("shape", ["stacked vectors", "scalar registers", "streamed vectors"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_in_place(backend: HipBackend, dtype: str, shape: str, into: str) -> None:
    rows, cols = shape_of(backend, shape)
    rng = np.random.default_rng(rows + cols)
    x, residual = (testing.random(rng, (rows, cols), dtype) for _ in range(2))
    input_bias, weight = testing.random(rng, cols, dtype), testing.random(rng, cols, dtype)
    expected = reference(x, residual, input_bias, weight, None, rounded=streams(backend, shape))
    for _ in range(2):  # the checked call, then its plan
        dx, dr = backend.from_numpy(x), backend.from_numpy(residual)
        out = dx if into == "x" else dr
        got = backend.layernorm(dx, backend.from_numpy(weight), residual=dr,
                                input_bias=backend.from_numpy(input_bias), out=out)  # fmt: skip
        assert got is out
        testing.assert_close(got.to_numpy(), expected, dtype)
        other = dr if into == "x" else dx
        np.testing.assert_array_equal(other.to_numpy(), residual if into == "x" else x)


def test_x_a_slice_of_columns(backend: HipBackend) -> None:
    rng = np.random.default_rng(5)
    wide = testing.random(rng, (6, 400), "bf16")
    residual, input_bias = testing.random(rng, (6, 384), "bf16"), testing.random(rng, 384, "bf16")
    view = backend.from_numpy(wide)[:, 8:392]  # rows 400 apart, 16-byte aligned
    odd = backend.from_numpy(wide)[:, 3:387]  # not aligned: scalar rows
    dr, db = backend.from_numpy(residual), backend.from_numpy(input_bias)
    for dx, start in ((view, 8), (odd, 3)):
        expected = reference(wide[:, start : start + 384], residual, input_bias, None, None)
        for _ in range(2):
            got = backend.layernorm(dx, residual=dr, input_bias=db).to_numpy()
            testing.assert_close(got, expected, "bf16")


def test_bad_inputs_raise_before_any_launch(backend: HipBackend) -> None:
    f32, bf16 = np.float32, testing.DTYPES["bf16"]
    x = backend.from_numpy(np.ones((4, 8), f32))
    row = backend.from_numpy(np.ones(8, f32))
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"residual": backend.from_numpy(np.ones((4, 9), f32))}, ValueError,
         r"residual has shape \(4, 9\); expected \(4, 8\)"),
        ({"residual": backend.from_numpy(np.ones(8, f32))}, ValueError, "residual has shape"),
        ({"residual": backend.from_numpy(np.ones((4, 8), bf16))}, ValueError,
         "residual has dtype bfloat16; expected float32"),
        ({"residual": backend.from_numpy(np.ones((8, 4), f32)).T}, ValueError,
         "layernorm takes C-contiguous tensors; residual is a strided view"),
        ({"residual": np.ones((4, 8), f32)}, ValueError, "residual must be a DeviceTensor"),
        ({"input_bias": backend.from_numpy(np.ones(4, f32))}, ValueError,
         r"input_bias has shape \(4,\); expected \(8,\)"),
        ({"input_bias": backend.from_numpy(np.ones(8, bf16))}, ValueError, "input_bias has dtype"),
        ({"input_bias": row, "eps": "1"}, TypeError, "layernorm: eps must be a real number"),
        ({"input_bias": row, "out": row.reshape(1, 8).broadcast_to((4, 8))}, ValueError,
         "out is a strided view"),
        ({"input_bias": row, "out": backend.empty((4, 8), bf16)}, ValueError, "out is"),
    ]  # fmt: skip
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            backend.layernorm(x, **kwargs)
    # out may be x or the residual exactly; not a part of either, nor the other operands
    big = backend.from_numpy(np.ones((5, 8), f32))
    for _ in range(2):  # (the second time through the plan of these layouts)
        with pytest.raises(ValueError, match="out must be an input exactly"):
            backend.layernorm(big[1:], residual=big[:4], out=big[:4])
        with pytest.raises(ValueError, match="out must not overlap"):
            backend.layernorm(x.reshape(4, 8)[:1], input_bias=row, out=row.reshape(1, 8))
        with pytest.raises(ValueError, match="out must not overlap"):
            backend.layernorm(x[:1], row, residual=x[1:2], out=row.reshape(1, 8))
        backend.layernorm(big[1:], residual=big[1:], out=backend.empty((4, 8), f32))
        backend.layernorm(x[:1], row, residual=x[1:2], out=backend.empty((1, 8), f32))


def test_closed_memory_and_backend(device: Device, program_cache: Path) -> None:
    backend = HipBackend(device)
    x, residual = (backend.from_numpy(np.ones((4, 8), np.float32)) for _ in range(2))
    row = backend.from_numpy(np.ones(8, np.float32))
    for _ in range(2):  # a plan for these layouts: its fast path must see the closed memory
        backend.layernorm(x, residual=residual, input_bias=row)
    residual.buffer.close()
    with pytest.raises(ValueError, match="residual's memory is closed"):
        backend.layernorm(x, residual=residual, input_bias=row)
    row.buffer.close()
    with pytest.raises(ValueError, match="input_bias's memory is closed"):
        backend.layernorm(x, input_bias=row)
    backend.close()
    with pytest.raises(ClosedError):
        backend.layernorm(x, residual=x)
