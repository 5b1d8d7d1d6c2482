"""Elementwise kernels, activations, casts, rope, embedding and transpose: every kernel x type
against a float64 numpy reference on the selected platform, with fresh random inputs stored in
the kernel's type and poisoned outputs (see KernelHarness in conftest.py). The row kernels
(norms, softmax) are in test_kernels_rows.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import KernelHarness

TYPES = ("f32", "f16", "bf16")
SHAPES = [(1, 1), (3, 1000), (7, 4097)]


def grid_for(n: int, block: int) -> int:
    """A small grid (at most 13 blocks), so that the grid-stride loops take several turns."""
    return max(1, min(-(-n // block), 13))


def silu(x: np.ndarray) -> np.ndarray:
    return np.asarray(x / (1.0 + np.exp(-x)))


ERF = np.vectorize(math.erf)
UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "silu": silu,
    "gelu_erf": lambda x: 0.5 * x * (1.0 + ERF(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: (
        0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    ),
}
BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "mul": np.multiply,
    "swiglu": lambda gate, up: silu(gate) * up,  # silu of the gate, not of up
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(harness: KernelHarness, op: str, dtype: str, shape: tuple[int, int]) -> None:
    n = math.prod(shape)
    a, b = harness.random(n, dtype, 2.0), harness.random(n, dtype, 2.0)
    da, db, out = harness.upload(a), harness.upload(b), harness.output(n, dtype)
    source = "activations.hip" if op == "swiglu" else "elementwise.hip"
    harness.kernel(source, f"{op}_{dtype}").launch(grid_for(n, 64), 64, da, db, out.buffer, n)
    expected = BINARY[op](a.astype(np.float64), b.astype(np.float64))
    harness.assert_close(out.read(), expected, dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_activation(harness: KernelHarness, op: str, dtype: str, shape: tuple[int, int]) -> None:
    n = math.prod(shape)
    x = harness.random(n, dtype, 3.0)
    dx, out = harness.upload(x), harness.output(n, dtype)
    harness.kernel("activations.hip", f"{op}_{dtype}").launch(
        grid_for(n, 64), 64, dx, out.buffer, n
    )
    harness.assert_close(out.read(), UNARY[op](x.astype(np.float64)), dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_scale(harness: KernelHarness, dtype: str, shape: tuple[int, int]) -> None:
    n = math.prod(shape)
    x, alpha = harness.random(n, dtype, 3.0), float(harness.rng.uniform(-3, 3))
    dx, out = harness.upload(x), harness.output(n, dtype)
    kernel = harness.kernel("elementwise.hip", f"scale_{dtype}")
    kernel.launch(grid_for(n, 64), 64, dx, out.buffer, alpha, n)
    expected = float(np.float32(alpha)) * x.astype(np.float64)  # alpha travels as a float
    harness.assert_close(out.read(), expected, dtype)


def test_swiglu_is_silu_of_the_gate(harness: KernelHarness) -> None:
    gate, up = np.array([2.0, -1.0], np.float32), np.array([-3.0, 0.5], np.float32)
    dg, du, out = harness.upload(gate), harness.upload(up), harness.output(2, "f32")
    harness.kernel("activations.hip", "swiglu_f32").launch(1, 2, dg, du, out.buffer, 2)
    got = out.read().astype(np.float64)
    np.testing.assert_allclose(got, silu(gate.astype(np.float64)) * up, rtol=1e-6)
    assert not np.allclose(got, gate * silu(up.astype(np.float64)))  # the seeds' bug


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_add_row_bias(harness: KernelHarness, dtype: str, shape: tuple[int, int]) -> None:
    rows, cols = shape
    x, bias = harness.random(shape, dtype, 2.0), harness.random(cols, dtype)
    dx, dbias, out = harness.upload(x), harness.upload(bias), harness.output(shape, dtype)
    kernel = harness.kernel("elementwise.hip", f"add_row_bias_{dtype}")
    kernel.launch(grid_for(rows * cols, 64), 64, dx, dbias, out.buffer, rows, cols)
    harness.assert_close(out.read(), x.astype(np.float64) + bias.astype(np.float64), dtype)


@pytest.mark.parametrize("dtype", TYPES)
def test_unaligned_views_take_the_scalar_path(harness: KernelHarness, dtype: str) -> None:
    n = 1001
    a, b = harness.random(n + 1, dtype), harness.random(n + 1, dtype)
    da, db, out = harness.upload(a), harness.upload(b), harness.output(n + 1, dtype)
    size = a.dtype.itemsize  # one element in: 2- or 4-byte aligned, never 16
    kernel = harness.kernel("elementwise.hip", f"add_{dtype}")
    kernel.launch(5, 64, da.view(size), db.view(size), out.buffer.view(size), n)
    got = out.read()
    assert np.isnan(got[0].astype(np.float64))  # before the views: untouched
    harness.assert_close(got[1:], a[1:].astype(np.float64) + b[1:].astype(np.float64), dtype)


# --- casts --------------------------------------------------------------------------------


def cast_inputs(harness: KernelHarness, n: int, source: str) -> np.ndarray:
    """Every kind of value: random bit patterns (NaNs, infinities and subnormals of every type;
    for a 16-bit source, every value there is), values across the f16 range and exact ties
    halfway between neighbouring f16 values."""
    rng = harness.rng
    if source != "f32":
        return rng.integers(0, 2**16, n, dtype=np.uint16).view(harness.DTYPES[source])
    with np.errstate(invalid="ignore"):  # signalling NaNs among the bit patterns
        bits = rng.integers(0, 2**32, n, dtype=np.uint32).view(np.float32).astype(np.float64)
    spread = np.ldexp(rng.uniform(1, 2, n), rng.integers(-26, 17, n)) * rng.choice([-1, 1], n)
    halves = rng.integers(0, 0x7BFF, n, dtype=np.uint16).view(np.float16)
    ties = (halves.astype(np.float64) + np.nextafter(halves, np.float16(np.inf))) / 2
    pick = rng.integers(0, 3, n)
    return np.where(pick == 0, bits, np.where(pick == 1, spread, ties)).astype(np.float32)


@pytest.mark.parametrize("n", [1, 1000, 7 * 4097])
@pytest.mark.parametrize(("source", "target"), [(a, b) for a in TYPES for b in TYPES if a != b])
def test_cast_rounds_once_to_nearest_even(
    harness: KernelHarness, source: str, target: str, n: int
) -> None:
    x = cast_inputs(harness, n, source)
    dx, out = harness.upload(x), harness.output(n, target)
    kernel = harness.kernel("cast.hip", f"cast_{source}_to_{target}")
    kernel.launch(grid_for(n, 64), 64, dx, out.buffer, n)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = x.astype(np.float32).astype(harness.DTYPES[target])  # widening is exact
    harness.assert_bits_equal(out.read(), expected)


# --- rope, embedding, transpose -------------------------------------------------------------


def rope_reference(
    x: np.ndarray, cos: np.ndarray, sin: np.ndarray, positions: np.ndarray, rot: int, pairs: str
) -> np.ndarray:
    out = x.astype(np.float64)
    c = cos[positions][:, None, :].astype(np.float64)  # [tokens, 1 (heads), rot/2]
    s = sin[positions][:, None, :].astype(np.float64)
    if pairs == "interleaved":
        first, second = slice(0, rot, 2), slice(1, rot, 2)
    else:
        first, second = slice(0, rot // 2), slice(rot // 2, rot)
    a, b = out[..., first].copy(), out[..., second].copy()
    out[..., first], out[..., second] = a * c - b * s, b * c + a * s
    return out


@pytest.mark.parametrize("given_positions", [True, False], ids=["positions", "null"])
@pytest.mark.parametrize("shape", [(1, 1, 2, 2), (3, 5, 64, 64), (7, 3, 96, 32)], ids=str)
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("pairs", ["half", "interleaved"])
def test_rope(
    harness: KernelHarness,
    pairs: str,
    dtype: str,
    shape: tuple[int, int, int, int],
    given_positions: bool,
) -> None:
    tokens, heads, head_dim, rot = shape  # rot < head_dim: partial rotary, the rest is copied
    max_position = 50
    angles = np.arange(max_position)[:, None] * 10000.0 ** (-np.arange(0, rot, 2) / rot)
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    if given_positions:
        positions = harness.rng.integers(0, max_position, tokens).astype(np.int32)
    else:
        positions = np.arange(tokens, dtype=np.int32)  # what a null pointer means
    x = harness.random((tokens, heads, head_dim), dtype)
    dx, dcos, dsin = harness.upload(x), harness.upload(cos), harness.upload(sin)
    dpos = harness.upload(positions) if given_positions else None
    out = harness.output(x.shape, dtype)
    harness.kernel("rope.hip", f"rope_{pairs}_{dtype}").launch(
        grid_for(x.size, 64), 64, dx, dcos, dsin, dpos, out.buffer, tokens, heads, head_dim, rot
    )
    harness.assert_close(out.read(), rope_reference(x, cos, sin, positions, rot, pairs), dtype)


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 1000, 17), (7, 4097, 5)], ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_embedding_gathers_rows_and_zeroes_unknown_ids(
    harness: KernelHarness, dtype: str, shape: tuple[int, int, int]
) -> None:
    tokens, dim, vocab = shape
    table = harness.random((vocab, dim), dtype)
    ids = harness.rng.integers(-2, vocab + 2, tokens).astype(np.int32)  # some out of range
    ids[0] = vocab - 1
    dids, dtable, out = (
        harness.upload(ids),
        harness.upload(table),
        harness.output((tokens, dim), dtype),
    )
    kernel = harness.kernel("embedding.hip", f"embedding_{dtype}")
    kernel.launch(grid_for(tokens * dim, 64), 64, dids, dtable, out.buffer, tokens, dim, vocab)
    known = (ids >= 0) & (ids < vocab)
    expected = np.zeros((tokens, dim), table.dtype)
    expected[known] = table[ids[known]]
    harness.assert_bits_equal(out.read(), expected)


@pytest.mark.parametrize("shape", [(1, 1), (3, 1000), (7, 4097), (33, 65)], ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_transpose(harness: KernelHarness, dtype: str, shape: tuple[int, int]) -> None:
    rows, cols = shape
    x = harness.random(shape, dtype)
    dx, out = harness.upload(x), harness.output((cols, rows), dtype)
    tiles = -(-rows // 32) * -(-cols // 32)
    kernel = harness.kernel("transpose.hip", f"transpose_{dtype}")
    kernel.launch(min(tiles, 5), (32, 8), dx, out.buffer, rows, cols)  # blocks stride over tiles
    harness.assert_bits_equal(out.read(), np.ascontiguousarray(x.T))
