"""argsort and topk against numpy, under hypothesis: every dtype, random shapes of rank 1-5
(size-0 and size-1 axes), inputs in random layouts (the `layouts` fixture), many ties, NaN,
infinities and signed zeros; stability against `np.argsort(kind="stable")`. Rows of several
thousand elements take the multi-pass path (2048-element runs merged); vocabulary-sized rows
(128k, 256k) are marked gpu.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hip_core import Device
from hip_runtime import HipBackend
from hip_runtime.tensors.dtypes import SUFFIXES

DTYPES = list(SUFFIXES)  # every dtype the kernels take (kernels/dtypes.h)
SETTINGS = settings(
    max_examples=40, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
shapes = st.lists(st.sampled_from([1, 2, 3, 4, 5, 0, 1, 2, 3, 37]), min_size=1, max_size=5).map(
    tuple
)
SPECIAL = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0]


@pytest.fixture(scope="module")
def backend(device: Device) -> Any:
    with HipBackend(device) as backend:
        yield backend


def with_ties(rng: np.random.Generator, shape: Any, dtype: np.dtype) -> np.ndarray:
    """Few distinct values (ties everywhere); floats with NaN, infinities and signed zeros,
    integers across their whole range."""
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, 0, 1, 5, info.max - 1], dtype)
        return rng.choice(np.concatenate([pool, rng.integers(0, 9, 6).astype(dtype)]), shape)
    pool = np.array([*SPECIAL, 1.5, -2.25, 3.0, -1e-3, 7.0], np.float64)
    return rng.choice(pool, shape).astype(dtype)


def order(array: np.ndarray, descending: bool) -> np.ndarray:
    """The stable order numpy gives, and its descending mirror (NaN largest, ties in order)."""
    floating16 = array.dtype.itemsize == 2 and array.dtype.kind not in "iu"  # f16, bf16
    wide = array.astype(np.float64) if floating16 else array
    if not descending:
        return np.argsort(wide, axis=-1, kind="stable")
    flat = wide.reshape(-1, wide.shape[-1]) if wide.size else wide.reshape(0, wide.shape[-1])
    ranks = np.empty(flat.shape, np.int64)
    for r, row in enumerate(flat):
        ranks[r] = np.unique(row, return_inverse=True)[1]  # NaN collapse to the top rank
    return np.argsort(-ranks, axis=-1, kind="stable").reshape(array.shape)


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES), descending=st.booleans())
def test_argsort_and_topk(backend: HipBackend, layouts: Any, data: Any, shape: Any, dtype: Any,
                          descending: bool) -> None:  # fmt: skip
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x, array = layouts.make(data, backend, with_ties(rng, shape, dtype))
    got = backend.argsort(x, descending=descending).to_numpy()
    assert got.dtype == np.int64 and got.shape == array.shape
    np.testing.assert_array_equal(got, order(array, descending))
    k = data.draw(st.integers(0, shape[-1]))  # topk: largest first when descending
    values, indices = backend.topk(x, k, largest=descending)
    expected = order(array, descending)[..., :k]
    np.testing.assert_array_equal(indices.to_numpy(), expected)
    bits = np.dtype(f"u{dtype.itemsize}")
    np.testing.assert_array_equal(values.to_numpy().view(bits),
                                  np.take_along_axis(array, expected, -1).view(bits))  # fmt: skip


@pytest.mark.parametrize("n", [2048, 2049, 5000, 8193])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16, np.int16], ids=str)
def test_long_rows_take_the_merge_passes(backend: HipBackend, n: int, dtype: Any) -> None:
    rng = np.random.default_rng(n)
    array = with_ties(rng, (3, n), np.dtype(dtype))
    x = backend.from_numpy(array)
    for descending in (False, True):
        got = backend.argsort(x, descending=descending).to_numpy()
        np.testing.assert_array_equal(got, order(array, descending), err_msg=str(descending))
    flipped = order(array[:, ::-1], True)
    for k in (1, 50, 2048, 3000):  # candidates per tile (k <= 2048; tiles shorter than k), all
        if k <= n:
            _, indices = backend.topk(x[:, ::-1], k)  # a reversed view
            np.testing.assert_array_equal(indices.to_numpy(), flipped[:, :k], err_msg=str(k))


def test_bad_arguments(backend: HipBackend) -> None:
    x = backend.zeros((3, 4))
    cases = {
        "at least one dimension": lambda: backend.argsort(backend.zeros(())),
        "outside \\[0, 4\\]": lambda: backend.topk(x, 5),
        "k must be an int": lambda: backend.topk(x, 1.5),  # type: ignore[arg-type]
        "the kernels take": lambda: backend.argsort(backend.zeros((3,), np.uint16)),
    }
    for message, call in cases.items():
        with pytest.raises((ValueError, TypeError), match=message):
            call()


@pytest.mark.gpu
@pytest.mark.parametrize("n", [32000, 131072, 262144])
def test_vocabulary_rows(backend: HipBackend, n: int) -> None:
    """Sampling's case: topk and argsort of logits rows as long as a vocabulary."""
    rng = np.random.default_rng(n)
    logits = rng.standard_normal((8, n), np.float32).astype(ml_dtypes.bfloat16)
    x = backend.from_numpy(logits)
    np.testing.assert_array_equal(backend.argsort(x, descending=True).to_numpy(),
                                  order(logits, True))  # fmt: skip
    _, indices = backend.topk(x, 50)
    np.testing.assert_array_equal(indices.to_numpy(), order(logits, True)[:, :50])
