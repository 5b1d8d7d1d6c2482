"""softmax, log_softmax and l2_normalize along any axis, and layernorm / rmsnorm of strided
rows, against float64 numpy references under hypothesis: random shapes of rank 1-5 (size-0
and size-1 axes), a random axis (negative too), inputs in random layouts (the `layouts`
fixture), f32 / f16 / bf16; all -inf slices and NaN; the errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hip_core import Device
from hip_runtime import HipBackend, testing

TYPES = ["f32", "f16", "bf16"]
SETTINGS = settings(
    max_examples=40, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
EPS = 1e-5


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def softmax(x: np.ndarray, axis: int, scale: float = 1.0) -> np.ndarray:
    s = x.astype(np.float64) * scale
    e = np.exp(s - s.max(axis=axis, keepdims=True, initial=-np.inf))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x: np.ndarray, axis: int, scale: float = 1.0) -> np.ndarray:
    s = x.astype(np.float64) * scale
    shifted = s - s.max(axis=axis, keepdims=True, initial=-np.inf)
    with np.errstate(divide="ignore"):  # log(0) of an empty slice: nothing is compared
        return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def l2_normalize(x: np.ndarray, axis: int, eps: float = 1e-12) -> np.ndarray:
    s = x.astype(np.float64)
    norm = np.sqrt((s * s).sum(axis=axis, keepdims=True))
    return s / np.maximum(norm, np.float32(eps))


@SETTINGS
@given(data=st.data())
def test_along_any_axis_matches_numpy(backend: HipBackend, layouts: Any, data: Any) -> None:
    dtype = data.draw(st.sampled_from(TYPES))
    op = data.draw(st.sampled_from(["softmax", "log_softmax", "l2_normalize"]))
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=5, min_side=0, max_side=6))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    tensor, x = layouts.make(data, backend, testing.random(rng, shape, dtype, scale=3.0))
    scale = data.draw(st.sampled_from([1.0, 0.5])) if op != "l2_normalize" else 1.0
    if op == "l2_normalize":
        got, expected = backend.l2_normalize(tensor, axis), l2_normalize(x, axis)
    else:
        got = getattr(backend, op)(tensor, axis, scale=scale)
        expected = (softmax if op == "softmax" else log_softmax)(x, axis, scale)
    assert got.is_contiguous
    # log_softmax subtracts the log-sum-exp from each score: f32 rounds at the scores' size.
    size = float(np.abs(x.astype(np.float64)).max(initial=0.0)) * scale
    testing.assert_close(got.to_numpy(), expected, dtype, size if op == "log_softmax" else 0.0)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_all_minus_inf_slices_and_nan(backend: HipBackend, op: str) -> None:
    x = np.array([[-np.inf] * 3, [0.0, np.nan, 1.0], [-np.inf, 0.0, -np.inf]], np.float32)
    for tensor, axis in ((backend.from_numpy(x), 1), (backend.from_numpy(x.T.copy()).T, 1)):
        got = getattr(backend, op)(tensor, axis).to_numpy()
        empty = 0.0 if op == "softmax" else -np.inf  # documented: numpy would give NaN
        np.testing.assert_array_equal(got[0], [empty] * 3)
        assert np.isnan(got[1]).all()
        np.testing.assert_array_equal(got[2], [empty, 1.0 if op == "softmax" else 0.0, empty])


def test_l2_normalize_of_zeros_is_zero(backend: HipBackend) -> None:
    got = backend.l2_normalize(backend.zeros((3, 4)), 0).to_numpy()
    np.testing.assert_array_equal(got, np.zeros((3, 4), np.float32))


@SETTINGS
@given(data=st.data())
def test_norms_and_softmax_of_strided_rows(backend: HipBackend, data: Any) -> None:
    """Rows a stride apart (a slice of columns, a permuted or reversed leading axis) go to the
    row kernels without a copy; the results match the contiguous ones."""
    dtype = data.draw(st.sampled_from(TYPES))
    rows = data.draw(st.integers(1, 6))
    cols = data.draw(st.sampled_from([1, 3, 8, 64, 300]))
    extra = data.draw(st.sampled_from([0, 1, 8]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    big = testing.random(rng, (2, rows, cols + extra), dtype, scale=2.0, shift=1.0)
    start = data.draw(st.integers(0, extra))
    kind = data.draw(st.sampled_from(["columns", "permuted", "reversed"]))
    tensor = backend.from_numpy(big)[:, :, start : start + cols]
    x = big[:, :, start : start + cols]
    if kind == "permuted":
        tensor, x = tensor.permute(1, 0, 2), x.transpose(1, 0, 2)
    elif kind == "reversed":
        tensor, x = tensor[::-1], x[::-1]
    weight = testing.random(rng, cols, dtype)
    w = backend.from_numpy(weight)
    got = backend.layernorm(tensor, w, w, eps=EPS).to_numpy()
    testing.assert_close(got, testing.layernorm(np.ascontiguousarray(x), weight, weight, eps=EPS),
                         dtype)  # fmt: skip
    got = backend.rmsnorm(tensor, w, eps=EPS).to_numpy()
    testing.assert_close(got, testing.rmsnorm(np.ascontiguousarray(x), weight, eps=EPS), dtype)
    got = backend.softmax(tensor, scale=0.5).to_numpy()
    testing.assert_close(got, testing.softmax(np.ascontiguousarray(x), scale=0.5), dtype)


def test_errors(backend: HipBackend) -> None:
    x = backend.zeros((4, 6))
    with pytest.raises(ValueError, match="softmax: axis 2 is out of range"):
        backend.softmax(x, 2)
    with pytest.raises(TypeError, match="log_softmax takes one int axis"):
        backend.log_softmax(x, (0, 1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs at least one dimension"):
        backend.l2_normalize(backend.zeros(()))
    with pytest.raises(ValueError, match="causal_rows masks the last axis only"):
        backend.softmax(x, 0, causal_rows=2)
    with pytest.raises(ValueError, match="dtype int32"):
        backend.softmax(backend.zeros((2, 2), np.int32))
    with pytest.raises(ValueError, match="out is"):
        backend.softmax(x, 0, out=backend.zeros((6, 4)))
    # Rows whose last axis is strided stay refused by the norms, naming the way out.
    with pytest.raises(ValueError, match=r"^layernorm takes C-contiguous .*\.contiguous\(\)"):
        backend.layernorm(backend.zeros((4, 12))[:, ::2])
    with pytest.raises(ValueError, match=r"^rmsnorm takes C-contiguous .*\.contiguous\(\)"):
        backend.rmsnorm(x.T)


NVIDIA_ONLY = pytest.mark.parametrize(
    "platform", [pytest.param("nvidia", marks=pytest.mark.gpu)], indirect=True
)


@NVIDIA_ONLY
@pytest.mark.parametrize("dtype", TYPES)
def test_large_shapes_on_the_gpu(device: Device, dtype: str) -> None:
    """Along both axes of 1024 x 4096 (the vector and scalar column paths, long rows), and the
    norms of a slice of columns of it."""
    rng = np.random.default_rng(0)
    x = testing.random(rng, (1024, 4096), dtype, scale=3.0)
    with HipBackend(device) as backend:
        t = backend.from_numpy(x)
        for axis in (0, 1):
            testing.assert_close(backend.softmax(t, axis).to_numpy(), softmax(x, axis), dtype)
            size = float(np.abs(x.astype(np.float64)).max())
            got = backend.log_softmax(t, axis).to_numpy()
            testing.assert_close(got, log_softmax(x, axis), dtype, size)
            got = backend.l2_normalize(t.T, axis).to_numpy()
            testing.assert_close(got, l2_normalize(x.T, axis), dtype)
        part = np.ascontiguousarray(x[:, 8:4000])
        got = backend.rmsnorm(t[:, 8:4000], eps=EPS).to_numpy()
        testing.assert_close(got, testing.rmsnorm(part, eps=EPS), dtype)
