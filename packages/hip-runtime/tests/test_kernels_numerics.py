"""swiglu's gate, the pointwise drivers (rows path, scalar tail, strided path), casts, rope,
embedding and transpose: every kernel x type
against its float64 numpy reference (hip_runtime.testing) on the selected platform, with fresh
random inputs stored in the kernel's type and poisoned outputs (see KernelHarness in
conftest.py). The row kernels (norms, softmax) are in test_kernels_rows.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from hip_runtime import HipBackend, testing
from hip_runtime.testing import DTYPES, assert_bits_equal, assert_close

if TYPE_CHECKING:
    from conftest import KernelHarness

TYPES = ("f32", "f16", "bf16")
SHAPES = [(1, 1), (3, 1000), (7, 4097)]


def grid_for(n: int, block: int) -> int:
    """A small grid (at most 13 blocks), so that the grid-stride loops take several turns."""
    return max(1, min(-(-n // block), 13))


def test_swiglu_is_silu_of_the_gate(harness: KernelHarness) -> None:
    gate, up = np.array([2.0, -1.0], np.float32), np.array([-3.0, 0.5], np.float32)
    with HipBackend(harness.device) as backend:
        got = backend.swiglu(backend.from_numpy(gate), backend.from_numpy(up)).to_numpy()
    np.testing.assert_allclose(got.astype(np.float64), testing.silu(gate) * up, rtol=1e-6)
    assert not np.allclose(got, gate * testing.silu(up))  # the seeds' bug


# --- the pointwise drivers (kernels/pointwise.h), launched by hand -------------------------

ADD = 0  # binary.hip's op code of add (hip_runtime.ops.pointwise_codes.BINARY_OPS)


@pytest.mark.parametrize("shape", [(1, 8), (3, 1000), (7, 4096), (5, 16)], ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_rows_path_with_a_broadcast_row_and_column(
    harness: KernelHarness, dtype: str, shape: tuple[int, int]
) -> None:
    """binary_<t>'s rows path (columns of whole 16-byte vectors: the host sends others to the
    strided path): [rows, cols] + [cols] (row stride 0), then + [rows, 1] (inner stride 0), on
    a small grid (the loops take several turns), into poisoned outputs."""
    rows, cols = shape
    x, row, col = (harness.random(s, dtype, 2.0) for s in (shape, cols, (rows, 1)))
    dx, drow, dcol = harness.upload(x), harness.upload(row), harness.upload(col)
    kernel = harness.kernel("binary.hip", f"binary_{dtype}")
    for other, strides, expected in ((drow, (0, 1), x + row), (dcol, (1, 0), x + col)):
        out = harness.output(shape, dtype)
        kernel.launch(grid_for(rows * cols // 4, 64), 64, ADD, dx, other, out.buffer, rows, cols,
                      cols, strides[0], cols, 1, strides[1], 0, 0.0, 0)  # fmt: skip
        assert_close(out.read(), testing.add(x, expected - x), dtype)


@pytest.mark.parametrize("dtype", TYPES)
def test_unaligned_views_and_odd_sizes(harness: KernelHarness, dtype: str) -> None:
    """What the host gives the strided path (rank 1 here); the rows path writes nothing."""
    n = 1001
    a, b = harness.random(n + 1, dtype), harness.random(n + 1, dtype)
    da, db, out = harness.upload(a), harness.upload(b), harness.output(n + 1, dtype)
    size = a.dtype.itemsize  # one element in: 2- or 4-byte aligned, never 16
    views = (da.view(size), db.view(size), out.buffer.view(size))
    harness.kernel("binary.hip", f"binary_{dtype}").launch(
        5, 64, ADD, *views, 1, n, 0, 0, 0, 1, 1, 0, 0.0, 0
    )
    assert np.isnan(out.read().astype(np.float64)).all()
    pad = (0,) * 7
    harness.kernel("binary.hip", f"binary_any_{dtype}").launch(
        5, 64, ADD, *views, n, 1, n, *pad, 1, *pad, 1, *pad, 1, *pad, 0, 0.0, 0
    )
    got = out.read()
    assert np.isnan(got[0].astype(np.float64))  # before the views: untouched
    assert_close(got[1:], testing.add(a[1:], b[1:]), dtype)


@pytest.mark.parametrize("dtype", TYPES)
def test_strided_path_reads_any_strides(harness: KernelHarness, dtype: str) -> None:
    """binary_any_<t>: a transposed, reversed [7, 33] view plus a broadcast row, rank 2."""
    x = harness.random((33, 7), dtype)
    row = harness.random(33, dtype)
    dx, drow, out = harness.upload(x), harness.upload(row), harness.output((7, 33), dtype)
    last = 32 * 7  # x[::-1].T starts at element x[32, 0]; its strides are (1, -7)
    kernel = harness.kernel("binary.hip", f"binary_any_{dtype}")
    pad = (0,) * 6
    kernel.launch(3, 64, ADD, dx.view(last * x.dtype.itemsize), drow, out.buffer, 7 * 33, 2,
                  7, 33, *pad, 1, -7, *pad, 0, 1, *pad, 33, 1, *pad, 0, 0.0, 0)  # fmt: skip
    assert_close(out.read(), testing.add(x[::-1].T, np.broadcast_to(row, (7, 33))), dtype)


# --- casts --------------------------------------------------------------------------------


def cast_inputs(harness: KernelHarness, n: int, source: str) -> np.ndarray:
    """Every kind of value: random bit patterns (NaNs, infinities and subnormals of every type;
    for a 16-bit source, every value there is), values across the f16 range and exact ties
    halfway between neighbouring f16 values."""
    rng = harness.rng
    if source != "f32":
        return rng.integers(0, 2**16, n, dtype=np.uint16).view(DTYPES[source])
    with np.errstate(invalid="ignore"):  # signalling NaNs among the bit patterns
        bits = rng.integers(0, 2**32, n, dtype=np.uint32).view(np.float32).astype(np.float64)
    spread = np.ldexp(rng.uniform(1, 2, n), rng.integers(-26, 17, n)) * rng.choice([-1, 1], n)
    halves = rng.integers(0, 0x7BFF, n, dtype=np.uint16).view(np.float16)
    ties = (halves.astype(np.float64) + np.nextafter(halves, np.float16(np.inf))) / 2
    pick = rng.integers(0, 3, n)
    return np.where(pick == 0, bits, np.where(pick == 1, spread, ties)).astype(np.float32)


TARGET = {"f32": 0, "f16": 2, "bf16": 3}  # cast.hip's target codes (dtypes.SUFFIXES order)


@pytest.mark.parametrize("n", [1, 1000, 7 * 4097])
@pytest.mark.parametrize(("source", "target"), [(a, b) for a in TYPES for b in TYPES if a != b])
def test_cast_rounds_once_to_nearest_even(
    harness: KernelHarness, source: str, target: str, n: int
) -> None:
    x = cast_inputs(harness, n, source)
    dx, out = harness.upload(x), harness.output(n, target)
    if n % 4 == 0:  # whole vectors: the rows path
        kernel = harness.kernel("cast.hip", f"cast_{source}")
        kernel.launch(grid_for(n, 64), 64, TARGET[target], dx, out.buffer, 1, n, 0, 0, 1)
    else:  # the strided path, rank 1 (where the host sends odd sizes)
        pad = (0,) * 7
        kernel = harness.kernel("cast.hip", f"cast_any_{source}")
        kernel.launch(grid_for(n, 64), 64, TARGET[target], dx, out.buffer, n, 1, n, *pad, 1,
                      *pad, 1, *pad)  # fmt: skip
    assert_bits_equal(out.read(), testing.cast(x, target))


# --- rope, embedding, transpose -------------------------------------------------------------


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
    cos, sin = testing.rope_tables(max_position, rot)
    if given_positions:
        positions = harness.rng.integers(0, max_position, tokens).astype(np.int32)
    else:
        positions = np.arange(tokens, dtype=np.int32)  # what a null pointer means
    x = harness.random((tokens, heads, head_dim), dtype)
    dx, dcos, dsin = harness.upload(x), harness.upload(cos), harness.upload(sin)
    dpos = harness.upload(positions) if given_positions else None
    out = harness.output(x.shape, dtype)
    harness.kernel("rope.hip", f"rope_{pairs}_{dtype}").launch(
        grid_for(x.size, 64), 64, dx, dcos, dsin, dpos, out.buffer, tokens, heads, head_dim, rot,
        max_position,
    )  # fmt: skip
    expected = testing.rope(x, cos, sin, positions, rot_dim=rot, interleaved=pairs == "interleaved")
    assert_close(out.read(), expected, dtype)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("pairs", ["half", "interleaved"])
def test_rope_positions_outside_the_tables_read_zero_angles(
    harness: KernelHarness, pairs: str, dtype: str
) -> None:
    # As embedding gives an unknown id a row of zeros: a position outside [0, max_position)
    # reads cos = sin = 0 (its rotated pairs become 0, the tail is copied) and never reads
    # outside the tables (2**31 - 1 pairs past them would fault).
    max_position, heads, head_dim, rot = 50, 3, 64, 32
    positions = np.array([0, -1, 49, 50, 51, -(2**31), 2**31 - 1, 7], np.int32)
    tokens = len(positions)
    cos, sin = testing.rope_tables(max_position, rot)
    x = harness.random((tokens, heads, head_dim), dtype)
    dx, dcos, dsin, dpos = map(harness.upload, (x, cos, sin, positions))
    out = harness.output(x.shape, dtype)
    harness.kernel("rope.hip", f"rope_{pairs}_{dtype}").launch(
        grid_for(x.size, 64), 64, dx, dcos, dsin, dpos, out.buffer, tokens, heads, head_dim, rot,
        max_position,
    )  # fmt: skip
    outside = (positions < 0) | (positions >= max_position)
    zero = np.zeros((1, rot // 2), np.float32)  # the angle a position outside reads
    at = np.where(outside, max_position, positions)
    expected = testing.rope(
        x, np.vstack([cos, zero]), np.vstack([sin, zero]), at, rot_dim=rot,
        interleaved=pairs == "interleaved",
    )  # fmt: skip
    got = out.read()
    assert_close(got, expected, dtype)
    assert not got[outside][..., :rot].any() and (got[..., rot:] == x[..., rot:]).all()


@pytest.mark.parametrize("wide", [0, 1])
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 1000, 17), (7, 4097, 5)], ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_embedding_gathers_rows_and_zeroes_unknown_ids(
    harness: KernelHarness, dtype: str, shape: tuple[int, int, int], wide: int
) -> None:
    """index_select_u<bits> (what embedding launches) on a [vocab, dim] table: rows of one
    element per unit (u16/u32) and, where the row allows, 16 bytes per unit (u128)."""
    tokens, dim, vocab = shape
    table = harness.random((vocab, dim), dtype)
    ids = harness.rng.integers(-2, vocab + 2, tokens).astype(np.int64 if wide else np.int32)
    ids[0] = vocab - 1  # some out of range, the last row certainly in
    item = table.dtype.itemsize
    for unit in sorted({item, 16 if dim * item % 16 == 0 else item}):
        per = unit // item
        dids, dtable = harness.upload(ids), harness.upload(table)
        out = harness.output((tokens, dim), dtype)
        kernel = harness.kernel("indexing.hip", f"index_select_u{unit * 8}")
        kernel.launch(grid_for(tokens * dim // per, 64), 64, dtable, dids, wide, out.buffer, 1,
                      tokens, dim // per, vocab, 0, dim // per, 1)  # fmt: skip
        assert_bits_equal(out.read(), testing.embedding(ids, table))


@pytest.mark.parametrize("shape", [(1, 1), (3, 1000), (7, 4097), (33, 65)], ids=str)
@pytest.mark.parametrize("dtype", TYPES)
def test_transpose(harness: KernelHarness, dtype: str, shape: tuple[int, int]) -> None:
    rows, cols = shape
    x = harness.random(shape, dtype)
    dx, out = harness.upload(x), harness.output((cols, rows), dtype)
    tiles = -(-rows // 32) * -(-cols // 32)
    kernel = harness.kernel("transpose.hip", f"transpose_{dtype}")
    kernel.launch(min(tiles, 5), (32, 8), dx, out.buffer, rows, cols)  # blocks stride over tiles
    assert_bits_equal(out.read(), testing.transpose(x))
