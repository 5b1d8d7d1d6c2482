"""The row kernels (layernorm, rmsnorm, softmax) against their float64 numpy references
(hip_runtime.testing).

Each row is handled by one block, in one of four ways (kernels/rows.h): in registers or
streamed, read in 16-byte vectors or element by element. The shapes and block sizes below
reach all four: with 100 threads 3 x 1000 stays in registers as vectors, 7 x 4097 (odd: no
vectors) and 2 x 8200 are streamed; with 993 threads every row fits in registers. Neither size
is a multiple of a warp, and 993 threads end in a one-lane warp on NVIDIA.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest

from hip_runtime import testing
from hip_runtime.testing import assert_close

if TYPE_CHECKING:
    from conftest import KernelHarness

TYPES = ("f32", "f16", "bf16")
SHAPES = [(1, 1), (3, 1000), (7, 4097), (2, 8200)]
BLOCKS = [100, 993]
EPS = 1e-5


def every_row_case(test: Callable[..., None]) -> Callable[..., None]:
    """Parametrize a row-kernel test over every type x shape x block size."""
    for mark in (
        pytest.mark.parametrize("block", BLOCKS),
        pytest.mark.parametrize("shape", SHAPES, ids=str),
        pytest.mark.parametrize("dtype", TYPES),
    ):
        test = mark(test)
    return test


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@every_row_case
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_norms(
    harness: KernelHarness, norm: str, dtype: str, shape: tuple[int, int], block: int, affine: bool
) -> None:
    rows, cols = shape
    # layernorm: a mean far from 0. Its parameters are weight and bias, rmsnorm's the weight.
    x = harness.random(shape, dtype, scale=2.0, shift=3.0 if norm == "layernorm" else 0.5)
    count = 2 if norm == "layernorm" else 1
    params = [harness.random(cols, dtype) if affine else None for _ in range(count)]
    uploaded = [harness.upload(p) if p is not None else None for p in params]  # null: none
    dx, out = harness.upload(x), harness.output(shape, dtype)
    kernel = harness.kernel("norms.hip", f"{norm}_{dtype}")
    kernel.launch(rows, block, dx, *uploaded, out.buffer, rows, cols, EPS, 1, cols, 0)
    assert_close(out.read(), getattr(testing, norm)(x, *params, eps=EPS), dtype)


@every_row_case
def test_add_layernorm(
    harness: KernelHarness, dtype: str, shape: tuple[int, int], block: int
) -> None:
    # layernorm(x + residual + input_bias) (kernels/add_norm.h), its rows held as floats
    # (32 a thread as vectors, 8 as scalars) or streamed: the sum then rounded to the dtype.
    rows, cols = shape
    x, residual = harness.random(shape, dtype, scale=2.0, shift=3.0), harness.random(shape, dtype)
    input_bias, weight, bias = (harness.random(cols, dtype) for _ in range(3))
    dx, out = harness.upload(x), harness.output(shape, dtype)
    operands = [harness.upload(a) for a in (residual, input_bias, weight, bias)]
    kernel = harness.kernel("norms.hip", f"add_layernorm_{dtype}")
    kernel.launch(rows, block, dx, *operands, out.buffer, rows, cols, EPS, 1, cols, 0)
    total = x.astype(np.float64) + residual.astype(np.float64) + input_bias.astype(np.float64)
    if cols > (32 if cols % 8 == 0 else 8) * block:  # streamed: the f32 sum rounded
        f32 = [a.astype(np.float32) for a in (x, residual, input_bias)]
        total = (f32[0] + f32[1] + f32[2]).astype(x.dtype)
    assert_close(out.read(), testing.layernorm(total, weight, bias, eps=EPS), dtype)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@every_row_case
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
    kernel.launch(rows, block, dx, out.buffer, rows, cols, scale, causal_rows, 1, cols, 0)
    got = out.read()
    assert_close(got, testing.softmax(x, scale=scale, causal_rows=causal_rows), dtype)
    # Every row sees at least one key here, so every row sums to 1 (up to the output rounding).
    rtol = testing.tolerance(dtype)[0]
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
        rows, block, dx, out.buffer, rows, cols, 1.0, causal_rows, 1, cols, 0
    )
    got = out.read()
    assert (got[:2] == 0).all()
    assert got[2, 0] == 1.0 and (got[2, 1:] == 0).all()
    assert_close(got, testing.softmax(x, causal_rows=causal_rows), "f32")


@pytest.mark.parametrize("block", [64, 128])  # streamed, in registers
@pytest.mark.parametrize("dtype", TYPES)
def test_norms_and_softmax_work_in_place(harness: KernelHarness, dtype: str, block: int) -> None:
    rows, cols = 5, 3000
    x = harness.random((rows, cols), dtype, scale=2.0)
    weight, bias = harness.random(cols, dtype), harness.random(cols, dtype)
    dw, db = harness.upload(weight), harness.upload(bias)
    cases = [
        ("layernorm", (dw, db), testing.layernorm(x, weight, bias, eps=EPS)),
        ("rmsnorm", (dw,), testing.rmsnorm(x, weight, eps=EPS)),
        ("softmax", (), testing.softmax(x)),
    ]
    for name, params, expected in cases:
        data = harness.upload(x)
        kernel = harness.kernel(
            "softmax.hip" if name == "softmax" else "norms.hip", f"{name}_{dtype}"
        )
        strided = (1, cols, 0)  # rows cols apart
        tail = (rows, cols, 1.0, 0) if name == "softmax" else (rows, cols, EPS)
        kernel.launch(rows, block, data, *params, data, *tail, *strided)
        harness.device.synchronize()
        got = np.empty(rows * cols, x.dtype)
        data.copy_to(got.view(np.uint8))
        assert_close(got.reshape(rows, cols), expected, dtype)


#: Row magnitudes per type: at and past 2^64 ≈ 1.8e19, where the square of a row's mean
#: overflows f32 (f16 stops at 65504: its largest values stand in for them).
HUGE = {"f32": (1.8e19, -2e19, 1e20), "bf16": (1.8e19, -2e19, 1e20), "f16": (6e4, -6e4, 3e4)}


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("cols", [1, 7, 64])
@pytest.mark.parametrize("dtype", TYPES)
def test_layernorm_of_huge_short_rows_is_finite(
    harness: KernelHarness, dtype: str, cols: int, block: int
) -> None:
    # Short rows leave most threads of the block empty; merging an empty thread's statistics
    # with a row's at these magnitudes once computed inf · 0 = NaN.
    rows = [harness.random(cols, dtype, scale=abs(m) / 100, shift=m) for m in HUGE[dtype]]
    rows.append(np.full(cols, 3e38 if dtype != "f16" else 65504, testing.DTYPES[dtype]))
    x = np.stack(rows)
    dx, out = harness.upload(x), harness.output(x.shape, dtype)
    harness.kernel("norms.hip", f"layernorm_{dtype}").launch(
        len(rows), block, dx, None, None, out.buffer, len(rows), cols, EPS, 1, cols, 0
    )
    got = out.read()
    assert np.isfinite(got.astype(np.float64)).all()
    assert_close(got, testing.layernorm(x, eps=EPS), dtype)


#: Rows per type as (scale, shift) of their normal values: spreads whose f32 squares overflow
#: (from 2^64 ≈ 1.8e19 on, up to f32's end) or vanish (below 2^-75), and a usual one. f16 holds
#: neither: its largest and smallest normal values stand in. The row near -1e38 spreads by 2e37,
#: so no draw passes f32's end (-3.4e38 is 12 spreads away; at 5e37, 4.8 spreads were, and one
#: row of 8200 draws in about 60 held -inf, making the reference NaN too).
RANGES = {
    "f32": ((1e20, 0.0), (1e19, 3e19), (2e37, -1e38), (1e-30, 0.0), (1e-30, 5e-30), (1.0, 0.0)),
    "bf16": ((1e20, 0.0), (1e19, 3e19), (2e37, -1e38), (1e-30, 0.0), (1e-30, 5e-30), (1.0, 0.0)),
    "f16": ((1e4, 0.0), (1e-4, 0.0), (1.0, 0.0)),
}


@pytest.mark.parametrize("eps", [EPS, 0.0])  # 0: nothing hides a vanished sum
@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("cols", [7, 1000, 4097, 8200])  # in registers, streamed, both layouts
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_norms_of_huge_and_tiny_rows(
    harness: KernelHarness, norm: str, dtype: str, cols: int, block: int, eps: float
) -> None:
    # Before the rescaled path, rows whose standard deviation reached about 1.8e19 came out as
    # zeros (the variance overflowed to inf), and rows of 1e-30 with eps 0 as inf or NaN.
    ranges = RANGES[dtype]
    x = np.stack([harness.random(cols, dtype, scale=s, shift=m) for s, m in ranges])
    x[2, :3] = [3e38, -3e38, 3e38] if dtype != "f16" else [65504, -65504, 65504]  # the ends
    rows = len(ranges)
    dx, out = harness.upload(x), harness.output(x.shape, dtype)
    params = (None, None) if norm == "layernorm" else (None,)
    harness.kernel("norms.hip", f"{norm}_{dtype}").launch(
        rows, block, dx, *params, out.buffer, rows, cols, eps, 1, cols, 0
    )
    assert_close(out.read(), getattr(testing, norm)(x, eps=eps), dtype)
