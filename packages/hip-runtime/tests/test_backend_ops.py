"""Every HipBackend op against its float64 numpy reference (hip_runtime.testing), in every float
type, over odd shapes (1 x 1, 3 x 1000, 7 x 4097), on the selected platform (cpu in CI; nvidia
marked gpu). The 8192 x 8192 cases are in test_backend_large.py (gpu only). Inputs are random
numbers stored in the op's type, so the reference sees exactly what the device sees; tolerances
are testing.TOLERANCE: a few units of the output type's rounding.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend, testing
from hip_runtime.testing import DTYPES, assert_bits_equal, assert_close

if TYPE_CHECKING:
    from conftest import KernelHarness

TYPES = ("f32", "f16", "bf16")
SHAPES = [(1, 1), (3, 1000), (7, 4097)]
EPS = 1e-5


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("op", ["add", "mul", "swiglu"])
def test_binary(
    backend: HipBackend, harness: KernelHarness, op: str, dtype: str, shape: tuple[int, int]
) -> None:
    a, b = harness.random(shape, dtype, 2.0), harness.random(shape, dtype, 2.0)
    got = getattr(backend, op)(backend.from_numpy(a), backend.from_numpy(b)).to_numpy()
    assert_close(got, getattr(testing, op)(a, b), dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("op", ["silu", "gelu", "gelu_tanh", "scale"])
def test_unary(
    backend: HipBackend, harness: KernelHarness, op: str, dtype: str, shape: tuple[int, int]
) -> None:
    x = harness.random(shape, dtype, 3.0)
    dx = backend.from_numpy(x)
    if op == "scale":
        got, expected = backend.scale(dx, 0.375).to_numpy(), testing.scale(x, 0.375)
    elif op == "silu":
        got, expected = backend.silu(dx).to_numpy(), testing.silu(x)
    elif op == "gelu":
        got, expected = backend.gelu(dx).to_numpy(), testing.gelu(x)
    else:
        got = backend.gelu(dx, approximate="tanh").to_numpy()
        expected = testing.gelu(x, approximate="tanh")
    assert_close(got, expected, dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_adds_a_bias_as_it_reads(
    backend: HipBackend,
    harness: KernelHarness,
    approximate: str,
    dtype: str,
    shape: tuple[int, int],
) -> None:
    """gelu(x, bias=b) = gelu(x + b) in one pass, b a row of x's last axis; in place too."""
    x, bias = harness.random(shape, dtype, 3.0), harness.random(shape[1], dtype)
    dx = backend.from_numpy(x)
    got = backend.gelu(dx, bias=backend.from_numpy(bias), approximate=approximate).to_numpy()
    summed = x.astype(np.float64) + bias.astype(np.float64)
    assert_close(got, testing.gelu(summed, approximate=approximate), dtype)
    backend.gelu(dx, bias=backend.from_numpy(bias), approximate=approximate, out=dx)
    assert_bits_equal(dx.to_numpy(), got)
    with pytest.raises(ValueError, match="bias must have shape"):
        backend.gelu(dx, bias=backend.from_numpy(np.zeros(shape[1] + 1, x.dtype)))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_add_row_bias(
    backend: HipBackend, harness: KernelHarness, dtype: str, shape: tuple[int, int]
) -> None:
    x, bias = harness.random(shape, dtype), harness.random(shape[1], dtype)
    got = backend.add_row_bias(backend.from_numpy(x), backend.from_numpy(bias)).to_numpy()
    assert_close(got, testing.add_row_bias(x, bias), dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_norms_and_softmax(
    backend: HipBackend, harness: KernelHarness, dtype: str, shape: tuple[int, int]
) -> None:
    x = harness.random(shape, dtype, scale=2.0, shift=1.0)
    w, b = harness.random(shape[1], dtype), harness.random(shape[1], dtype)
    dx, dw, db = backend.from_numpy(x), backend.from_numpy(w), backend.from_numpy(b)
    layernorm = backend.layernorm(dx, dw, db, eps=EPS).to_numpy()
    assert_close(layernorm, testing.layernorm(x, w, b, eps=EPS), dtype)
    assert_close(backend.rmsnorm(dx, dw, eps=EPS).to_numpy(), testing.rmsnorm(x, w, eps=EPS), dtype)
    got = backend.softmax(dx, scale=0.7).to_numpy()
    assert_close(got, testing.softmax(x, scale=0.7), dtype)


def test_norms_without_affine_and_causal_softmax(
    backend: HipBackend, harness: KernelHarness
) -> None:
    x = harness.random((6, 37), "f32", scale=2.0, shift=1.0)
    dx = backend.from_numpy(x)
    assert_close(backend.layernorm(dx, eps=EPS).to_numpy(), testing.layernorm(x, eps=EPS), "f32")
    assert_close(backend.rmsnorm(dx, eps=EPS).to_numpy(), testing.rmsnorm(x, eps=EPS), "f32")
    got = backend.softmax(dx, causal_rows=3).to_numpy()  # 2 heads x 3 queries over 37 keys
    last = np.arange(6) % 3 + 37 - 3
    assert (got[np.arange(37)[None, :] > last[:, None]] == 0).all()
    np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-5)
    assert_close(got, testing.softmax(x, causal_rows=3), "f32")


