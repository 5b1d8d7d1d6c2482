"""The self-test's checks of the op set beyond the fused ops: pointwise families over a strided
operand, reductions along each axis, softmax along a leading axis, indexing, sorting and
creation, each against a float64 numpy computation of the same inputs (numpy is the reference
here, as hip_runtime.testing is for the fused ops). Every check runs in the float type given;
the contiguous and the strided (`_any`) entry points are both launched.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from hip_runtime import testing
from hip_runtime.testing import assert_bits_equal, assert_close

Check = Callable[[Any, np.random.Generator, str], float]
SHAPE = (37, 45)  # odd: no dimension a multiple of a block or of a 16-byte vector
SHAPES = (SHAPE, (6, 48))  # and rows of whole 16-byte vectors for every element size


def _inputs(backend: Any, rng: np.random.Generator, dtype: str) -> tuple[Any, ...]:
    """(x, a strided view holding x's values, x as float64)."""
    x = testing.random(rng, SHAPE, dtype, scale=2.0)
    return backend.from_numpy(x), backend.from_numpy(np.ascontiguousarray(x.T)).T, x.astype(float)


def pointwise(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    """Binary (with a broadcast row), power, comparisons, where and the unary families, each
    once on contiguous operands and once through a transposed view."""
    dx, strided, x = _inputs(backend, rng, dtype)
    stored = (np.abs(testing.random(rng, SHAPE[1], dtype)).astype(float) + 0.5).astype(
        testing.DTYPES[dtype]
    )  # positive, as the device holds it
    row, row64 = backend.from_numpy(stored), stored.astype(float)
    worst = 0.0
    for operand in (dx, strided):
        cases = {
            "sub": (backend.sub(operand, row), x - row64),
            "div": (backend.div(operand, row), x / row64),
            "maximum": (backend.maximum(operand, row), np.maximum(x, row64)),
            "pow": (backend.pow(backend.abs(operand), row), np.abs(x) ** row64),
            "where": (backend.where(backend.lt(operand, row), operand, row),
                      np.where(x < row64, x, row64)),
            "exp": (backend.exp(operand), np.exp(x)),
            "tanh": (backend.tanh(operand), np.tanh(x)),
            "sigmoid": (backend.sigmoid(operand), 1 / (1 + np.exp(-x))),
            "neg": (backend.neg(operand), -x),
        }  # fmt: skip
        for got, expected in cases.values():
            worst = max(worst, assert_close(got.to_numpy(), expected, dtype))
        assert_bits_equal(backend.gt(operand, row).to_numpy(), x > row64)
    return worst


def reductions(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    """sum and max along each axis (rows and columns paths), argmax, of a strided view too."""
    dx, strided, x = _inputs(backend, rng, dtype)
    worst = 0.0
    for operand in (dx, strided):
        for axis in (0, 1):
            got = backend.sum(operand, axis=axis).to_numpy()
            magnitude = np.abs(x).sum(axis=axis)
            worst = max(worst, assert_close(got, x.sum(axis=axis), dtype, magnitude))
            worst = max(worst, assert_close(backend.max(operand, axis=axis).to_numpy(),
                                            x.max(axis=axis), dtype))  # fmt: skip
            assert_bits_equal(backend.argmax(operand, axis=axis).to_numpy(), x.argmax(axis=axis))
    return worst


def softmax_axes(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    """softmax and log_softmax along the leading axis, l2_normalize along the last."""
    dx, _, x = _inputs(backend, rng, dtype)
    e = np.exp(x - x.max(axis=0))
    probs = e / e.sum(axis=0)
    worst = assert_close(backend.softmax(dx, axis=0).to_numpy(), probs, dtype)
    logs = backend.log_softmax(dx, axis=0).to_numpy()
    worst = max(worst, assert_close(logs, np.log(probs), dtype, np.abs(x - x.max(axis=0))))
    unit = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return max(worst, assert_close(backend.l2_normalize(dx).to_numpy(), unit, dtype))


def indexing(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    """gather along the last axis (bits) and scatter_add along the first (atomic adds)."""
    stored = testing.random(rng, SHAPE, dtype, scale=2.0)  # the values as the device holds them
    dx = backend.from_numpy(stored)
    index = rng.integers(0, SHAPE[1], SHAPE).astype(np.int64)
    got = backend.gather(dx, 1, backend.from_numpy(index)).to_numpy()
    assert_bits_equal(got, np.take_along_axis(stored, index, axis=1))
    rows = rng.integers(0, SHAPE[0], SHAPE).astype(np.int64)
    added = backend.scatter_add(dx, 0, backend.from_numpy(rows), dx).to_numpy()
    expected = stored.astype(float)
    np.add.at(expected, (rows, np.arange(SHAPE[1])[None, :]), stored.astype(float))
    return assert_close(added, expected, dtype, np.abs(expected) + np.abs(stored).max() * 4)


def sorting(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    """argsort of short rows (one tile) and of long ones (merge passes), and topk."""
    for cols in (45, 4099):
        x = testing.random(rng, (3, cols), dtype)
        order = backend.argsort(backend.from_numpy(x)).to_numpy()
        assert_bits_equal(order, np.argsort(x.astype(float), axis=-1, kind="stable"))
        values, indices = backend.topk(backend.from_numpy(x), 5)
        top = np.argsort(-x.astype(float), axis=-1, kind="stable")[:, :5]
        assert_bits_equal(indices.to_numpy(), top)
        assert_bits_equal(values.to_numpy(), np.take_along_axis(x, top, axis=-1))
    return 0.0


def creation(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    """arange, full, tril and a causal mask, bit for bit."""
    storage = testing.DTYPES[dtype]
    assert_bits_equal(backend.arange(0, 45, 3, dtype=storage).to_numpy(),
                      np.arange(0, 45, 3).astype(storage))  # fmt: skip
    assert_bits_equal(backend.full((3, 5), 1.5, storage).to_numpy(), np.full((3, 5), 1.5, storage))
    x = testing.random(rng, (2, 7, 9), dtype)
    assert_bits_equal(backend.tril(backend.from_numpy(x), -1).to_numpy(), np.tril(x, -1))
    mask = backend.causal_mask(5, 8, offset=3).to_numpy()  # the last query sees every key
    assert_bits_equal(mask, np.tril(np.ones((5, 8), bool), 3))
    return 0.0


#: The other dtypes of kernels/dtypes.h, each exercised beside one float type's run.
OTHER_DTYPES = {"f32": ("float64", "int32", "uint32"), "f16": ("int16", "int64"),
                "bf16": ("int8", "uint8", "bool")}  # fmt: skip


def other_dtypes(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    """f64, the integers and bool through every per-dtype family: binary (contiguous and
    strided), comparisons, where, unary, sums and extremes along each axis, argmax, atomic
    adds, sorting, arange and casts; exact in these types, so bit for bit. Two shapes: one
    whose rows are whole 16-byte vectors (the rows paths), one whose rows are not."""
    for name, shape in itertools.product(OTHER_DTYPES[dtype], SHAPES):
        kind = np.dtype(name)
        boolean = kind.kind == "b"
        x = rng.integers(0, 2 if boolean else 100, shape).astype(kind)
        total = np.float64 if kind.kind == "f" else np.int64  # integer sums are int64
        dx, strided = backend.from_numpy(x), backend.from_numpy(np.ascontiguousarray(x.T)).T
        for operand in (dx, strided):
            if not boolean:
                assert_bits_equal(backend.add(operand, dx[0]).to_numpy(), x + x[0])
                assert_bits_equal(backend.neg(operand).to_numpy(), -x)
                assert_bits_equal(
                    backend.sum(operand, axis=0).to_numpy(),
                    x.sum(axis=0, dtype=total),
                )
                assert_bits_equal(backend.max(operand, axis=1).to_numpy(), x.max(axis=1))
                assert_bits_equal(backend.argmax(operand, axis=0).to_numpy(), x.argmax(axis=0))
            assert_bits_equal(backend.lt(operand, dx).to_numpy(), x < x)
            assert_bits_equal(backend.where(backend.gt(operand, dx), operand, dx).to_numpy(), x)
        assert_bits_equal(backend.argsort(dx).to_numpy(), np.argsort(x, axis=-1, kind="stable"))
        rows = rng.integers(0, shape[0], shape).astype(np.int64)
        added = backend.scatter_add(dx, 0, backend.from_numpy(rows), dx).to_numpy()
        expected = x.copy()
        np.add.at(expected, (rows, np.arange(shape[1])[None, :]), x)
        assert_bits_equal(added, expected)
        assert_bits_equal(backend.cast(dx, np.float32).to_numpy(), x.astype(np.float32))
        if not boolean:
            assert_bits_equal(backend.arange(0, 40, 3, dtype=kind).to_numpy(),
                              np.arange(0, 40, 3).astype(kind))  # fmt: skip
    return 0.0


OPSET_CHECKS: tuple[tuple[str, Check], ...] = (
    ("pointwise", pointwise),
    ("reductions", reductions),
    ("softmax (any axis)", softmax_axes),
    ("gather, scatter_add", indexing),
    ("argsort, topk", sorting),
    ("arange, full, tril", creation),
    ("other dtypes", other_dtypes),
)

__all__ = ["OPSET_CHECKS"]
