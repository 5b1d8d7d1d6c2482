"""The self-test's numeric checks: every HipBackend op on small odd shapes, in every float type,
against hip_runtime.testing's float64 references and tolerances.

A check takes (backend, rng, dtype), runs the op on the device and returns the largest error as
a fraction of the allowed one (0 for a bit-exact op); it raises `testing.Mismatch` (or the op's
own error) when it fails. The shapes are odd on purpose: rows that do not fill a block, lengths
that are not a multiple of the vector width, a single element.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hip_backend.selftest.opset_checks import OPSET_CHECKS
from hip_runtime import testing
from hip_runtime.ops.quantized import BLOCK_ENCODINGS, dequantize_into
from hip_runtime.tensors.strided_copy import copy_into
from hip_runtime.testing import DTYPES, assert_bits_equal, assert_close

Check = Callable[[Any, np.random.Generator, str], float]
EPS = 1e-5
ROWS = (3, 1001)  # neither a multiple of a block nor of a 16-byte vector


@dataclass(frozen=True)
class OpCheck:
    """One named check, run once per float type."""

    name: str
    run: Check


def _binary(op: str) -> Check:
    def check(backend: Any, rng: np.random.Generator, dtype: str) -> float:
        a, b = (
            testing.random(rng, ROWS, dtype, scale=2.0),
            testing.random(rng, ROWS, dtype, scale=2.0),
        )
        got = getattr(backend, op)(backend.from_numpy(a), backend.from_numpy(b)).to_numpy()
        return assert_close(got, getattr(testing, op)(a, b), dtype)

    return check


def _unary(op: str) -> Check:
    def check(backend: Any, rng: np.random.Generator, dtype: str) -> float:
        x = testing.random(rng, ROWS, dtype, scale=3.0)
        dx = backend.from_numpy(x)
        if op == "scale":
            return assert_close(backend.scale(dx, 0.375).to_numpy(), testing.scale(x, 0.375), dtype)
        if op == "silu":
            return assert_close(backend.silu(dx).to_numpy(), testing.silu(x), dtype)
        approximate = "tanh" if op == "gelu_tanh" else "none"
        got = backend.gelu(dx, approximate=approximate).to_numpy()
        return assert_close(got, testing.gelu(x, approximate=approximate), dtype)

    return check


def add_row_bias(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x, bias = testing.random(rng, ROWS, dtype), testing.random(rng, ROWS[1], dtype)
    got = backend.add_row_bias(backend.from_numpy(x), backend.from_numpy(bias)).to_numpy()
    return assert_close(got, testing.add_row_bias(x, bias), dtype)


def layernorm(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x = testing.random(rng, ROWS, dtype, scale=2.0, shift=1.0)
    w, b = testing.random(rng, ROWS[1], dtype), testing.random(rng, ROWS[1], dtype)
    got = backend.layernorm(*map(backend.from_numpy, (x, w, b)), eps=EPS).to_numpy()
    return assert_close(got, testing.layernorm(x, w, b, eps=EPS), dtype)


def rmsnorm(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x = testing.random(rng, ROWS, dtype, scale=2.0, shift=1.0)
    w = testing.random(rng, ROWS[1], dtype)
    got = backend.rmsnorm(backend.from_numpy(x), backend.from_numpy(w), eps=EPS).to_numpy()
    return assert_close(got, testing.rmsnorm(x, w, eps=EPS), dtype)


def softmax(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x = testing.random(rng, ROWS, dtype, scale=2.0, shift=1.0)
    got = backend.softmax(backend.from_numpy(x), scale=0.7).to_numpy()
    return assert_close(got, testing.softmax(x, scale=0.7), dtype)


def matmul(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    worst = 0.0
    for ta, tb in ((False, False), (True, True)):
        a = testing.random(rng, (2, 65, 7) if ta else (2, 7, 65), dtype)  # as stored
        b = testing.random(rng, (5, 65) if tb else (65, 5), dtype)
        got = backend.matmul(
            backend.from_numpy(a), backend.from_numpy(b), transpose_a=ta, transpose_b=tb,
            alpha=0.5,
        ).to_numpy()  # fmt: skip
        expected = testing.matmul(a, b, transpose_a=ta, transpose_b=tb, alpha=0.5)
        worst = max(worst, assert_close(got, expected, dtype))
    return worst


def linear(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x, w = testing.random(rng, (2, 3, 33), dtype), testing.random(rng, (9, 33), dtype)
    b = testing.random(rng, 9, dtype)
    got = backend.linear(*map(backend.from_numpy, (x, w, b))).to_numpy()
    return assert_close(got, testing.linear(x, w, b), dtype)


def mlp_swiglu(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    hidden, inter = 24, 40
    x = testing.random(rng, (3, 5, hidden), dtype)
    wg = testing.random(rng, (inter, hidden), dtype, scale=0.2)
    wu = testing.random(rng, (inter, hidden), dtype, scale=0.2)
    wd = testing.random(rng, (hidden, inter), dtype, scale=0.2)
    got = backend.mlp_swiglu(*map(backend.from_numpy, (x, wg, wu, wd))).to_numpy()
    # One unit of the stored intermediate's rounding is allowed on top of the output's own.
    expected = testing.mlp_swiglu(x, wg, wu, wd)
    return assert_close(
        got, expected.value, dtype, expected.magnitude * (1 if dtype == "f32" else 2)
    )


def attention(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    """Grouped-query, causal, over [B, S, H, D] views, once per tile shape (head sizes 33, 100
    and 256)."""
    worst = 0.0
    for d in (33, 100, 256):
        q = testing.random(rng, (2, 4, 19, d), dtype)
        k, v = (testing.random(rng, (2, 2, 23, d), dtype) for _ in range(2))
        views = [backend.from_numpy(np.ascontiguousarray(x.transpose(0, 2, 1, 3))).permute(
            0, 2, 1, 3) for x in (q, k, v)]  # fmt: skip
        got = backend.scaled_dot_product_attention(*views, causal=True).to_numpy()
        worst = max(worst, assert_close(got, testing.attention(q, k, v, causal=True), dtype))
    return worst


def _rope(interleaved: bool) -> Check:
    def check(backend: Any, rng: np.random.Generator, dtype: str) -> float:
        tokens, heads, head_dim, rot, max_position = 5, 3, 40, 32, 11
        cos, sin = testing.rope_tables(max_position, rot)
        pos = rng.integers(0, max_position, tokens).astype(np.int32)
        x = testing.random(rng, (tokens, heads, head_dim), dtype)
        got = backend.rope(
            *map(backend.from_numpy, (x, cos, sin, pos)), rot_dim=rot, interleaved=interleaved
        ).to_numpy()
        expected = testing.rope(x, cos, sin, pos, rot_dim=rot, interleaved=interleaved)
        return assert_close(got, expected, dtype)

    return check


def embedding(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    vocab, dim = 17, 33
    table = testing.random(rng, (vocab, dim), dtype)
    ids = rng.integers(-1, vocab + 1, (2, 7)).astype(np.int32)  # some out of range: zero rows
    got = backend.embedding(backend.from_numpy(ids), backend.from_numpy(table)).to_numpy()
    assert_bits_equal(got, testing.embedding(ids, table))
    return 0.0


def cast(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x = testing.random(rng, ROWS, dtype, scale=100.0)
    for target in DTYPES.values():
        assert_bits_equal(
            backend.cast(backend.from_numpy(x), target).to_numpy(), testing.cast(x, target)
        )
    return 0.0


def transpose(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x = testing.random(rng, (7, 45), dtype)
    assert_bits_equal(backend.transpose(backend.from_numpy(x)).to_numpy(), testing.transpose(x))
    return 0.0


#: One dtype per element size the strided-copy kernels are written for (1, 2, 4, 8 bytes).
_COPY_DTYPES = (np.int8, np.float16, np.float32, np.float64)


def strided_copy(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    """contiguous() of views that need the kernels: a transpose (the tiled kernel) and a
    reversed, every-other-column view (the elementwise one), for every element size. A copy is
    exact, so it must match numpy's view bit for bit; `dtype` only varies the shape."""
    rows = {"f32": 37, "f16": 70, "bf16": 5}[dtype]
    for item in _COPY_DTYPES:
        host = (rng.standard_normal((rows, 45)) * 100).astype(item)
        x = backend.from_numpy(host)
        for view, expected in ((x.T, host.T), (x[::-1, ::2], host[::-1, ::2])):
            out = backend.empty(view.shape, view.dtype)
            copy_into(out, view, stream=backend.stream, kernels=backend.kernels)
            assert_bits_equal(out.to_numpy(), np.ascontiguousarray(expected))
    return 0.0