MATMULS = [(1, 1, 1), (3, 1000, 5), (7, 4097, 3)]  # (m, k, n)


@pytest.mark.parametrize("transposed", ["nn", "tn", "nt", "tt"])
@pytest.mark.parametrize("mkn", MATMULS, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_matmul(
    backend: HipBackend,
    harness: KernelHarness,
    dtype: str,
    mkn: tuple[int, int, int],
    transposed: str,
) -> None:
    m, k, n = mkn
    a, b = harness.random((m, k), dtype), harness.random((k, n), dtype)
    ta, tb = transposed[0] == "t", transposed[1] == "t"
    a = np.ascontiguousarray(a.T) if ta else a  # stored transposed
    b = np.ascontiguousarray(b.T) if tb else b
    got = backend.matmul(
        backend.from_numpy(a), backend.from_numpy(b), transpose_a=ta, transpose_b=tb
    ).to_numpy()
    assert_close(got, testing.matmul(a, b, transpose_a=ta, transpose_b=tb), dtype)


@pytest.mark.parametrize("batches", [(4, 4), (4, 1), (1, 4), (4, 0)], ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_batched_matmul_broadcasts(
    backend: HipBackend, harness: KernelHarness, dtype: str, batches: tuple[int, int]
) -> None:
    shape_a = (batches[0], 5, 33) if batches[0] else (5, 33)
    shape_b = (batches[1], 33, 6) if batches[1] else (33, 6)
    a, b = harness.random(shape_a, dtype), harness.random(shape_b, dtype)
    got = backend.matmul(backend.from_numpy(a), backend.from_numpy(b)).to_numpy()
    assert got.shape == (4, 5, 6)
    assert_close(got, testing.matmul(a, b), dtype)


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 1000), (7, 4097, 3)], ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_linear(
    backend: HipBackend, harness: KernelHarness, dtype: str, shape: tuple[int, int, int]
) -> None:
    tokens, features_in, features_out = shape
    x = harness.random((2, tokens, features_in), dtype)
    w, b = harness.random((features_out, features_in), dtype), harness.random(features_out, dtype)
    got = backend.linear(backend.from_numpy(x), backend.from_numpy(w), backend.from_numpy(b))
    assert got.shape == (2, tokens, features_out)
    assert_close(got.to_numpy(), testing.linear(x, w, b), dtype)


@pytest.mark.parametrize("dtype", TYPES)
def test_mlp_swiglu_is_the_llama_mlp(
    backend: HipBackend, harness: KernelHarness, dtype: str
) -> None:
    hidden, inter = 48, 136
    x = harness.random((3, 5, hidden), dtype)
    wg, wu = (
        harness.random((inter, hidden), dtype, 0.2),
        harness.random((inter, hidden), dtype, 0.2),
    )
    wd = harness.random((hidden, inter), dtype, 0.2)
    got = backend.mlp_swiglu(*map(backend.from_numpy, (x, wg, wu, wd))).to_numpy()
    # The reference rounds the intermediate to the storage type, as the backend stores it; that
    # rounding may differ by one unit: allow it on top of the output's.
    expected = testing.mlp_swiglu(x, wg, wu, wd)
    assert_close(got, expected.value, dtype, expected.magnitude * (1 if dtype == "f32" else 2))


