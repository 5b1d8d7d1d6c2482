"""rope_and_cache and swiglu with `rms_of`: products of rows not yet RMS-normalized (a norm
weight folded into the product's weight, models.llama_weights.fold_norms), each row's divided
by the RMS of x's row before the op. Against hip_runtime.testing's float64 references of the
normalized products (rope, swiglu, a numpy scatter), under hypothesis, for each dtype; bad
arguments raise ValueError with nothing written. On the cpu platform in CI (and with 64-lane
warps in the wave64 session); the same tests run on nvidia (marked gpu)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hip_core import Device
from hip_runtime import HipBackend, testing

SETTINGS = settings(
    max_examples=20, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
SENTINEL = 7.0  # what the tables hold before a call


@pytest.fixture(scope="module")
def backend(device: Device) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def inverse_rms(x: np.ndarray, eps: float) -> np.ndarray:
    """1 / sqrt(mean(x²) + eps) of each row of x (float64), as a column."""
    wide = x.astype(np.float64)
    return 1.0 / np.sqrt((wide * wide).mean(axis=-1, keepdims=True) + eps)


@SETTINGS
@given(data=st.data())
def test_rope_and_cache_divides_each_token_by_its_rms(backend: HipBackend, data: Any) -> None:
    dtype = data.draw(st.sampled_from(["f32", "f16", "bf16"]))
    tokens, kv_heads = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 3))
    heads, d = kv_heads * data.draw(st.sampled_from([1, 4])), data.draw(st.sampled_from([8, 64]))
    hidden = data.draw(st.sampled_from([16, 300, 2048]))  # (a block's threads: fewer, more)
    interleaved, eps = data.draw(st.booleans()), data.draw(st.sampled_from([1e-6, 1e-5, 0.5]))
    rot = data.draw(st.sampled_from([2, d // 2, d]))  # (partial rotary: the tail copied, scaled)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    scale = data.draw(st.sampled_from([0.1, 30]))
    x = testing.random(rng, (tokens, hidden), dtype, scale=scale)
    qkv = testing.random(rng, (tokens, (heads + 2 * kv_heads) * d), dtype, scale=8)
    cos, sin = testing.rope_tables(16, rot)
    positions = rng.integers(0, 16, tokens).astype(np.int32)
    rows = rng.permutation(np.array([*range(12), *[-1] * tokens], np.int32))[:tokens]
    fused = backend.from_numpy(qkv)
    q_end, k_end = heads * d, (heads + kv_heads) * d
    q, k, v = (fused[:, a:b].reshape(tokens, -1, d)
               for a, b in ((0, q_end), (q_end, k_end), (k_end, qkv.shape[1])))  # fmt: skip
    empty = np.full((12, kv_heads, d), SENTINEL, qkv.dtype)
    k_table, v_table = backend.from_numpy(empty), backend.from_numpy(empty)
    backend.rope_and_cache(
        q, k, v, backend.from_numpy(cos), backend.from_numpy(sin), backend.from_numpy(positions),
        k_table, v_table, backend.from_numpy(rows), rot_dim=rot, interleaved=interleaved,
        rms_of=backend.from_numpy(x.reshape(tokens, 1, hidden)), eps=eps,
    )  # fmt: skip
    normed = qkv.astype(np.float64) * inverse_rms(x, eps)
    shape = (tokens, -1, d)
    q_in, k_in, v_in = (part.reshape(shape) for part in np.split(normed, [q_end, k_end], axis=1))
    q_rot = testing.rope(q_in, cos, sin, positions, rot_dim=rot, interleaved=interleaved)
    k_rot = testing.rope(k_in, cos, sin, positions, rot_dim=rot, interleaved=interleaved)
    magnitude = np.abs(normed).max()  # (the rotation mixes a pair's roundings)
    testing.assert_close(q.to_numpy(), q_rot, dtype, magnitude)
    testing.assert_close(k.to_numpy(), k_rot, dtype, magnitude)
    testing.assert_close(v.to_numpy(), v_in, dtype)  # v is scaled in place too
    keys, values = np.full(empty.shape, SENTINEL), np.full(empty.shape, SENTINEL)
    for t, row in enumerate(rows):
        if row >= 0:
            keys[row], values[row] = k_rot[t], v_in[t]
    testing.assert_close(k_table.to_numpy(), keys, dtype, magnitude)
    testing.assert_close(v_table.to_numpy(), values, dtype)


@SETTINGS
@given(data=st.data())
def test_swiglu_divides_gate_and_up_by_the_rms(backend: HipBackend, data: Any) -> None:
    dtype = data.draw(st.sampled_from(["f32", "f16", "bf16"]))
    batch, seq = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
    inter = data.draw(st.sampled_from([1, 24, 3000]))
    hidden, eps = data.draw(st.sampled_from([16, 2048])), data.draw(st.sampled_from([1e-6, 0.5]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    scale = data.draw(st.sampled_from([0.1, 30]))
    x = testing.random(rng, (batch, seq, hidden), dtype, scale=scale)
    both = testing.random(rng, (batch, seq, 2 * inter), dtype, scale=4)
    product = backend.from_numpy(both)
    out = backend.zeros((batch, seq, inter), both.dtype) if data.draw(st.booleans()) else None
    got = backend.swiglu(product[:, :, :inter], product[:, :, inter:],
                         rms_of=backend.from_numpy(x), eps=eps, out=out)  # fmt: skip
    assert out is None or got is out
    normed = both.astype(np.float64) * inverse_rms(x, eps)
    expected = testing.swiglu(normed[..., :inter], normed[..., inter:])
    testing.assert_close(got.to_numpy(), expected, dtype)


def rope_arguments(backend: HipBackend) -> dict[str, Any]:
    """A valid rms_of call's arguments: 3 tokens, 4 heads / 2 kv heads of 8, hidden 16."""
    rng = np.random.default_rng(0)
    cos, sin = testing.rope_tables(16, 8)
    fused = backend.from_numpy(testing.random(rng, (3, 64), "f32"))
    return dict(
        q=fused[:, :32].reshape(3, 4, 8), k=fused[:, 32:48].reshape(3, 2, 8),
        v=fused[:, 48:].reshape(3, 2, 8), cos=backend.from_numpy(cos),
        sin=backend.from_numpy(sin), positions=backend.from_numpy(np.arange(3, dtype=np.int32)),
        k_table=backend.zeros((8, 2, 8), np.float32), v_table=backend.zeros((8, 2, 8), np.float32),
        rows=backend.from_numpy(np.arange(3, dtype=np.int32)),
        rms_of=backend.from_numpy(testing.random(rng, (3, 16), "f32")),
    )  # fmt: skip


