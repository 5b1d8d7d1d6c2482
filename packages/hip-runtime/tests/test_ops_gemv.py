"""The GEMV kernel (kernels/gemv.hip, hip_runtime.ops.gemv): linear with the residual fused,
rmsnorm_linear and rmsnorm_swiglu, against float64 references and the unfused ops.

On the cpu platform the kernel is off by default (`gemv_rows=0`); these tests turn it on, so
every path of the kernel (row tiles 1-8 and the 16-row tile's portable path, the fusions,
columns that end inside a block) runs here, and with HIP_FFI_CPU_WARP_SIZE=64 under 64-lane
warps; on NVIDIA GPUs the 16-row tile's tensor-core path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend, testing
from hip_runtime.ops import gemv as gemv_module
from hip_runtime.ops.gemv import GEMV_MAX_ROWS, gemv_slices, gemv_tile
from hip_runtime.testing import Reference

DTYPES = ["f32", "f16", "bf16"]
EPS = 1e-5


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device, gemv_rows=GEMV_MAX_ROWS) as backend:
        yield backend


@pytest.fixture(scope="module")
def unfused(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device, gemv_rows=0) as backend:
        yield backend


def _normed(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + EPS) * g.astype(np.float64)


def _product(h: np.ndarray, w: np.ndarray) -> Reference:
    w64 = w.astype(np.float64)
    return Reference(h @ w64.T, np.abs(h) @ np.abs(w64).T)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_linear_with_residual_in_place_and_apart(
    backend: HipBackend, gemv_launches: list[str], dtype: str, rows: int
) -> None:
    rng = np.random.default_rng(rows)
    k, n = 96, 37  # (37 columns: the last block's teams run past the end)
    x = testing.random(rng, (rows, k), dtype)
    w = testing.random(rng, (n, k), dtype, scale=0.2)
    r = testing.random(rng, (rows, n), dtype)
    expected = _product(x.astype(np.float64), w)
    with_residual = Reference(expected.value + r.astype(np.float64), expected.magnitude + abs(r))
    x_d, w_d = backend.from_numpy(x), backend.from_numpy(w)
    testing.assert_close(backend.linear(x_d, w_d).to_numpy(), expected, dtype)
    apart = backend.linear(x_d, w_d, residual=backend.from_numpy(r))
    testing.assert_close(apart.to_numpy(), with_residual, dtype)
    for _ in range(2):  # the second call takes the plan
        in_place = backend.from_numpy(r)
        backend.linear(x_d, w_d, residual=in_place, out=in_place)
        testing.assert_close(in_place.to_numpy(), with_residual, dtype)
    tile = gemv_tile(rows, np.dtype(testing.DTYPES[dtype]).itemsize)
    assert gemv_launches and set(gemv_launches) == {f"gemv_r{tile}_{dtype}"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 2, 5])
def test_rmsnorm_linear_matches_the_reference_and_the_unfused_ops(
    backend: HipBackend, unfused: HipBackend, dtype: str, rows: int
) -> None:
    rng = np.random.default_rng(10 + rows)
    k, n = 256, 24
    x = testing.random(rng, (rows, 1, k), dtype, scale=3.0)
    g = testing.random(rng, (k,), dtype, shift=1.0)
    w = testing.random(rng, (n, k), dtype, scale=0.1)
    r = testing.random(rng, (rows, 1, n), dtype)
    expected = _product(_normed(x, g), w)
    for ops in (backend, unfused):
        args = (ops.from_numpy(x), ops.from_numpy(g), ops.from_numpy(w))
        got = testing.call_twice(ops.rmsnorm_linear, *args, eps=EPS)
        # unfused, the normed row is rounded to the dtype first: twice the magnitude allowed
        testing.assert_close(got, expected, dtype, magnitude=2 * expected.magnitude)
        residual = ops.from_numpy(r)
        ops.rmsnorm_linear(*args, eps=EPS, residual=residual, out=residual)
        total = Reference(expected.value + r.astype(np.float64), 2 * expected.magnitude + abs(r))
        testing.assert_close(residual.to_numpy(), total, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 4, 8, 11, 17])
def test_rmsnorm_swiglu_matches_the_reference(
    backend: HipBackend, gemv_launches: list[str], dtype: str, rows: int
) -> None:
    """11 rows of f32 and 17 of any type: more than the kernel takes, so the unfused ops give
    the result."""
    rng = np.random.default_rng(20 + rows)
    k, inter = 128, 40
    x = testing.random(rng, (rows, k), dtype)
    g = testing.random(rng, (k,), dtype, shift=1.0)
    w = testing.random(rng, (2 * inter, k), dtype, scale=0.2)
    both = _product(_normed(x, g), w)
    gate, up = both.value[:, :inter], both.value[:, inter:]
    magnitude = both.magnitude[:, :inter] * both.magnitude[:, inter:] + np.abs(gate * up)
    expected = Reference(testing.swiglu(gate, up), magnitude)
    got = testing.call_twice(
        backend.rmsnorm_swiglu,
        backend.from_numpy(x), backend.from_numpy(g), backend.from_numpy(w), eps=EPS,
    )  # fmt: skip
    testing.assert_close(got, expected, dtype, magnitude=2 * magnitude)
    assert bool(gemv_launches) == (
        gemv_tile(rows, np.dtype(testing.DTYPES[dtype]).itemsize) is not None
    )


def _check_every_fusion(
    backend: HipBackend, rng: np.random.Generator, shape: tuple[int, int, int], dtype: str,
    *, w_scale: float, rounded: float = 1.0,
) -> None:  # fmt: skip
    """linear with the residual in place, rmsnorm_linear and rmsnorm_swiglu of x [rows, k]
    against float64 references, n output columns; `rounded`: the magnitude's factor for the
    normed products (2 where x times the norm weight is rounded to the dtype)."""
    rows, k, n = shape
    x = testing.random(rng, (rows, k), dtype, scale=2.0)
    g = testing.random(rng, (k,), dtype, shift=1.0)
    w = testing.random(rng, (2 * n, k), dtype, scale=w_scale)
    r = testing.random(rng, (rows, n), dtype)
    x_d, g_d, w_d = backend.from_numpy(x), backend.from_numpy(g), backend.from_numpy(w)
    plain = _product(x.astype(np.float64), w[:n])
    residual = backend.from_numpy(r)
    backend.linear(x_d, w_d[:n], residual=residual, out=residual)
    total = Reference(plain.value + r.astype(np.float64), plain.magnitude + abs(r))
    testing.assert_close(residual.to_numpy(), total, dtype)
    normed = _product(_normed(x, g), w)
    got = testing.call_twice(backend.rmsnorm_linear, x_d, g_d, w_d[:n], eps=EPS)
    testing.assert_close(got, Reference(normed.value[:, :n], rounded * normed.magnitude[:, :n]),
                         dtype)  # fmt: skip
    gate, up = normed.value[:, :n], normed.value[:, n:]
    magnitude = normed.magnitude[:, :n] * normed.magnitude[:, n:] + np.abs(gate * up)
    got = testing.call_twice(backend.rmsnorm_swiglu, x_d, g_d, w_d, eps=EPS)
    testing.assert_close(got, Reference(testing.swiglu(gate, up), rounded * magnitude), dtype)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize(("k", "rows"), [(2048, 1), (8192, 1), (4096, 3)])
def test_long_rows_split_over_several_teams(
    backend: HipBackend, dtype: str, k: int, rows: int
) -> None:
    """Few columns of long rows: the teams of a block share a column group (`slices`), their
    sums meeting in shared memory, with every fusion (3 rows of bf16: the 16-row tile)."""
    n, itemsize = 20, np.dtype(testing.DTYPES[dtype]).itemsize
    if gemv_tile(rows, itemsize) != 16:  # (the 16-row tile always has 8 teams a tile)
        processors = backend.device.properties.multiprocessors
        columns = 1 if rows == 1 else 4  # (the row tile 4 of rows = 3: four columns a team)
        assert gemv_slices(n, k, itemsize, columns, processors) > 1
    rng = np.random.default_rng(k + rows)
    _check_every_fusion(backend, rng, (rows, k, n), dtype, w_scale=0.05)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("rows", [3, 8, 9, 16])
@pytest.mark.parametrize("slices", [1, 2, 8])
def test_the_16_row_tile_with_every_fusion(
    backend: HipBackend, gemv_launches: list[str], monkeypatch: pytest.MonkeyPatch, dtype: str,
    rows: int, slices: int,
) -> None:  # fmt: skip
    """3-16 rows of a 16-bit x (kernels/gemv_mma.h): 16-column tiles shared by 1, 2 or 8
    teams (the op uses 8; the kernel takes any), columns that end inside a tile, rows of k
    that end inside a team's step (200: 6 whole steps of 32 and a quarter), x's second 8 rows
    used or not. x times the norm weight is rounded to the dtype for the tensor cores."""
    monkeypatch.setattr(gemv_module, "TILE_SLICES", slices)
    rng = np.random.default_rng(rows * 10 + slices)
    n = 37 + slices  # (a distinct shape a slices: launch plans keep theirs)
    _check_every_fusion(backend, rng, (rows, 200, n), dtype, w_scale=0.1, rounded=2.0)
    # (f16's normed products run rmsnorm, then the plain tile: see the next test)
    fusions = {"gemv_r16"} if dtype == "f16" else {"gemv_r16", "gemv_norm_r16", "gemv_swiglu_r16"}
    assert set(gemv_launches) == {f"{name}_{dtype}" for name in fusions}


def test_f16_normed_products_whose_x_times_norm_leaves_f16_stay_finite(
    backend: HipBackend, gemv_launches: list[str]
) -> None:
    """x times the norm weight (300 x 300) is past f16's largest value while the normalized
    row (~300) is not: the 16-row tile would round that product to f16 for the tensor cores,
    so f16's normed products from 3 rows run rmsnorm and the plain tile instead."""
    rng = np.random.default_rng(7)
    x = (300 * (1 + 0.1 * rng.standard_normal((4, 64)))).astype(np.float16)
    g = np.full(64, 300, np.float16)
    w = testing.random(rng, (2 * 24, 64), "f16", scale=0.01)
    x_d, g_d, w_d = backend.from_numpy(x), backend.from_numpy(g), backend.from_numpy(w)
    normed = _product(_normed(x, g), w)
    got = backend.rmsnorm_linear(x_d, g_d, w_d[:24], eps=EPS).to_numpy()
    assert np.isfinite(got).all()
    testing.assert_close(got, Reference(normed.value[:, :24], 2 * normed.magnitude[:, :24]), "f16")
    gate, up = normed.value[:, :24], normed.value[:, 24:]
    magnitude = normed.magnitude[:, :24] * normed.magnitude[:, 24:] + np.abs(gate * up)
    got = backend.rmsnorm_swiglu(x_d, g_d, w_d, eps=EPS).to_numpy()
    assert np.isfinite(got).all()
    testing.assert_close(got, Reference(testing.swiglu(gate, up), 2 * magnitude), "f16")
    assert set(gemv_launches) == {"gemv_r16_f16"}


