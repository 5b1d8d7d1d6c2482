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
from hip_runtime import DeviceTensor, HipBackend, testing
from hip_runtime.testing import DTYPES, assert_bits_equal, assert_close

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
        storage = DTYPES[dtype]
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
    a, b, v = i.a[rows], i.b[rows], i.v
    expected: Any
    if op in ("add", "mul", "swiglu"):
        result, expected = getattr(backend, op)(i.da, i.db), getattr(testing, op)(a, b)
    elif op == "scale":
        result, expected = backend.scale(i.da, 0.25), testing.scale(a, 0.25)
    elif op == "silu":
        result, expected = backend.silu(i.da), testing.silu(a)
    elif op == "gelu":
        result, expected = backend.gelu(i.da), testing.gelu(a)
    elif op == "add_row_bias":
        result, expected = backend.add_row_bias(i.da, i.dv), testing.add_row_bias(a, v)
    elif op == "layernorm":
        result = backend.layernorm(i.da, i.dv, i.dv, eps=EPS)
        expected = testing.layernorm(a, v, v, eps=EPS)
    elif op == "rmsnorm":
        result, expected = backend.rmsnorm(i.da, i.dv, eps=EPS), testing.rmsnorm(a, v, eps=EPS)
    else:
        result, expected = backend.softmax(i.da, scale=0.5), testing.softmax(a, scale=0.5)
    assert_close(sample(result, rows), expected, dtype)


@pytest.mark.parametrize("dtype", TYPES)
def test_large_casts(
    backend: HipBackend, harness: KernelHarness, inputs: Inputs, dtype: str
) -> None:
    for target in TYPES:
        result = backend.cast(inputs.da, DTYPES[target])
        expected = testing.cast(inputs.a[inputs.rows], target)
        assert_bits_equal(sample(result, inputs.rows), expected)


@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
@pytest.mark.parametrize("dtype", TYPES)
def test_large_matmul(
    backend: HipBackend, harness: KernelHarness, inputs: Inputs, dtype: str, transpose_b: bool
) -> None:
    rows = inputs.rows[:12]
    result = backend.matmul(inputs.da, inputs.db, transpose_b=transpose_b)
    expected = testing.matmul(inputs.a[rows], inputs.b, transpose_b=transpose_b)
    assert_close(sample(result, rows), expected, dtype)


@pytest.mark.parametrize("dtype", TYPES)
def test_large_linear_and_mlp_swiglu(
    backend: HipBackend, harness: KernelHarness, inputs: Inputs, dtype: str
) -> None:
    rows = inputs.rows[:8]
    # Weights scaled by 1/sqrt(N) keep the MLP's values inside f16's range; the reference
    # reads them back as stored.
    w = backend.scale(inputs.db, 1.0 / math.sqrt(N))
    w_host, x = w.to_numpy(), inputs.a[rows]
    result = backend.linear(inputs.da, w, inputs.dv)
    assert_close(sample(result, rows), testing.linear(x, w_host, inputs.v), dtype)
    del result
    result = backend.mlp_swiglu(inputs.da, w, w, w)
    expected = testing.mlp_swiglu(x, w_host, w_host, w_host)
    assert_close(sample(result, rows), expected.value, dtype, 2 * expected.magnitude)


@pytest.mark.parametrize("dtype", TYPES)
def test_large_rope_and_embedding(
    backend: HipBackend, harness: KernelHarness, inputs: Inputs, dtype: str
) -> None:
    heads, head_dim = N // 128, 128  # the N x N input as [N tokens, heads, 128]
    cos, sin = testing.rope_tables(N, head_dim)
    x = inputs.da.reshape(N, heads, head_dim)
    result = backend.rope(x, backend.from_numpy(cos), backend.from_numpy(sin)).reshape(N, N)
    rows = inputs.rows  # token r sits at position r
    a = inputs.a[rows].reshape(len(rows), heads, head_dim)
    expected = testing.rope(a, cos, sin, rows).reshape(len(rows), N)
    assert_close(sample(result, rows), expected, dtype)
    del result
    ids = harness.rng.integers(-2, N + 2, N).astype(np.int32)  # a few out of range
    result = backend.embedding(backend.from_numpy(ids), inputs.da)
    assert_bits_equal(sample(result, rows), testing.embedding(ids[rows], inputs.a))
