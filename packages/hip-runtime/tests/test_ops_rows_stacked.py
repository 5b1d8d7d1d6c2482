"""Many narrow rows several to a block (kernels/rows.h's 2-D blocks, OpsBase._row_launch):
layernorm, rmsnorm and softmax against hip_runtime.testing's float64 references, with row
counts that leave the last block partly empty, rows the kernels read as vectors, as scalars
(columns not a multiple of 16 bytes) and streamed, and huge rows among ordinary ones (a part
that rescales while the others of its block do not)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend, testing


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def stacked_rows(backend: HipBackend, cols: int, itemsize: int) -> int:
    """A row count whose launch stacks rows (checked), one short of a whole last block."""
    multiprocessors = backend.device.properties.multiprocessors
    rows = 8 * 4 * multiprocessors * 2 + 5
    grid, block = backend._row_launch(rows, cols, itemsize)
    assert isinstance(block, tuple) and block[1] > 1 and grid < rows, (rows, cols, block)
    return rows


@pytest.mark.parametrize("cols", [384, 100, 24])  # vectors, scalars (100 % 8), one vector
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_stacked_rows_match_the_reference(
    backend: HipBackend, op: str, dtype: str, cols: int
) -> None:
    rng = np.random.default_rng(cols)
    rows = stacked_rows(backend, cols, 4 if dtype == "f32" else 2)
    x = testing.random(rng, (rows, cols), dtype)
    x[7] *= np.float32(1e25)  # squares past f32: this row's part rescales, its neighbours not
    x[rows - 1] *= np.float32(1e-30)
    if op == "layernorm":
        weight, bias = testing.random(rng, cols, dtype), testing.random(rng, cols, dtype)
        w, b = backend.from_numpy(weight), backend.from_numpy(bias)
        run = lambda dx: backend.layernorm(dx, w, b)  # noqa: E731
        expected = testing.layernorm(x, weight, bias)
    elif op == "rmsnorm":
        weight = testing.random(rng, cols, dtype)
        w = backend.from_numpy(weight)
        run = lambda dx: backend.rmsnorm(dx, w)  # noqa: E731
        expected = testing.rmsnorm(x, weight)
    else:
        x[7] = testing.random(rng, cols, dtype)  # (softmax: ordinary rows)
        x[rows - 1] = -np.inf  # a row that sees nothing: zeros
        run = lambda dx: backend.softmax(dx, scale=0.5)  # noqa: E731
        expected = testing.softmax(x, scale=0.5)
    dx = backend.from_numpy(x)
    for _ in range(2):  # the first call, then its plan (the same grid and block, kept)
        testing.assert_close(run(dx).to_numpy(), expected, dtype)


def test_few_or_wide_rows_keep_a_block_per_row(backend: HipBackend) -> None:
    """Stacking needs rows enough to keep the grid full, and rows a warp or two hold."""
    many = backend.device.properties.multiprocessors  # (fewer rows: `_few_rows_block`)
    assert backend._row_launch(many, 384, 4) == (many, backend._row_block(384, 4))
    wide = backend._row_launch(100_000, 16384, 4)
    assert wide == (100_000, backend._row_block(16384, 4))


def test_rows_too_few_to_fill_the_device_take_one_vector_a_thread(backend: HipBackend) -> None:
    """A decode step's rows (1-16 of a few thousand, fewer than the multiprocessors): one
    16-byte vector a thread, two rows a block (run_rows pairs them), within the device's
    block limit; more rows keep the usual block."""
    multiprocessors = backend.device.properties.multiprocessors
    if multiprocessors < 2:
        pytest.skip("one multiprocessor: no row count is below it")
    few = min(16, multiprocessors - 1)
    assert backend._row_launch(17, 2048, 2) == (17, backend._row_block(2048, 2))
    assert backend._row_launch(few, 2048, 2) == (few, 512)  # 256 bf16 vectors a row
    assert backend._row_launch(few, 2048, 4) == (few, min(1024, backend._max_block))
    for cols in (8, 64, 100_000):  # never narrower than the usual block
        assert backend._row_launch(few, cols, 4)[1] >= backend._row_block(cols, 4)
    x = testing.random(np.random.default_rng(3), (few, 2048), np.float32)
    weight = testing.random(np.random.default_rng(4), 2048, np.float32)
    got = backend.rmsnorm(backend.from_numpy(x), backend.from_numpy(weight))
    testing.assert_close(got.to_numpy(), testing.rmsnorm(x, weight), np.float32)


@pytest.mark.parametrize("cols", [2048, 2047])  # 16-byte vectors, scalars
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax", "add_layernorm"])
def test_few_rows_match_the_reference(backend: HipBackend, op: str, dtype: str, cols: int) -> None:
    """Every row kernel through the few-rows block (one 16-byte vector a thread)."""
    rng = np.random.default_rng(cols + len(op))
    rows = max(1, min(16, backend.device.properties.multiprocessors - 1))
    x = testing.random(rng, (rows, cols), dtype)
    dx = backend.from_numpy(x)
    weight, bias = testing.random(rng, cols, dtype), testing.random(rng, cols, dtype)
    w, b = backend.from_numpy(weight), backend.from_numpy(bias)
    if op == "layernorm":
        got, expected = backend.layernorm(dx, w, b), testing.layernorm(x, weight, bias)
    elif op == "rmsnorm":
        got, expected = backend.rmsnorm(dx, w), testing.rmsnorm(x, weight)
    elif op == "softmax":
        got, expected = backend.softmax(dx, scale=0.5), testing.softmax(x, scale=0.5)
    else:
        residual = testing.random(rng, (rows, cols), dtype)
        got = backend.layernorm(dx, w, b, residual=backend.from_numpy(residual))
        total = x.astype(np.float64) + residual.astype(np.float64)
        expected = testing.layernorm(total, weight, bias)
    testing.assert_close(got.to_numpy(), expected, dtype)
