"""layernorm, rmsnorm and l2_normalize of rows at the ends of f32's range, through the ops,
against hip_runtime.testing's float64 references; and their eps argument's type.

f32 sums of squares overflow from |x| ≈ 2^64 (1.8e19) and vanish below 2^-75: such rows once
came out as zeros, inf or NaN (46 of 256 random cases of issue 39). The kernels now rescale
them (kernels/rows.h); rows with NaN stay NaN, and a row's neighbours are not affected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend, testing

#: (scale, shift) of each row's normal values: huge spreads, a huge mean, values near f32's
#: largest, tiny rows, and a usual row beside them. bf16 holds the same range as f32. The row
#: near -1e38 spreads by 2e37, so no draw passes f32's end (test_kernels_rows.RANGES says why).
ROWS = ((1e20, 0.0), (1e19, 3e19), (2e37, -1e38), (1e-30, 0.0), (1e-30, 5e-30), (1.0, 0.0))


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def l2_normalize(x: np.ndarray, axis: int, eps: float) -> np.ndarray:
    v = x.astype(np.float64)
    return np.asarray(v / np.maximum(np.sqrt((v * v).sum(axis, keepdims=True)), np.float32(eps)))


def rows(rng: np.random.Generator, dtype: str, cols: int) -> np.ndarray:
    x = np.stack([testing.random(rng, cols, dtype, scale=s, shift=m) for s, m in ROWS])
    x[2, :3] = [3e38, -3e38, 3e38]
    return x


#: op: (how the backend runs it on x with eps (None: the default), the float64 reference)
OPS: dict[str, tuple[Any, Any]] = {
    "layernorm": (lambda b, x, e: b.layernorm(x, **e), lambda x, e: testing.layernorm(x, **e)),
    "rmsnorm": (lambda b, x, e: b.rmsnorm(x, **e), lambda x, e: testing.rmsnorm(x, **e)),
    # along each row (one slice per row), and across the rows (the slices down the columns)
    "l2_normalize rows": (lambda b, x, e: b.l2_normalize(x, -1, **e),
                          lambda x, e: l2_normalize(x, -1, e.get("eps", 1e-12))),
    "l2_normalize columns": (lambda b, x, e: b.l2_normalize(x, 0, **e),
                             lambda x, e: l2_normalize(x, 0, e.get("eps", 1e-12))),
}  # fmt: skip


@pytest.mark.parametrize("eps", [None, 0.0], ids=["default eps", "eps 0"])
@pytest.mark.parametrize("cols", [5, 4096, 20000])  # short, in registers, streamed
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("op", list(OPS))
def test_rows_of_any_finite_magnitude_normalize(
    backend: HipBackend, op: str, dtype: str, cols: int, eps: float | None
) -> None:
    x = rows(np.random.default_rng(cols), dtype, cols)
    run, reference = OPS[op]
    given: dict[str, float] = {} if eps is None else {"eps": eps}  # (the defaults agree)
    expected = reference(x, given)
    testing.assert_close(run(backend, backend.from_numpy(x), given).to_numpy(), expected, dtype)


def test_nan_rows_stay_nan_and_leave_their_neighbours(backend: HipBackend) -> None:
    x = rows(np.random.default_rng(0), "f32", 64)
    x[0, 5] = np.nan
    dx = backend.from_numpy(x)
    for op, expected in (
        ("layernorm", testing.layernorm(x[1:]).value),
        ("rmsnorm", testing.rmsnorm(x[1:])),
        ("l2_normalize", l2_normalize(x[1:], -1, 1e-12)),
    ):
        got = getattr(backend, op)(dx).to_numpy()
        assert np.isnan(got[0]).all(), op
        testing.assert_close(got[1:], expected, "f32")


@pytest.mark.parametrize("eps", ["1", True, np.bool_(True), None, 1j, [1e-5]], ids=repr)
@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "l2_normalize"])
def test_eps_must_be_a_real_number(backend: HipBackend, op: str, eps: Any) -> None:
    dx = backend.from_numpy(np.ones((2, 8), np.float32))
    getattr(backend, op)(dx, eps=1e-5)  # a plan for this layout: its fast path checks too
    with pytest.raises(TypeError, match=f"{op}: eps must be a real number"):
        getattr(backend, op)(dx, eps=eps)


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "l2_normalize"])
def test_eps_takes_ints_and_numpy_floats(backend: HipBackend, op: str) -> None:
    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    dx = backend.from_numpy(x)
    expected = getattr(backend, op)(dx, eps=0.5).to_numpy()
    for eps in (np.float32(0.5), np.float64(0.5)):
        np.testing.assert_array_equal(getattr(backend, op)(dx, eps=eps).to_numpy(), expected)
    np.testing.assert_array_equal(
        getattr(backend, op)(dx, eps=1).to_numpy(), getattr(backend, op)(dx, eps=1.0).to_numpy()
    )
