"""The row kernels (layernorm, rmsnorm, softmax) against float64 numpy references.

Each row is handled by one block, in one of four ways (kernels/rows.h): in registers or
streamed, read in 16-byte vectors or element by element. The shapes and block sizes below
reach all four: with 100 threads 3 x 1000 stays in registers as vectors, 7 x 4097 (odd: no
vectors) and 2 x 8200 are streamed; with 993 threads every row fits in registers. Neither size
is a multiple of a warp, and 993 threads end in a one-lane warp on NVIDIA.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import KernelHarness

TYPES = ("f32", "f16", "bf16")
SHAPES = [(1, 1), (3, 1000), (7, 4097), (2, 8200)]
BLOCKS = [100, 993]
EPS = 1e-5


def layernorm_reference(
    x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The result, and the size of the terms behind it: f32 rounds x - mean at the scale of x
    (far from 0 here), and normalized * weight + bias can cancel."""
    x = x.astype(np.float64)
    mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + np.float64(np.float32(EPS)))
    y, magnitude = (x - mean) * rstd, np.abs(x) * rstd
    if weight is not None:
        y, magnitude = y * weight.astype(np.float64), magnitude * np.abs(weight.astype(np.float64))
    if bias is not None:
        y, magnitude = y + bias.astype(np.float64), magnitude + np.abs(bias.astype(np.float64))
    return y, magnitude


def rmsnorm_reference(x: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
    x = x.astype(np.float64)
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + np.float64(np.float32(EPS)))
    return np.asarray(y if weight is None else y * weight.astype(np.float64))


def softmax_reference(x: np.ndarray, scale: float, causal_rows: int) -> np.ndarray:
    rows, cols = x.shape
    scores = x.astype(np.float64) * np.float64(np.float32(scale))
    if causal_rows:
        last = np.arange(rows) % causal_rows + cols - causal_rows  # the last key a row sees
        scores[np.arange(cols)[None, :] > last[:, None]] = -np.inf
    top = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isinf(top), 0.0, top))
    total = e.sum(axis=-1, keepdims=True)
    return np.asarray(np.divide(e, total, out=np.zeros_like(e), where=total > 0))


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_layernorm(
    harness: KernelHarness, dtype: str, shape: tuple[int, int], block: int, affine: bool
) -> None:
    rows, cols = shape
    x = harness.random(shape, dtype, scale=2.0, shift=3.0)  # a mean far from 0
    weight = harness.random(cols, dtype) if affine else None
    bias = harness.random(cols, dtype) if affine else None
    dw = harness.upload(weight) if weight is not None else None  # null: no affine transform
    db = harness.upload(bias) if bias is not None else None
    dx, out = harness.upload(x), harness.output(shape, dtype)
    kernel = harness.kernel("norms.hip", f"layernorm_{dtype}")
    kernel.launch(rows, block, dx, dw, db, out.buffer, rows, cols, EPS)
    expected, magnitude = layernorm_reference(x, weight, bias)
    harness.assert_close(out.read(), expected, dtype, magnitude)


@pytest.mark.parametrize("weighted", [True, False], ids=["weight", "plain"])
@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_rmsnorm(
    harness: KernelHarness, dtype: str, shape: tuple[int, int], block: int, weighted: bool
) -> None:
    rows, cols = shape
    x = harness.random(shape, dtype, scale=2.0, shift=0.5)
    weight = harness.random(cols, dtype) if weighted else None
    dw = harness.upload(weight) if weight is not None else None
    dx, out = harness.upload(x), harness.output(shape, dtype)
    kernel = harness.kernel("norms.hip", f"rmsnorm_{dtype}")
    kernel.launch(rows, block, dx, dw, out.buffer, rows, cols, EPS)
    harness.assert_close(out.read(), rmsnorm_reference(x, weight), dtype)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_softmax(
    harness: KernelHarness, dtype: str, shape: tuple[int, int], block: int, causal: bool
) -> None:
    rows, cols = shape
    # Causal rows come in stacks of q queries (e.g. 7 rows = q 4 + 3 of the next head).
    causal_rows = (rows + 1) // 2 if causal else 0
    scale = float(harness.rng.uniform(0.1, 1.0))
    x = harness.random(shape, dtype, scale=4.0)
    dx, out = harness.upload(x), harness.output(shape, dtype)
    kernel = harness.kernel("softmax.hip", f"softmax_{dtype}")
    kernel.launch(rows, block, dx, out.buffer, rows, cols, scale, causal_rows)
    got = out.read()
    harness.assert_close(got, softmax_reference(x, scale, causal_rows), dtype)
    # Every row sees at least one key here, so every row sums to 1 (up to the output rounding).
    rtol = harness.TOLERANCE[dtype][0]
    np.testing.assert_allclose(got.astype(np.float64).sum(axis=-1), 1.0, rtol=rtol)


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("cols", [3, 4099])
def test_softmax_row_that_sees_no_key_is_zero(
    harness: KernelHarness, block: int, cols: int
) -> None:
    # q = cols + 2 queries over cols keys: the first two queries see nothing.
    rows = causal_rows = cols + 2
    x = harness.random((rows, cols), "f32")
    dx, out = harness.upload(x), harness.output((rows, cols), "f32")
    harness.kernel("softmax.hip", "softmax_f32").launch(
        rows, block, dx, out.buffer, rows, cols, 1.0, causal_rows
    )
    got = out.read()
    assert (got[:2] == 0).all()
    assert got[2, 0] == 1.0 and (got[2, 1:] == 0).all()
    harness.assert_close(got, softmax_reference(x, 1.0, causal_rows), "f32")


@pytest.mark.parametrize("block", [64, 128])  # streamed, in registers
@pytest.mark.parametrize("dtype", TYPES)
def test_norms_and_softmax_work_in_place(harness: KernelHarness, dtype: str, block: int) -> None:
    rows, cols = 5, 3000
    x = harness.random((rows, cols), dtype, scale=2.0)
    weight, bias = harness.random(cols, dtype), harness.random(cols, dtype)
    dw, db = harness.upload(weight), harness.upload(bias)
    cases = [
        ("layernorm", (dw, db), layernorm_reference(x, weight, bias)[0]),
        ("rmsnorm", (dw,), rmsnorm_reference(x, weight)),
        ("softmax", (), softmax_reference(x, 1.0, 0)),
    ]
    for name, params, expected in cases:
        data = harness.upload(x)
        kernel = harness.kernel(
            "softmax.hip" if name == "softmax" else "norms.hip", f"{name}_{dtype}"
        )
        tail = (rows, cols, 1.0, 0) if name == "softmax" else (rows, cols, EPS)
        kernel.launch(rows, block, data, *params, data, *tail)
        harness.device.synchronize()
        got = np.empty(rows * cols, x.dtype)
        data.copy_to(got.view(np.uint8))
        harness.assert_close(got.reshape(rows, cols), expected, dtype)
