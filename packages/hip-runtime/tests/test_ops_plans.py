"""Launch plans (issue 15): a repeated call of the same layouts is served by a plan kept from a
validated call (ops/base.py `_planned`). A plan is never served stale: the same shapes with other
strides, dtypes, offsets or `out=` aliasing give the right results and the same errors as a
first call, and memory or a backend closed since the plan was made is refused.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from hip_core import ClosedError, Device
from hip_runtime import HipBackend, testing

F32 = np.float32


@pytest.fixture(scope="module")
def backend(device: Device) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def data(*shape: int, seed: int = 0, dtype: type = F32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def twice(call):  # type: ignore[no-untyped-def]
    """The call's result the first time (it makes the plan) and the second (the plan)."""
    first = call().to_numpy()
    return first, call().to_numpy()


def test_pointwise_same_shape_other_strides(backend: HipBackend) -> None:
    a, b = data(8, 8, seed=1), data(8, 8, seed=2)
    x, y = backend.from_numpy(a), backend.from_numpy(b)
    for result in twice(lambda: backend.add(x, y)):
        np.testing.assert_allclose(result, a + b, rtol=1e-6)
    # the same shapes and dtypes, other strides: a transposed view, a reversed one
    for result in twice(lambda: backend.add(x.T, y)):
        np.testing.assert_allclose(result, a.T + b, rtol=1e-6)
    for result in twice(lambda: backend.mul(x[::-1], y)):
        np.testing.assert_allclose(result, a[::-1] * b, rtol=1e-6)
    np.testing.assert_allclose(backend.add(x, y).to_numpy(), a + b, rtol=1e-6)


def test_pointwise_same_shape_other_offset(backend: HipBackend) -> None:
    """Views at addresses of another alignment (the rows path's 16-byte vectors)."""
    a, b = data(4, 18, seed=3), data(4, 16, seed=4)
    x, y = backend.from_numpy(a), backend.from_numpy(b)
    for start in (0, 1, 0, 2, 1):
        view = x[:, start : start + 16]
        np.testing.assert_allclose(
            backend.add(view, y).to_numpy(), a[:, start : start + 16] + b, rtol=1e-6
        )


def test_pointwise_other_dtype_still_refused(backend: HipBackend) -> None:
    x, y = backend.from_numpy(data(4, 4)), backend.from_numpy(data(4, 4, seed=1))
    backend.add(x, y), backend.add(x, y)
    half = backend.from_numpy(data(4, 4, seed=1, dtype=np.float16))
    with pytest.raises(ValueError, match="dtype"):
        backend.add(x, half)
    ints = backend.from_numpy(np.arange(16, dtype=np.int32).reshape(4, 4))
    backend.exp(x), backend.exp(x)
    with pytest.raises(ValueError, match="exp"):
        backend.exp(ints)


def test_pointwise_out_aliasing(backend: HipBackend) -> None:
    a, b = data(8, 8, seed=5), data(8, 8, seed=6)
    x, y = backend.from_numpy(a), backend.from_numpy(b)
    out = backend.empty((8, 8), F32)
    for _ in range(2):
        backend.add(x, y, out=out)
    np.testing.assert_allclose(out.to_numpy(), a + b, rtol=1e-6)
    # out a distinct tensor over x's memory: in place, the same elements
    same = x.reshape(8, 8)
    assert same is not x
    backend.add(x, y, out=same)
    np.testing.assert_allclose(x.to_numpy(), a + b, rtol=1e-6)
    # out overlapping an input without being it: refused, plan or not
    wide = backend.from_numpy(data(9, 8, seed=7))
    for _ in range(2):
        backend.add(wide[:8], y, out=out)
    with pytest.raises(ValueError, match="overlap"):
        backend.add(wide[:8], y, out=wide[1:])
    with pytest.raises(ValueError, match="overlap"):
        backend.add(wide[1:], y, out=wide[:8])
    # a broadcast out (the same shape, stride 0) is refused after a plan for a contiguous one
    with pytest.raises(ValueError, match="overlap"):
        backend.add(x, y, out=backend.from_numpy(data(8, seed=8)).broadcast_to((8, 8)))
    # cast: out must not overlap x at all, even as x itself (a plan for out= or not)
    for _ in range(2):
        backend.cast(x, F32, out=out), backend.cast(x, F32)
    with pytest.raises(ValueError, match="overlap"):
        backend.cast(x, F32, out=x)