def _dequant(encoding: str) -> Check:
    """GGUF block dequantization (the loader's kernels): value = f32(f16 scale) · quant, rounded
    once to the output type, so the result must match bit for bit."""

    def check(backend: Any, rng: np.random.Generator, dtype: str) -> float:
        blocks, block_bytes = 37, BLOCK_ENCODINGS[encoding][1]
        raw = rng.integers(0, 256, (blocks, block_bytes), dtype=np.uint8)
        scales = (rng.standard_normal(blocks) * 0.05).astype(np.float16)  # finite scales
        raw[:, :2] = scales.view(np.uint8).reshape(blocks, 2)
        source = backend.from_numpy(raw)
        out = backend.empty((blocks * 32,), DTYPES[dtype])
        dequantize_into(backend.kernels, encoding, source.ptr, out, stream=backend.stream)
        assert_bits_equal(out.to_numpy(), testing.dequantize(raw, encoding, dtype))
        return 0.0

    return check


CHECKS: tuple[OpCheck, ...] = (
    OpCheck("add", _binary("add")),
    OpCheck("mul", _binary("mul")),
    OpCheck("swiglu", _binary("swiglu")),
    OpCheck("scale", _unary("scale")),
    OpCheck("silu", _unary("silu")),
    OpCheck("gelu", _unary("gelu")),
    OpCheck("gelu (tanh)", _unary("gelu_tanh")),
    OpCheck("add_row_bias", add_row_bias),
    OpCheck("layernorm", layernorm),
    OpCheck("rmsnorm", rmsnorm),
    OpCheck("softmax", softmax),
    OpCheck("matmul", matmul),
    OpCheck("linear", linear),
    OpCheck("mlp_swiglu", mlp_swiglu),
    OpCheck("attention", attention),
    OpCheck("rope", _rope(False)),
    OpCheck("rope (interleaved)", _rope(True)),
    OpCheck("embedding", embedding),
    OpCheck("cast", cast),
    OpCheck("transpose", transpose),
    OpCheck("strided copy", strided_copy),
    OpCheck("dequant q8_0", _dequant("q8_0")),
    OpCheck("dequant q4_0", _dequant("q4_0")),
    *(OpCheck(name, run) for name, run in OPSET_CHECKS),
)

__all__ = ["CHECKS", "Check", "OpCheck"]