def test_calls_the_kernel_does_not_take_run_unfused(
    backend: HipBackend, gemv_launches: list[str]
) -> None:
    """A strided x, a bias, rows of a width that is no whole 16-byte run: BLAS as before."""
    rng = np.random.default_rng(3)
    x = testing.random(rng, (2, 64), "f32")
    w = testing.random(rng, (8, 64), "f32")
    b = testing.random(rng, (8,), "f32")
    x_d, w_d = backend.from_numpy(x), backend.from_numpy(w)
    testing.assert_close(backend.linear(x_d, w_d, backend.from_numpy(b)).to_numpy(),
                         testing.linear(x, w, b), "f32")  # fmt: skip
    testing.assert_close(backend.linear(x_d[:, :60], w_d[:, :60]).to_numpy(),
                         testing.linear(x[:, :60], w[:, :60]), "f32")  # fmt: skip
    odd = testing.random(rng, (2, 63), "f32")
    testing.assert_close(
        backend.linear(backend.from_numpy(odd), backend.from_numpy(w[:, :63].copy())).to_numpy(),
        testing.linear(odd, w[:, :63]), "f32",
    )  # fmt: skip
    assert gemv_launches == []


def test_bad_arguments_raise_before_any_launch(
    backend: HipBackend, gemv_launches: list[str]
) -> None:
    x = backend.from_numpy(np.ones((1, 64), np.float32))
    g = backend.from_numpy(np.ones(64, np.float32))
    w = backend.from_numpy(np.ones((6, 64), np.float32))
    with pytest.raises(TypeError, match="eps must be a real number"):
        backend.rmsnorm_linear(x, g, w, eps="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="norm_weight has shape"):
        backend.rmsnorm_linear(x, w, w)
    with pytest.raises(ValueError, match="expected \\[out, 64\\]"):
        backend.rmsnorm_linear(x, g, backend.from_numpy(np.ones((6, 32), np.float32)))
    with pytest.raises(ValueError, match="not 2 · inter"):
        backend.rmsnorm_swiglu(x, g, backend.from_numpy(np.ones((7, 64), np.float32)))
    with pytest.raises(ValueError, match="residual has shape"):
        backend.rmsnorm_linear(x, g, w, residual=x)
    with pytest.raises(ValueError, match="gemv_rows"):
        HipBackend(backend.device, gemv_rows=17)
    assert gemv_launches == []