@pytest.mark.parametrize("interleaved", [False, True], ids=["half", "interleaved"])
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("given_positions", [True, False], ids=["positions", "index"])
def test_rope(
    backend: HipBackend, harness: KernelHarness, dtype: str, interleaved: bool,
    given_positions: bool,
) -> None:  # fmt: skip
    tokens, heads, head_dim, rot, max_position = 7, 3, 96, 64, 40
    cos, sin = testing.rope_tables(max_position, rot)
    pos = harness.rng.integers(0, max_position, tokens) if given_positions else np.arange(tokens)
    pos = pos.astype(np.int32)
    x = harness.random((tokens, heads, head_dim), dtype)
    got = backend.rope(
        backend.from_numpy(x), backend.from_numpy(cos), backend.from_numpy(sin),
        backend.from_numpy(pos) if given_positions else None, rot_dim=rot, interleaved=interleaved,
    ).to_numpy()  # fmt: skip
    expected = testing.rope(x, cos, sin, pos, rot_dim=rot, interleaved=interleaved)
    assert_close(got, expected, dtype)


def test_rope_positions_outside_the_tables_give_zero_pairs(backend: HipBackend) -> None:
    # The op hands the kernel the tables' length: positions past it (or negative) read no table.
    cos, sin = testing.rope_tables(4, 2)
    x = np.ones((4, 1, 4), np.float32)
    pos = backend.from_numpy(np.array([0, 4, -1, 2**31 - 1], np.int32))
    got = backend.rope(backend.from_numpy(x), *map(backend.from_numpy, (cos, sin)), pos, rot_dim=2)
    expected = testing.rope(x, cos, sin, [0, 0, 0, 0], rot_dim=2)
    expected[1:, :, :2] = 0  # the rotated pair of each position outside [0, 4); the tail is kept
    assert_close(got.to_numpy(), expected, "f32")


@pytest.mark.parametrize("id_type", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 1000, 17), (7, 4097, 5)], ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_embedding(
    backend: HipBackend,
    harness: KernelHarness,
    dtype: str,
    shape: tuple[int, int, int],
    id_type: type,
) -> None:
    tokens, dim, vocab = shape
    table = harness.random((vocab, dim), dtype)
    ids = harness.rng.integers(-1, vocab + 1, (1, tokens)).astype(id_type)
    got = backend.embedding(backend.from_numpy(ids), backend.from_numpy(table)).to_numpy()
    assert_bits_equal(got, testing.embedding(ids, table))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("target", TYPES)
@pytest.mark.parametrize("source", TYPES)
def test_cast(
    backend: HipBackend, harness: KernelHarness, source: str, target: str, shape: tuple[int, int]
) -> None:
    x = harness.random(shape, source, 100.0)
    got = backend.cast(backend.from_numpy(x), DTYPES[target]).to_numpy()
    assert_bits_equal(got, testing.cast(x, target))


@pytest.mark.parametrize("dtype", TYPES)
def test_transpose(backend: HipBackend, harness: KernelHarness, dtype: str) -> None:
    x = harness.random((7, 4097), dtype)
    assert_bits_equal(backend.transpose(backend.from_numpy(x)).to_numpy(), testing.transpose(x))


@pytest.mark.parametrize("dtype", TYPES)
def test_batched_transposed_matmul_with_alpha(
    backend: HipBackend, harness: KernelHarness, dtype: str
) -> None:
    a, b = harness.random((3, 9, 17), dtype), harness.random((3, 17, 5), dtype)
    da = backend.from_numpy(np.ascontiguousarray(a.transpose(0, 2, 1)))  # stored [3, 17, 9]
    db = backend.from_numpy(np.ascontiguousarray(b.transpose(0, 2, 1)))  # stored [3, 5, 17]
    got = backend.matmul(da, db, transpose_a=True, transpose_b=True, alpha=0.5).to_numpy()
    assert_close(got, testing.matmul(a, b, alpha=0.5), dtype)