def test_closed_memory_and_backend_after_a_plan(device: Device) -> None:
    backend = HipBackend(device)
    x, y = backend.from_numpy(data(4, 4)), backend.from_numpy(data(4, 4, seed=1))
    w, b = backend.from_numpy(data(4, seed=2)), backend.from_numpy(data(4, seed=3))
    for _ in range(2):
        backend.add(x, y), backend.layernorm(x, w, b), backend.softmax(x), backend.matmul(x, y)
    y.buffer.close()
    with pytest.raises(ValueError, match="closed"):
        backend.add(x, y)
    with pytest.raises(ValueError, match="closed"):
        backend.matmul(x, y)
    backend.close()
    for call in (lambda: backend.add(x, x), lambda: backend.layernorm(x, w, b),
                 lambda: backend.softmax(x)):  # fmt: skip
        with pytest.raises(ClosedError):
            call()


def test_layernorm_plan(backend: HipBackend) -> None:
    a, wa, ba = data(6, 32, seed=9), data(32, seed=10), data(32, seed=11)
    x, w, b = backend.from_numpy(a), backend.from_numpy(wa), backend.from_numpy(ba)
    expected = testing.layernorm(a, wa, ba).value
    out = backend.empty((6, 32), F32)
    for result in twice(lambda: backend.layernorm(x, w, b)):
        np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-5)
    for _ in range(2):
        backend.layernorm(x, w, b, out=out)
    np.testing.assert_allclose(out.to_numpy(), expected, rtol=1e-4, atol=1e-5)
    # out = weight: refused (out may be x only), whatever plan the shapes have
    row = backend.from_numpy(data(32, seed=12))
    for _ in range(2):
        backend.layernorm(row, w, b, out=backend.empty((32,), F32))
    with pytest.raises(ValueError, match="overlap"):
        backend.layernorm(row, w, b, out=w)
    with pytest.raises(ValueError, match="overlap"):
        backend.layernorm(row, w, b, out=w.reshape(32))
    # other strides of the same shape: a slice of columns (rows strided)
    wide = data(6, 40, seed=13)
    view = backend.from_numpy(wide)[:, 4:36]
    reference = testing.layernorm(wide[:, 4:36], wa, ba).value
    for result in twice(lambda: backend.layernorm(view, w, b)):
        np.testing.assert_allclose(result, reference, rtol=1e-4, atol=1e-5)
    # in place
    backend.layernorm(x, w, b, out=x)
    np.testing.assert_allclose(x.to_numpy(), expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="weight"):
        backend.layernorm(x, b[:16], b)


def test_softmax_plan(backend: HipBackend) -> None:
    a = data(5, 24, seed=14)
    x = backend.from_numpy(a)
    for result in twice(lambda: backend.softmax(x)):
        np.testing.assert_allclose(result, testing.softmax(a), rtol=1e-5, atol=1e-6)
    for result in twice(lambda: backend.softmax(x, causal_rows=1)):
        np.testing.assert_allclose(result.sum(-1), np.ones(5), rtol=1e-5)
    with pytest.raises(ValueError, match="causal_rows"):
        backend.softmax(x, causal_rows=True)
    with pytest.raises(TypeError):
        backend.softmax(x, axis=[1])  # type: ignore[arg-type]
    t = backend.from_numpy(a.T.copy()).T  # the same shape, columns strided: the along-axis path
    for result in twice(lambda: backend.softmax(t)):
        np.testing.assert_allclose(result, testing.softmax(a), rtol=1e-5, atol=1e-6)


