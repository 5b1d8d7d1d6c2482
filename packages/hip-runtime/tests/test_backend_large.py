"""8192 x 8192 cases of every HipBackend op and type on the GPU (nvidia platform, marked gpu).

The ops run on the whole tensor; the float64 reference is computed for a random sample of rows
(plus the first and last), which is enough to catch indexing, grid and tail errors at this size
without minutes of host arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import DeviceTensor, HipBackend

if TYPE_CHECKING:
    from conftest import KernelHarness

pytestmark = pytest.mark.parametrize(
    "platform", [pytest.param("nvidia", marks=pytest.mark.gpu)], indirect=True
)
N = 8192
TYPES = ("f32", "f16", "bf16")
EPS = 1e-5


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device, preload=True) as backend:
        yield backend


class Inputs:
    """Two N x N inputs and a row vector of one type, on the host and on the device."""

    def __init__(self, backend: HipBackend, harness: KernelHarness, dtype: str) -> None:
        storage = harness.DTYPES[dtype]
        rng = harness.rng
        self.a = rng.standard_normal((N, N), dtype=np.float32).astype(storage)
        self.b = rng.standard_normal((N, N), dtype=np.float32).astype(storage)
        self.v = rng.standard_normal(N, dtype=np.float32).astype(storage)
        self.da, self.db, self.dv = map(backend.from_numpy, (self.a, self.b, self.v))
        self.rows = np.unique(np.r_[0, N - 1, rng.integers(0, N, 30)])


_cache: dict[str, Inputs] = {}


@pytest.fixture
def inputs(backend: HipBackend, harness: KernelHarness, request: pytest.FixtureRequest) -> Inputs:
    dtype = request.node.callspec.params["dtype"]
    if dtype not in _cache:
        _cache.clear()  # one type's inputs at a time: 3 x 256 MiB of f32
        _cache[dtype] = Inputs(backend, harness, dtype)
    return _cache[dtype]


def sample(tensor: DeviceTensor, rows: np.ndarray) -> np.ndarray:
    """The chosen rows, copied back row by row (views: no full download)."""
    return np.stack([tensor[int(r)].to_numpy() for r in rows])


def f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def silu(x: np.ndarray) -> np.ndarray:
    return np.asarray(x / (1.0 + np.exp(-x)))


ERF = np.vectorize(math.erf)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize(
    "op",
    ["add", "mul", "swiglu", "scale", "silu", "gelu", "add_row_bias", "layernorm", "rmsnorm",
     "softmax"],
)  # fmt: skip
def test_large_ops(
    backend: HipBackend, harness: KernelHarness, inputs: Inputs, op: str, dtype: str
) -> None:
    i, rows = inputs, inputs.rows
    a, b, v = f64(i.a[rows]), f64(i.b[rows]), f64(i.v)
    magnitude: Any = 0.0
    if op in ("add", "mul", "swiglu"):
        result = getattr(backend, op)(i.da, i.db)
        expected = {"add": a + b, "mul": a * b, "swiglu": silu(a) * b}[op]
    elif op == "scale":
        result, expected = backend.scale(i.da, 0.25), 0.25 * a
    elif op == "silu":
        result, expected = backend.silu(i.da), silu(a)
    elif op == "gelu":
        result, expected = backend.gelu(i.da), 0.5 * a * (1.0 + ERF(a / math.sqrt(2.0)))
    elif op == "add_row_bias":
        result, expected = backend.add_row_bias(i.da, i.dv), a + v
    elif op == "layernorm":
        result = backend.layernorm(i.da, i.dv, i.dv, eps=EPS)
        rstd = 1.0 / np.sqrt(a.var(-1, keepdims=True) + np.float64(np.float32(EPS)))
        expected = (a - a.mean(-1, keepdims=True)) * rstd * v + v
        magnitude = np.abs(a) * rstd * np.abs(v) + np.abs(v)
    elif op == "rmsnorm":
        result = backend.rmsnorm(i.da, i.dv, eps=EPS)
        expected = a / np.sqrt((a * a).mean(-1, keepdims=True) + np.float64(np.float32(EPS))) * v
    else:
        result = backend.softmax(i.da, scale=0.5)
        e = np.exp(0.5 * a - (0.5 * a).max(-1, keepdims=True))
        expected = e / e.sum(-1, keepdims=True)
    harness.assert_close(sample(result, rows), expected, dtype, magnitude)


@pytest.mark.parametrize("dtype", TYPES)
def test_large_casts(
    backend: HipBackend, harness: KernelHarness, inputs: Inputs, dtype: str
) -> None:
    for target in TYPES:
        result = backend.cast(inputs.da, harness.DTYPES[target])
        expected = inputs.a[inputs.rows].astype(np.float32).astype(harness.DTYPES[target])
        harness.assert_bits_equal(sample(result, inputs.rows), expected)


@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
@pytest.mark.parametrize("dtype", TYPES)
def test_large_matmul(
    backend: HipBackend, harness: KernelHarness, inputs: Inputs, dtype: str, transpose_b: bool
) -> None:
    rows = inputs.rows[:12]
    result = backend.matmul(inputs.da, inputs.db, transpose_b=transpose_b)
    a, b = f64(inputs.a[rows]), f64(inputs.b)
    b = b.T if transpose_b else b
    harness.assert_close(sample(result, rows), a @ b, dtype, np.abs(a) @ np.abs(b))


@pytest.mark.parametrize("dtype", TYPES)
def test_large_linear_and_mlp_swiglu(
    backend: HipBackend, harness: KernelHarness, inputs: Inputs, dtype: str
) -> None:
    rows = inputs.rows[:8]
    # Weights scaled by 1/sqrt(N) keep the MLP's values inside f16's range; the reference
    # reads them back as stored.
    w = backend.scale(inputs.db, 1.0 / math.sqrt(N))
    w_host = f64(w.to_numpy())
    x = f64(inputs.a[rows])
    result = backend.linear(inputs.da, w, inputs.dv)
    expected = x @ w_host.T + f64(inputs.v)
    magnitude = np.abs(x) @ np.abs(w_host).T + np.abs(f64(inputs.v))
    harness.assert_close(sample(result, rows), expected, dtype, magnitude)
    del result
    result = backend.mlp_swiglu(inputs.da, w, w, w)
    h = f64((silu(x @ w_host.T) * (x @ w_host.T)).astype(harness.DTYPES[dtype]))
    magnitude = np.abs(h) @ np.abs(w_host).T
    harness.assert_close(sample(result, rows), h @ w_host.T, dtype, 2 * magnitude)


@pytest.mark.parametrize("dtype", TYPES)
def test_large_rope_and_embedding(
    backend: HipBackend, harness: KernelHarness, inputs: Inputs, dtype: str
) -> None:
    heads, head_dim = N // 128, 128  # the N x N input as [N tokens, heads, 128]
    angles = np.arange(N)[:, None] * 10000.0 ** (-np.arange(0, head_dim, 2) / head_dim)
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    x = inputs.da.reshape(N, heads, head_dim)
    result = backend.rope(x, backend.from_numpy(cos), backend.from_numpy(sin)).reshape(N, N)
    rows = inputs.rows
    a = f64(inputs.a[rows]).reshape(len(rows), heads, head_dim)
    c, s = f64(cos[rows])[:, None, :], f64(sin[rows])[:, None, :]
    first, second = a[..., : head_dim // 2], a[..., head_dim // 2 :]
    expected = np.concatenate([first * c - second * s, second * c + first * s], axis=-1)
    harness.assert_close(sample(result, rows), expected.reshape(len(rows), N), dtype)
    del result
    ids = harness.rng.integers(-2, N + 2, N).astype(np.int32)  # a few out of range
    result = backend.embedding(backend.from_numpy(ids), inputs.da)
    known = (ids[rows] >= 0) & (ids[rows] < N)
    expected = np.zeros((len(rows), N), inputs.a.dtype)
    expected[known] = inputs.a[ids[rows][known]]
    harness.assert_bits_equal(sample(result, rows), expected)
