"""matmul, linear and mlp_swiglu over strided operands, against numpy's float64 matmul.

Under hypothesis: ranks 1-5 with broadcast batch axes (numpy's matmul signature), every
operand in a random layout (contiguous, permuted, stepped, reversed, broadcast: the `layouts`
fixture) and maybe a transposed view (`.mT`), f32/f64/f16/bf16. A result may differ from the
float64 product by the output type's rounding plus the accumulation type's over k terms, of
the magnitude |a| @ |b| (`bound`). Where BLAS can read a layout, nothing is copied: the tests
make `contiguous()` fail to prove it, and count the BLAS calls a batch layout costs. On the
cpu platform in CI; marked gpu, the same tests run on nvidia through the device fixture.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

from hip_core import Device
from hip_runtime import DeviceTensor, HipBackend, testing
from hip_runtime.ops import gemm_plan

TYPES = {
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
}
#: (unit roundoff of the output type, of the accumulation type)
ROUNDING = {
    "f32": (2.0**-24, 2.0**-24),
    "f64": (2.0**-53, 2.0**-53),
    "f16": (2.0**-11, 2.0**-24),
    "bf16": (2.0**-8, 2.0**-24),
}
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SIGNATURE = "(m?,k),(k,n?)->(m?,n?)"


@pytest.fixture(scope="module", params=["blas", "kernel"])
def backend(
    device: Device, program_cache: Path, request: pytest.FixtureRequest
) -> Iterator[HipBackend]:
    """Every product through BLAS, or every one of depth k <= 128 through the small-product
    kernel (hip_runtime.libraries.small_gemm, which takes the small ones by default on amd and
    nvidia)."""
    with HipBackend(device, small_gemm=0 if request.param == "blas" else 2**62) as backend:
        yield backend


class Calls:
    """The products an op queues (BLAS's or the small-product kernel's calls) and the copies
    it makes (`contiguous()` of a strided tensor, `copy_`)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, backend: HipBackend) -> None:
        self.gemms: list[tuple[Any, int]] = []  # (spec, calls)
        self.copies = self.copies_out = 0
        contiguous, copy = DeviceTensor.contiguous, DeviceTensor.copy_
        for engine in (backend.small_gemm, backend.blas):

            def counted_gemm(
                spec: Any, *args: Any, offsets: Any = ((0, 0, 0),), _gemm: Any = engine.gemm,
                **kw: Any,
            ) -> None:  # fmt: skip
                self.gemms.append((spec, len(offsets)))
                _gemm(spec, *args, offsets=offsets, **kw)

            monkeypatch.setattr(engine, "gemm", counted_gemm)

        def counted_contiguous(tensor: DeviceTensor) -> DeviceTensor:
            self.copies += not tensor.is_contiguous
            return contiguous(tensor)

        def counted_copy(tensor: DeviceTensor, source: DeviceTensor) -> DeviceTensor:
            self.copies_out += 1
            return copy(tensor, source)

        # (no plans of earlier tests: a planned call may take a prepared launch, not `gemm`)
        monkeypatch.setattr(backend, "_plans", None)
        monkeypatch.setattr(DeviceTensor, "contiguous", counted_contiguous)
        monkeypatch.setattr(DeviceTensor, "copy_", counted_copy)

    def reset(self) -> None:
        self.gemms.clear()
        self.copies = self.copies_out = 0


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch, backend: HipBackend) -> Calls:
    return Calls(monkeypatch, backend)


def random(rng: np.random.Generator, shape: Any, dtype: str) -> np.ndarray:
    return rng.standard_normal(shape).astype(TYPES[dtype])


def check(got: np.ndarray, a: np.ndarray, b: np.ndarray, dtype: str, alpha: float = 1.0) -> None:
    """got against alpha · a @ b in float64, within the rounding of `dtype` over k terms."""
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    expected = alpha * np.matmul(wide_a, wide_b)
    magnitude = abs(alpha) * np.matmul(np.abs(wide_a), np.abs(wide_b))
    out, acc = ROUNDING[dtype]
    k = a.shape[-1]
    bound = (2 * out + 2 * (k + 1) * acc) * magnitude + 1e-300
    assert got.dtype == TYPES[dtype] and got.shape == expected.shape
    error = np.abs(got.astype(np.float64) - expected)
    assert (error <= bound).all(), f"max error / bound {np.max(error / bound)}"