def test_matmul_plan(backend: HipBackend) -> None:
    a, b = data(8, 8, seed=15), data(8, 8, seed=16)
    x, y = backend.from_numpy(a), backend.from_numpy(b)
    for result in twice(lambda: backend.matmul(x, y)):
        np.testing.assert_allclose(result, a @ b, rtol=1e-5, atol=1e-5)
    for result in twice(lambda: backend.matmul(x.T, y)):
        np.testing.assert_allclose(result, a.T @ b, rtol=1e-5, atol=1e-5)
    for result in twice(lambda: backend.matmul(x, y, transpose_b=True)):
        np.testing.assert_allclose(result, a @ b.T, rtol=1e-5, atol=1e-5)
    out = backend.empty((8, 8), F32)
    for _ in range(2):
        backend.matmul(x, y, out=out, alpha=2.0)
    np.testing.assert_allclose(out.to_numpy(), 2 * a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="overlap"):
        backend.matmul(x, y, out=x)
    with pytest.raises(ValueError, match="overlap"):
        backend.matmul(x, y, out=x.reshape(8, 8))
    with pytest.raises(ValueError):
        backend.matmul(x, backend.from_numpy(b.astype(np.float16)))


def test_embedding_plan(backend: HipBackend) -> None:
    table = data(50, 16, seed=17)
    t = backend.from_numpy(table)
    for dtype in (np.int32, np.int64, np.int32):
        ids = np.array([3, 7, 49, 0, 3], dtype)
        i = backend.from_numpy(ids)
        for result in twice(lambda i=i: backend.embedding(i, t)):
            np.testing.assert_array_equal(result, table[ids])
    ids = backend.from_numpy(np.array([1, 2], np.int32))
    for _ in range(2):
        backend.embedding(ids, t, out=backend.empty((2, 16), F32))
    with pytest.raises(ValueError, match="overlap"):
        backend.embedding(ids, t, out=t[:2])
    # a column slice of the table: the same shapes, other strides and alignment
    sliced = t[:, 1:9]
    for result in twice(lambda: backend.embedding(ids, sliced)):
        np.testing.assert_array_equal(result, table[[1, 2], 1:9])


def test_linear_plan(backend: HipBackend) -> None:
    xa, wa, ba = data(5, 8, seed=18), data(6, 8, seed=19), data(6, seed=20)
    x, w, b = backend.from_numpy(xa), backend.from_numpy(wa), backend.from_numpy(ba)
    for result in twice(lambda: backend.linear(x, w, b)):
        np.testing.assert_allclose(result, xa @ wa.T + ba, rtol=1e-5, atol=1e-5)
    for result in twice(lambda: backend.linear(x, w)):
        np.testing.assert_allclose(result, xa @ wa.T, rtol=1e-5, atol=1e-5)
    out = backend.empty((5, 6), F32)
    for _ in range(2):
        backend.linear(x, w, b, out=out)
    np.testing.assert_allclose(out.to_numpy(), xa @ wa.T + ba, rtol=1e-5, atol=1e-5)
    storage = backend.from_numpy(data(40, seed=21))  # x and out over one buffer, overlapping
    x2, out2 = storage.reshape(5, 8), storage[10:].reshape(5, 6)
    backend.linear(storage[:40].reshape(5, 8), w, b, out=backend.empty((5, 6), F32))
    with pytest.raises(ValueError, match="overlap"):
        backend.linear(x2, w, b, out=out2)
    with pytest.raises(ValueError, match="bias"):
        backend.linear(x, w, b[:5])


