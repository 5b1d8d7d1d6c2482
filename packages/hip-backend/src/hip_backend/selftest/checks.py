"""The self-test's numeric checks: every HipBackend op on small odd shapes, in every float type,
against the float64 references (references.py).

A check takes (backend, rng, dtype), runs the op on the device and returns the largest error as
a fraction of the allowed one; it raises `Mismatch` (or the op's own error) when it fails. The
shapes are odd on purpose: rows that do not fill a block, lengths that are not a multiple of the
vector width, a single element.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hip_backend.selftest import references as ref
from hip_backend.selftest.references import DTYPES, compare, compare_bits, f64

Check = Callable[[Any, np.random.Generator, str], float]
EPS = 1e-5
ROWS = (3, 1001)  # neither a multiple of a block nor of a 16-byte vector


@dataclass(frozen=True)
class OpCheck:
    """One named check, run once per float type."""

    name: str
    run: Check


def _random(rng: np.random.Generator, shape: Any, dtype: str, scale: float = 1.0,
            shift: float = 0.0) -> Any:  # fmt: skip
    return np.asarray(rng.standard_normal(shape) * scale + shift, dtype=DTYPES[dtype])


def _binary(op: str) -> Check:
    references: dict[str, Callable[[Any, Any], Any]] = {
        "add": np.add,
        "mul": np.multiply,
        "swiglu": lambda g, u: ref.silu(g) * u,
    }
    expected_of = references[op]

    def check(backend: Any, rng: np.random.Generator, dtype: str) -> float:
        a, b = _random(rng, ROWS, dtype, 2.0), _random(rng, ROWS, dtype, 2.0)
        got = getattr(backend, op)(backend.from_numpy(a), backend.from_numpy(b)).to_numpy()
        return compare(got, expected_of(f64(a), f64(b)), dtype)

    return check


def _unary(op: str) -> Check:
    def check(backend: Any, rng: np.random.Generator, dtype: str) -> float:
        x = _random(rng, ROWS, dtype, 3.0)
        dx, v = backend.from_numpy(x), f64(x)
        if op == "scale":
            return compare(backend.scale(dx, 0.375).to_numpy(), 0.375 * v, dtype)
        if op == "silu":
            return compare(backend.silu(dx).to_numpy(), ref.silu(v), dtype)
        approximate = "tanh" if op == "gelu_tanh" else "none"
        got = backend.gelu(dx, approximate=approximate).to_numpy()
        return compare(got, ref.gelu(v, approximate), dtype)

    return check


def add_row_bias(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x, bias = _random(rng, ROWS, dtype), _random(rng, ROWS[1], dtype)
    got = backend.add_row_bias(backend.from_numpy(x), backend.from_numpy(bias)).to_numpy()
    return compare(got, f64(x) + f64(bias), dtype)


def layernorm(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x = _random(rng, ROWS, dtype, 2.0, 1.0)
    w, b = _random(rng, ROWS[1], dtype), _random(rng, ROWS[1], dtype)
    got = backend.layernorm(*map(backend.from_numpy, (x, w, b)), eps=EPS).to_numpy()
    expected, magnitude = ref.layernorm(x, w, b, EPS)
    return compare(got, expected, dtype, magnitude)


def rmsnorm(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x, w = _random(rng, ROWS, dtype, 2.0, 1.0), _random(rng, ROWS[1], dtype)
    got = backend.rmsnorm(backend.from_numpy(x), backend.from_numpy(w), eps=EPS).to_numpy()
    return compare(got, ref.rmsnorm(x, w, EPS), dtype)


def softmax(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x = _random(rng, ROWS, dtype, 2.0, 1.0)
    got = backend.softmax(backend.from_numpy(x), scale=0.7).to_numpy()
    return compare(got, ref.softmax(x, 0.7), dtype)


def matmul(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    worst = 0.0
    for ta, tb in ((False, False), (True, True)):
        a, b = _random(rng, (2, 7, 65), dtype), _random(rng, (65, 5), dtype)
        da = backend.from_numpy(np.ascontiguousarray(a.transpose(0, 2, 1)) if ta else a)
        db = backend.from_numpy(np.ascontiguousarray(b.T) if tb else b)
        got = backend.matmul(da, db, transpose_a=ta, transpose_b=tb, alpha=0.5).to_numpy()
        magnitude = 0.5 * (np.abs(f64(a)) @ np.abs(f64(b)))
        worst = max(worst, compare(got, 0.5 * (f64(a) @ f64(b)), dtype, magnitude))
    return worst


def linear(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x, w, b = _random(rng, (2, 3, 33), dtype), _random(rng, (9, 33), dtype), _random(rng, 9, dtype)
    got = backend.linear(*map(backend.from_numpy, (x, w, b))).to_numpy()
    magnitude = np.abs(f64(x)) @ np.abs(f64(w)).T + np.abs(f64(b))
    return compare(got, f64(x) @ f64(w).T + f64(b), dtype, magnitude)


def mlp_swiglu(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    hidden, inter = 24, 40
    x = _random(rng, (3, 5, hidden), dtype)
    wg, wu = _random(rng, (inter, hidden), dtype, 0.2), _random(rng, (inter, hidden), dtype, 0.2)
    wd = _random(rng, (hidden, inter), dtype, 0.2)
    got = backend.mlp_swiglu(*map(backend.from_numpy, (x, wg, wu, wd))).to_numpy()
    # The backend stores the intermediate in the storage type: so does the reference, and one
    # unit of that rounding is allowed on top of the output's own.
    h = f64((ref.silu(f64(x) @ f64(wg).T) * (f64(x) @ f64(wu).T)).astype(DTYPES[dtype]))
    magnitude = np.abs(h) @ np.abs(f64(wd)).T
    return compare(got, h @ f64(wd).T, dtype, magnitude * (1 if dtype == "f32" else 2))


def _rope(interleaved: bool) -> Check:
    def check(backend: Any, rng: np.random.Generator, dtype: str) -> float:
        tokens, heads, head_dim, rot, max_position = 5, 3, 40, 32, 11
        angles = np.arange(max_position)[:, None] * 10000.0 ** (-np.arange(0, rot, 2) / rot)
        cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
        pos = rng.integers(0, max_position, tokens).astype(np.int32)
        x = _random(rng, (tokens, heads, head_dim), dtype)
        got = backend.rope(
            *map(backend.from_numpy, (x, cos, sin, pos)), rot_dim=rot, interleaved=interleaved
        ).to_numpy()
        return compare(got, ref.rope(x, cos, sin, pos, rot, interleaved), dtype)

    return check


def embedding(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    vocab, dim = 17, 33
    table = _random(rng, (vocab, dim), dtype)
    ids = rng.integers(-1, vocab + 1, (2, 7)).astype(np.int32)  # some out of range: zero rows
    got = backend.embedding(backend.from_numpy(ids), backend.from_numpy(table)).to_numpy()
    known = (ids >= 0) & (ids < vocab)
    expected = np.zeros((*ids.shape, dim), table.dtype)
    expected[known] = table[ids[known]]
    return compare_bits(got, expected)


def cast(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x = _random(rng, ROWS, dtype, 100.0)
    for target in DTYPES.values():
        got = backend.cast(backend.from_numpy(x), target).to_numpy()
        compare_bits(got, x.astype(np.float32).astype(target))
    return 0.0


def transpose(backend: Any, rng: np.random.Generator, dtype: str) -> float:
    x = _random(rng, (7, 45), dtype)
    return compare_bits(backend.transpose(backend.from_numpy(x)).to_numpy(), x.T.copy())


def _dequant(encoding: str) -> Check:
    """GGUF block dequantization (the loader's kernels): value = f32(f16 scale) * quant, rounded
    once to the output type, so the result must match bit for bit."""

    def check(backend: Any, rng: np.random.Generator, dtype: str) -> float:
        from hip_runtime.dequantize import dequantize_into

        blocks = 37
        scales = (rng.standard_normal(blocks) * 0.05).astype(np.float16)
        if encoding == "q8_0":
            packed = rng.integers(-128, 128, (blocks, 32), dtype=np.int8)
            quants = packed.astype(np.float32)
        else:
            packed = rng.integers(0, 256, (blocks, 16), dtype=np.uint8)
            low, high = (packed & 0xF).astype(np.float32), (packed >> 4).astype(np.float32)
            quants = np.concatenate([low, high], axis=1) - np.float32(8)
        raw = np.concatenate([scales.view(np.uint8).reshape(blocks, 2), packed.view(np.uint8)], 1)
        source = backend.from_numpy(np.ascontiguousarray(raw))
        out = backend.empty((blocks * 32,), DTYPES[dtype])
        dequantize_into(backend.kernels, encoding, source.ptr, out, stream=backend.stream)
        expected = (scales.astype(np.float32)[:, None] * quants).reshape(-1)
        return compare_bits(out.to_numpy(), expected.astype(DTYPES[dtype]))

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
    OpCheck("rope", _rope(False)),
    OpCheck("rope (interleaved)", _rope(True)),
    OpCheck("embedding", embedding),
    OpCheck("cast", cast),
    OpCheck("transpose", transpose),
    OpCheck("dequant q8_0", _dequant("q8_0")),
    OpCheck("dequant q4_0", _dequant("q4_0")),
)

__all__ = ["CHECKS", "Check", "OpCheck"]