def operand(
    data: st.DataObject, backend: HipBackend, rng: np.random.Generator, shape: Any, dtype: str,
    layouts: Any,
) -> tuple[DeviceTensor, np.ndarray]:  # fmt: skip
    """A device tensor of random values in a random layout, maybe a transposed view."""
    array = random(rng, shape, dtype)
    if len(shape) >= 2 and data.draw(st.booleans(), label="transposed view"):
        stored, array = layouts.make(data, backend, np.swapaxes(array, -1, -2).copy())
        return stored.mT, np.swapaxes(array, -1, -2)
    tensor, array = layouts.make(data, backend, array)
    return tensor, array


def output(data: st.DataObject, backend: HipBackend, shape: Any, dtype: str, layouts: Any) -> Any:
    """None, or a zero-filled writable `out` in a random layout (a transposed view too)."""
    kind = data.draw(st.sampled_from(["none", "layout", "mT"]), label="out")
    if kind == "none":
        return None
    zeros = np.zeros(shape, TYPES[dtype])
    if kind == "mT" and len(shape) >= 2:
        return backend.from_numpy(np.swapaxes(zeros, -1, -2).copy()).mT
    tensor, _ = layouts.make(data, backend, zeros)
    writable = all(s or d < 2 for d, s in zip(tensor.shape, tensor.strides, strict=True))
    return tensor if writable else backend.from_numpy(zeros)


@SETTINGS
@given(
    data=st.data(),
    shapes=mutually_broadcastable_shapes(signature=SIGNATURE, max_dims=3, min_side=0, max_side=5),
    dtype=st.sampled_from(sorted(TYPES)),
)
def test_matmul_matches_numpy(
    backend: HipBackend, layouts: Any, calls: Calls, data: st.DataObject, shapes: Any, dtype: str
) -> None:
    calls.reset()
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    (shape_a, shape_b), result = shapes.input_shapes, shapes.result_shape
    a, host_a = operand(data, backend, rng, shape_a, dtype, layouts)
    b, host_b = operand(data, backend, rng, shape_b, dtype, layouts)
    alpha = data.draw(st.sampled_from([1.0, -0.5]), label="alpha")
    # The transpose flags over .mT views give the same product.
    ta = a.ndim >= 2 and data.draw(st.booleans(), label="transpose_a")
    tb = b.ndim >= 2 and data.draw(st.booleans(), label="transpose_b")
    a, b = (a.mT if ta else a), (b.mT if tb else b)
    out = output(data, backend, result, dtype, layouts)
    got = backend.matmul(a, b, transpose_a=ta, transpose_b=tb, alpha=alpha, out=out)
    assert got.shape == result and (out is None or got is out)
    copies, copies_out = calls.copies, calls.copies_out
    check(got.to_numpy(), host_a, host_b, dtype, alpha)
    found = gemm_plan.plan(
        a.shape, a._strides, b.shape, b._strides, ta, tb, a.dtype.itemsize,
        None if out is None else out._strides,
    )  # fmt: skip
    assert copies == found.copy_a + found.copy_b  # copies only where the plan says so
    assert copies_out == found.copy_out


@pytest.mark.parametrize("dtype", sorted(TYPES))
@pytest.mark.parametrize("transposed", ["nn", "tn", "nt", "tt"])
def test_transposed_views_and_flags_need_no_copy(
    backend: HipBackend, calls: Calls, dtype: str, transposed: str
) -> None:
    """.mT views and the transpose flags flip the op, sliced rows set the leading dimension,
    and a batch of 3 x 4 matrices is one strided-batched call."""
    rng = np.random.default_rng(secrets.randbits(32))
    a, b = random(rng, (3, 4, 7, 5), dtype), random(rng, (3, 4, 5, 6), dtype)
    ta, tb = transposed[0] == "t", transposed[1] == "t"
    big_a = np.zeros((3, 4, 7, 9) if not ta else (3, 4, 5, 10), a.dtype)
    if ta:
        big_a[..., :7] = np.swapaxes(a, -1, -2)
        da = backend.from_numpy(big_a)[..., :7].mT  # column-major with leading dimension 10
    else:
        big_a[..., :5] = a
        da = backend.from_numpy(big_a)[..., :5]  # row-major with leading dimension 9
    db = backend.from_numpy(np.swapaxes(b, -1, -2).copy()) if tb else backend.from_numpy(b)
    got = backend.matmul(da, db, transpose_b=tb)
    check(got.to_numpy(), a, b, dtype)
    assert calls.copies == 0 and [(spec.batch, n) for spec, n in calls.gemms] == [(12, 1)]
    transposed_a = backend.from_numpy(np.swapaxes(a, -1, -2).copy())
    check(
        backend.matmul(transposed_a, db, transpose_a=True, transpose_b=tb).to_numpy(), a, b, dtype
    )