def test_scalar_and_where_plans(backend: HipBackend) -> None:
    """Calls with Python scalars (mul, scale, add, where) are planned with the scalar's value
    in the key: another value, 0.0 against -0.0, an int against a float, a scalar on the other
    side, out= and in place all give numpy's results; a bad dtype is still refused."""
    a, b = data(8, 16, seed=11), data(8, 16, seed=12)
    x, y = backend.from_numpy(a), backend.from_numpy(b)
    mask = a > 0
    cond = backend.from_numpy(mask)
    for value in (0.5, 0.5, 2.0, 0.0, -0.0, -0.0, 3, True):
        for result in twice(lambda v=value: backend.mul(x, v)):  # type: ignore[misc]
            np.testing.assert_array_equal(result, a * F32(value))
        for result in twice(lambda v=value: backend.add(v, x)):  # type: ignore[misc]
            np.testing.assert_array_equal(result, F32(value) + a)
    for result in twice(lambda: backend.scale(x, 0.25)):
        np.testing.assert_array_equal(result, a * F32(0.25))
    for other in (-np.inf, 7.0, 7.0, 0.0, -0.0):
        for result in twice(lambda o=other: backend.where(cond, x, o)):  # type: ignore[misc]
            np.testing.assert_array_equal(result, np.where(mask, a, F32(other)))
        for result in twice(lambda o=other: backend.where(cond, o, y)):  # type: ignore[misc]
            np.testing.assert_array_equal(result, np.where(mask, F32(other), b))
    for result in twice(lambda: backend.where(cond, x, y)):
        np.testing.assert_array_equal(result, np.where(mask, a, b))
    out = backend.empty((8, 16), F32)
    for _ in range(2):
        backend.mul(x, 0.5, out=out)
        np.testing.assert_array_equal(out.to_numpy(), a * F32(0.5))
        backend.where(cond, y, 1.0, out=out)
        np.testing.assert_array_equal(out.to_numpy(), np.where(mask, b, F32(1.0)))
    inplace = backend.from_numpy(a)
    for k in range(2):
        backend.mul(inplace, 2.0, out=inplace)
        np.testing.assert_array_equal(inplace.to_numpy(), a * F32(2.0 ** (k + 1)))
    ints = backend.from_numpy(np.arange(8, dtype=np.int32))
    for _ in range(2):
        with pytest.raises(ValueError, match="mul"):
            backend.mul(ints, 0.5)
        with pytest.raises(ValueError, match="bool"):
            backend.where(x, x, 1.0)
    backend.mul(ints, 3)
    np.testing.assert_array_equal(backend.mul(ints, 3).to_numpy(), np.arange(8) * 3)


def test_strided_out_takes_the_plan_and_still_refuses_overlap(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """out= a strided view (a permuted attention output, a column slice) is served by the plan
    its first call made, and an out= whose span meets an input's goes back to the checked path,
    which refuses a real overlap as a first call does."""
    from hip_runtime.ops import attention_decode as decode

    rng = np.random.default_rng(3)
    q, k, v = (
        rng.standard_normal(s).astype(F32) for s in ((1, 4, 1, 8), (1, 2, 5, 8), (1, 2, 5, 8))
    )
    lengths = backend.from_numpy(np.array([5], np.int32))
    context = backend.empty((1, 1, 4, 8), F32)  # [B, S, H, D], written as [B, H, S, D]

    def attend() -> np.ndarray:
        heads_first = context.permute(0, 2, 1, 3)
        tensors = (backend.from_numpy(q), backend.from_numpy(k), backend.from_numpy(v))
        backend.attention_decode(*tensors, lengths, out=heads_first)
        return context.to_numpy()

    first = attend()
    monkeypatch.setattr(decode, "_decode_split", None)  # the checked path would call it
    np.testing.assert_array_equal(attend(), first)  # the plan's call
    monkeypatch.undo()
    wide = backend.from_numpy(data(8, 10, seed=9))
    y = backend.from_numpy(data(8, 8, seed=10))
    for _ in range(2):  # a plan for columns 1..8 of `wide` as out=, from columns 0..7 of another
        backend.add(backend.from_numpy(data(8, 10, seed=11))[:, :8], y, out=wide[:, 1:9])
    with pytest.raises(ValueError, match="overlap"):
        backend.add(wide[:, :8], y, out=wide[:, 1:9])  # the same layouts, overlapping
    before = wide.to_numpy()
    backend.add(wide[:, 1:9], y, out=wide[:, 1:9])  # in place: the same elements
    np.testing.assert_allclose(wide.to_numpy()[:, 1:9], before[:, 1:9] + data(8, 8, seed=10),
                               rtol=1e-6)  # fmt: skip