BAD_ROPE = {
    "rms_of dtype": lambda b, a: {**a, "rms_of": b.zeros((3, 16), np.float16)},
    "rms_of rows": lambda b, a: {**a, "rms_of": b.zeros((2, 16), np.float32)},
    "rms_of strided": lambda b, a: {**a, "rms_of": b.zeros((3, 32), np.float32)[:, ::2]},
    "rms_of is q": lambda b, a: {**a, "rms_of": a["q"].reshape(3, 32)[:, :16]},
    "rms_of is v": lambda b, a: {**a, "rms_of": a["v"].reshape(3, 16)},
    "eps": lambda b, a: {**a, "eps": "small"},
    "broadcast v": lambda b, a: {**a, "v": b.zeros((1, 2, 8), np.float32).expand(3, 2, 8)},
}


@pytest.mark.parametrize("bad", list(BAD_ROPE))
def test_bad_rope_arguments_write_nothing(backend: HipBackend, bad: str) -> None:
    args = BAD_ROPE[bad](backend, rope_arguments(backend))
    written = ("q", "k", "v", "k_table", "v_table")
    before = [args[name].to_numpy() for name in written]
    with pytest.raises((ValueError, TypeError)):
        backend.rope_and_cache(**args)
    for name, old in zip(written, before, strict=True):
        testing.assert_bits_equal(args[name].to_numpy(), old)


BAD_SWIGLU = {
    "rms_of rows": lambda b, g, u: (g, u, b.zeros((2, 16), np.float32)),
    "rms_of dtype": lambda b, g, u: (g, u, b.zeros((3, 16), np.float16)),
    "up shape": lambda b, g, u: (g, u[:, :4], b.zeros((3, 16), np.float32)),
    "f64": lambda b, g, u: tuple(b.zeros(shape, np.float64) for shape in ((3, 8), (3, 8), (3, 16))),
    "strided rms_of": lambda b, g, u: (g, u, b.zeros((3, 32), np.float32)[:, ::2]),
    "a strided row": lambda b, g, u: (
        b.zeros(16, np.float32)[::2],
        b.zeros(16, np.float32)[1::2],
        b.zeros((1, 16), np.float32),
    ),
}


@pytest.mark.parametrize("bad", list(BAD_SWIGLU))
def test_bad_swiglu_arguments_raise(backend: HipBackend, bad: str) -> None:
    both = backend.zeros((3, 16), np.float32)
    gate, up, x = BAD_SWIGLU[bad](backend, both[:, :8], both[:, 8:])
    with pytest.raises(ValueError):
        backend.swiglu(gate, up, rms_of=x)


def test_swiglu_out_may_not_overlap_an_operand(backend: HipBackend) -> None:
    both = backend.from_numpy(np.ones((3, 16), np.float32))
    out = both.reshape(-1)[4:28].reshape(3, 8)  # (contiguous, across gate's and up's rows)
    with pytest.raises(ValueError, match="overlap"):
        backend.swiglu(both[:, :8], both[:, 8:], rms_of=backend.zeros((3, 16), np.float32),
                       out=out)  # fmt: skip
    assert (both.to_numpy() == 1).all()


def test_a_planned_rope_call_reads_its_own_x(backend: HipBackend) -> None:
    """A second call of one layout and eps (the plan's, made by the first) reads its own x;
    another eps is another plan."""
    first, second = rope_arguments(backend), rope_arguments(backend)
    backend.rope_and_cache(**first, eps=0.5)
    plans = len(backend._plans or {})
    second.update(rms_of=backend.from_numpy(np.full((3, 16), 2.0, np.float32)))
    v_in = second["v"].to_numpy()
    backend.rope_and_cache(**second, eps=0.5)
    assert len(backend._plans or {}) == plans  # (the first call's plan served it)
    testing.assert_close(second["v"].to_numpy(), v_in / np.sqrt(4.5), "f32")
    third = rope_arguments(backend)
    backend.rope_and_cache(**third, eps=1.0)
    assert len(backend._plans or {}) == plans + 1