@pytest.mark.parametrize("expanded", [False, True], ids=["broadcast", "expanded"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_grouped_query_attention_is_one_call_per_product(
    backend: HipBackend, calls: Calls, dtype: str, expanded: bool
) -> None:
    """q [B, Hkv, G, S, D] @ kᵀ with k [B, Hkv, 1, T, D] (or expanded to G, stride 0) and then
    p @ v fold the group axis into M: one GEMM batch of B·Hkv per product, no copy."""
    rng = np.random.default_rng(secrets.randbits(32))
    batch, heads, group, s, t, d = 2, 3, 4, 5, 7, 8
    q = random(rng, (batch, heads * group, s, d), dtype)
    k, v = random(rng, (batch, heads, 1, t, d), dtype), random(rng, (batch, heads, 1, t, d), dtype)
    dq = backend.from_numpy(q).reshape(batch, heads, group, s, d)
    dk, dv = backend.from_numpy(k), backend.from_numpy(v)
    if expanded:
        dk, dv = dk.expand(batch, heads, group, t, d), dv.expand(batch, heads, group, t, d)
    scores = backend.matmul(dq, dk.mT)
    probabilities = random(rng, scores.shape, dtype)
    out = backend.matmul(backend.from_numpy(probabilities), dv)
    check(scores.to_numpy(), q.reshape(batch, heads, group, s, d), np.swapaxes(k, -1, -2), dtype)
    check(out.to_numpy(), probabilities, v, dtype)
    assert calls.copies == 0
    assert [(spec.m, spec.batch, n) for spec, n in calls.gemms] == [
        (group * s, batch * heads, 1)
    ] * 2


@pytest.mark.parametrize("batch", [1, 2])
def test_strided_out_is_written_in_place(backend: HipBackend, calls: Calls, batch: int) -> None:
    """Attention's p @ v written straight into the heads of a [B, S, H, D] tensor (row
    stride H·D), and a product into a transposed view (computed as its transpose): no copy,
    and for one sequence one strided-batched call over the heads."""
    rng = np.random.default_rng(secrets.randbits(32))
    heads, s, t, d = 3, 5, 6, 4
    p, v = random(rng, (batch, heads, s, t), "f32"), random(rng, (batch, heads, t, d), "f32")
    storage = backend.from_numpy(np.zeros((batch, s, heads, d), np.float32))
    out = storage.permute(0, 2, 1, 3)
    assert backend.matmul(backend.from_numpy(p), backend.from_numpy(v), out=out) is out
    check(np.swapaxes(storage.to_numpy(), 1, 2), p, v, "f32")
    a, b = random(rng, (2, 7, 3), "f32"), random(rng, (3, 5), "f32")
    transposed = backend.from_numpy(np.zeros((2, 5, 7), np.float32)).mT
    backend.matmul(backend.from_numpy(a), backend.from_numpy(b), out=transposed)
    check(transposed.contiguous().to_numpy(), a, b, "f32")
    assert calls.copies_out == 0
    assert [n for _, n in calls.gemms] == [batch, 1]
    assert calls.gemms[0][0].batch == heads and calls.gemms[1][0].m == 5  # Cᵀ: m, n swapped


def test_batch_layouts_that_do_not_merge(backend: HipBackend, calls: Calls) -> None:
    """Batch axes no single stride covers become one strided-batched call per index of the
    others (the largest axis batched); reversed batch axes too. Nothing is copied."""
    rng = np.random.default_rng(secrets.randbits(32))
    a, b = random(rng, (2, 6, 3, 4), "f32"), random(rng, (6, 4, 5), "f32")
    da = backend.from_numpy(np.ascontiguousarray(a.transpose(1, 0, 2, 3))).permute(1, 0, 2, 3)
    check(backend.matmul(da, backend.from_numpy(b)).to_numpy(), a, b, "f32")
    reversed_b = backend.from_numpy(b[::-1].copy())[::-1]  # negative strides: never batched
    check(backend.matmul(da, reversed_b).to_numpy(), a, b, "f32")
    assert calls.copies == 0
    assert [(spec.batch, n) for spec, n in calls.gemms] == [(6, 2), (2, 6)]


def test_layouts_blas_cannot_read_are_copied(backend: HipBackend, calls: Calls) -> None:
    rng = np.random.default_rng(secrets.randbits(32))
    a, b = random(rng, (4, 6), "f32"), random(rng, (3, 5), "f32")
    da = backend.from_numpy(np.repeat(a, 2, axis=1))[:, ::2]  # steps on both axes
    db = backend.from_numpy(b[:1]).expand(3, 5)  # a broadcast row inside the matrix
    got = backend.matmul(da, backend.from_numpy(random(rng, (6, 3), "f32")))
    assert calls.copies == 1 and got.shape == (4, 3)
    check(backend.matmul(backend.from_numpy(a[:3, :3]), db).to_numpy(), a[:3, :3],
          np.broadcast_to(b[:1], (3, 5)), "f32")  # fmt: skip
    assert calls.copies == 2


@pytest.mark.parametrize("dtype", ["f64", "bf16"])
def test_vectors_and_empty_products(backend: HipBackend, dtype: str) -> None:
    rng = np.random.default_rng(secrets.randbits(32))
    v, m = random(rng, 7, dtype), random(rng, (2, 7, 3), dtype)
    check(backend.matmul(backend.from_numpy(v), backend.from_numpy(m)).to_numpy(), v, m, dtype)
    w = random(rng, (3, 7), dtype)
    check(backend.matmul(backend.from_numpy(w), backend.from_numpy(v)).to_numpy(), w, v, dtype)
    check(backend.matmul(backend.from_numpy(v), backend.from_numpy(v)).to_numpy(), v, v, dtype)
    empty_k = backend.matmul(backend.from_numpy(w[:, :0]), backend.from_numpy(m[:, :0]))
    np.testing.assert_array_equal(empty_k.to_numpy(), np.zeros((2, 3, 3), TYPES[dtype]))
    assert backend.matmul(backend.from_numpy(m[:0]), backend.from_numpy(w)).shape == (0, 7, 7)
    # An empty out= writes nothing, so it overlaps nothing wherever its address lies: here
    # inside b, as a view of a zero-byte pooled allocation's may be once that address is
    # handed out again (a hypothesis failure once; slicing never makes one: made directly).
    b = backend.from_numpy(random(rng, (7, 3), dtype))
    inside = DeviceTensor._make(b.buffer, (0, 3), b.dtype, b.dtype.itemsize, None, b.stream, None)
    assert backend.matmul(backend.from_numpy(w[:0]), b, out=inside) is inside


def test_out_and_errors(backend: HipBackend) -> None:
    f32 = np.float32
    a, b = backend.from_numpy(np.ones((2, 3, 4), f32)), backend.from_numpy(np.ones((4, 5), f32))
    out = backend.from_numpy(np.zeros((2, 3, 5), f32))
    assert backend.matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out.to_numpy(), np.full((2, 3, 5), 4, f32))
    bad = [
        ((a, a), "inner dimensions differ"),
        ((a, backend.from_numpy(np.ones((3, 4, 5), f32))), "do not broadcast"),
        ((a, backend.from_numpy(np.ones((4, 5), np.float16))), "dtypes"),
        ((backend.from_numpy(np.ones((3, 4), np.int32)),) * 2, "matmul takes"),
        ((backend.from_numpy(np.float32(1)), b), "too few dimensions"),
        ((a, np.ones((4, 5), f32)), "must be a DeviceTensor"),
    ]
    for args, message in bad:
        with pytest.raises(ValueError, match=message):
            backend.matmul(*args)
    with pytest.raises(ValueError, match="transpose_a"):
        backend.matmul(backend.from_numpy(np.ones(4, f32)), b, transpose_a=True)
    for wrong in (np.zeros((2, 3, 4), f32), np.zeros((2, 3, 5), np.float16)):
        with pytest.raises(ValueError, match="out is"):
            backend.matmul(a, b, out=backend.from_numpy(wrong))
    with pytest.raises(ValueError, match="elements overlap"):
        backend.matmul(a, b, out=backend.from_numpy(np.zeros((1, 3, 5), f32)).expand(2, 3, 5))
    storage = backend.from_numpy(np.zeros(64, f32))
    with pytest.raises(ValueError, match="overlap"):
        backend.matmul(storage[:24].reshape(2, 3, 4), b, out=storage[:30].reshape(2, 3, 5))


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_linear_reads_strided_x_and_weight(backend: HipBackend, calls: Calls, dtype: str) -> None:
    rng = np.random.default_rng(secrets.randbits(32))
    x, w = random(rng, (2, 5, 12), dtype), random(rng, (6, 12), dtype)
    bias = random(rng, 6, dtype)
    wide = np.zeros((2, 5, 16), x.dtype)
    wide[..., :12] = x
    dx = backend.from_numpy(wide)[..., :12]  # a slice of columns: rows of 16 elements
    dw = backend.from_numpy(w.T.copy()).mT  # weight stored [in, out]
    got = backend.linear(dx, dw, backend.from_numpy(bias)).to_numpy()
    out, acc = ROUNDING[dtype]
    expected = x.astype(np.float64) @ w.T.astype(np.float64) + bias.astype(np.float64)
    magnitude = np.abs(x.astype(np.float64)) @ np.abs(w.T.astype(np.float64)) + np.abs(bias)
    assert (np.abs(got.astype(np.float64) - expected) <= (4 * out + 30 * acc) * magnitude).all()
    assert calls.copies == 0 and [(spec.m, spec.batch) for spec, _ in calls.gemms] == [(10, 1)]
    with pytest.raises(ValueError, match=r"x\.contiguous\(\)"):
        backend.linear(backend.from_numpy(wide)[..., ::2][..., :6], dw[:, :6])
    with pytest.raises(ValueError, match="expected"):
        backend.linear(dx, dw.mT)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_mlp_swiglu_reads_strided_x_and_weights(backend: HipBackend, dtype: str) -> None:
    rng = np.random.default_rng(secrets.randbits(32))
    hidden, inter = 16, 40
    x = testing.random(rng, (3, 2, hidden), dtype)
    wg, wu = (
        testing.random(rng, (inter, hidden), dtype, scale=0.2),
        testing.random(rng, (inter, hidden), dtype, scale=0.2),
    )
    wd = testing.random(rng, (hidden, inter), dtype, scale=0.2)
    dx = backend.from_numpy(np.ascontiguousarray(x.transpose(1, 0, 2))).permute(1, 0, 2)
    dwd = backend.from_numpy(wd.T.copy()).mT
    got = backend.mlp_swiglu(dx, *map(backend.from_numpy, (wg, wu)), dwd).to_numpy()
    expected = testing.mlp_swiglu(x, wg, wu, wd)
    testing.assert_close(
        got, expected.value, dtype, expected.magnitude * (1 if dtype == "f32" else 2)
    )
    with pytest.raises(ValueError, match=r"w_down\.contiguous"):
        backend.mlp_swiglu(
            dx,
            backend.from_numpy(wg),
            backend.from_numpy(wu),
            backend.from_numpy(wd.repeat(2, 1))[:, ::2],
        )


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_linear_adds_a_residual(backend: HipBackend, calls: Calls, dtype: str) -> None:
    """linear(x, w, bias, residual=r) = x wᵀ + bias + r: the addends first, BLAS adding the
    product to them (one gemm, beta 1); with and without a bias, into a new tensor and in
    place (out=r), by the checked path and again by the plan (the same bits)."""
    rng = np.random.default_rng(secrets.randbits(32))
    x, w = random(rng, (3, 4, 12), dtype), random(rng, (6, 12), dtype)
    bias, residual = random(rng, 6, dtype), random(rng, (3, 4, 6), dtype)
    out, acc = ROUNDING[dtype]
    dx, dw, db = backend.from_numpy(x), backend.from_numpy(w), backend.from_numpy(bias)
    for with_bias in (True, False):
        expected = testing.linear(x, w, bias if with_bias else None)
        value = expected.value + residual.astype(np.float64)
        magnitude = expected.magnitude + np.abs(residual.astype(np.float64))
        first = None
        for in_place in (False, False, True):  # the second call takes the plan
            dr = backend.from_numpy(residual)
            got = backend.linear(
                dx, dw, db if with_bias else None, residual=dr, out=dr if in_place else None
            ).to_numpy()
            assert (
                np.abs(got.astype(np.float64) - value) <= (4 * out + 30 * acc) * magnitude
            ).all()
            if first is None:
                first = got
            testing.assert_bits_equal(got, first)
            if in_place:
                testing.assert_bits_equal(dr.to_numpy(), got)
            else:
                testing.assert_bits_equal(dr.to_numpy(), residual)  # the residual is read only
    assert calls.copies == 0 and all(spec.m == 12 for spec, _ in calls.gemms)
    dr = backend.from_numpy(residual)
    with pytest.raises(ValueError, match="residual has shape"):
        backend.linear(dx, dw, residual=backend.from_numpy(residual[:, :2].copy()))
    with pytest.raises(ValueError, match=r"residual\.contiguous\(\)"):
        backend.linear(
            dx, dw, residual=backend.from_numpy(residual.transpose(1, 0, 2).copy()).permute(1, 0, 2)
        )
    storage = backend.from_numpy(np.zeros(80, x.dtype))
    with pytest.raises(ValueError, match="overlap"):  # out shares memory with the residual
        backend.linear(
            dx, dw, residual=storage[:72].reshape(3, 4, 6), out=storage[8:].reshape(3, 4, 6)
        )
