"""gemv_chain (kernels/gemv_chain.hip, hip_runtime.ops.gemv_chain): dependent GEMV products in
one launch, each link against a float64 reference of what its inputs held, the chain against
the same links as separate ops, the counters left at zero, and the fallbacks.

On the cpu platform the blocks of a link wait on device counters for the link before, as they
do on a GPU (the workers take blocks in order): with HIP_FFI_CPU_WARP_SIZE=64 too.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend, testing
from hip_runtime.ops.gemv import GEMV_MAX_ROWS, GEMV_TENSOR_TILE, gemv_tile
from hip_runtime.ops.gemv_chain import GemvLink
from hip_runtime.testing import Reference

DTYPES = ["f32", "f16", "bf16"]
EPS = 1e-5
HIDDEN, INTER, QKV = 64, 96, 80  # (80 and 96 columns: blocks that end past the last column)


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device, gemv_rows=GEMV_MAX_ROWS) as backend:
        yield backend


def _normed(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + EPS) * g.astype(np.float64)


def _product(h: np.ndarray, w: np.ndarray, residual: np.ndarray | None = None) -> Reference:
    w64 = w.astype(np.float64)
    value, magnitude = h @ w64.T, np.abs(h) @ np.abs(w64).T
    if residual is not None:
        value, magnitude = value + residual.astype(np.float64), magnitude + abs(residual)
    return Reference(value, magnitude)


def _swiglu(h: np.ndarray, w: np.ndarray) -> Reference:
    both = _product(h, w)
    n = w.shape[0] // 2
    g, u = both.value[..., :n], both.value[..., n:]
    silu = g / (1.0 + np.exp(-g))
    return Reference(silu * u, np.abs(silu) * both.magnitude[..., n:] + both.magnitude[..., :n])


def _layer(backend: HipBackend, rng: np.random.Generator, rows: int, dtype: str) -> dict[str, Any]:
    """A decode layer's tensors: host arrays and their device copies, outputs apart."""
    shapes = {
        "context": (rows, HIDDEN), "x": (rows, HIDDEN), "o": (HIDDEN, HIDDEN),
        "mlp_norm": (HIDDEN,), "gate_up": (2 * INTER, HIDDEN), "down": (HIDDEN, INTER),
        "attn_norm": (HIDDEN,), "qkv": (QKV, HIDDEN),
    }  # fmt: skip
    host = {name: testing.random(rng, shape, dtype, scale=0.3) for name, shape in shapes.items()}
    device = {name: backend.from_numpy(value) for name, value in host.items()}
    for name, shape in (("x1", (rows, HIDDEN)), ("g", (rows, INTER)), ("x2", (rows, HIDDEN)),
                        ("q", (rows, QKV))):  # fmt: skip
        device[name] = backend.empty(shape, host["x"].dtype)
    return {"host": host, "device": device}


def _links(d: dict[str, Any]) -> list[GemvLink]:
    return [
        GemvLink(d["context"], d["o"], d["x1"], residual=d["x"]),
        GemvLink(d["x1"], d["gate_up"], d["g"], norm=d["mlp_norm"], swiglu=True),
        GemvLink(d["g"], d["down"], d["x2"], residual=d["x1"]),
        GemvLink(d["x2"], d["qkv"], d["q"], norm=d["attn_norm"]),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 2, 5])
def test_each_link_matches_the_reference_of_what_it_read(
    backend: HipBackend, gemv_launches: list[str], dtype: str, rows: int
) -> None:
    layer = _layer(backend, np.random.default_rng(rows), rows, dtype)
    h, d = layer["host"], layer["device"]
    backend.gemv_chain(_links(d), eps=EPS)
    tile = gemv_tile(rows, np.dtype(testing.DTYPES[dtype]).itemsize)
    if tile == GEMV_TENSOR_TILE:  # (not a link of the chain kernel: each link its own launch;
        # f16's normed links: rmsnorm, then the plain tile)
        fusions = (
            ("r16", "r16", "r16", "r16")
            if dtype == "f16"
            else ("r16", "swiglu_r16", "r16", "norm_r16")
        )
        assert gemv_launches == [f"gemv_{fusion}_{dtype}" for fusion in fusions]
    else:
        assert gemv_launches == [f"gemv_chain_r{tile}_{dtype}"]
    got = {name: d[name].to_numpy() for name in ("x1", "g", "x2", "q")}
    f64 = {name: value.astype(np.float64) for name, value in got.items()}
    testing.assert_close(got["x1"], _product(h["context"].astype(np.float64), h["o"], h["x"]),
                         dtype)  # fmt: skip
    testing.assert_close(got["g"], _swiglu(_normed(f64["x1"], h["mlp_norm"]), h["gate_up"]), dtype)
    testing.assert_close(got["x2"], _product(f64["g"], h["down"], got["x1"]), dtype)
    testing.assert_close(got["q"], _product(_normed(f64["x2"], h["attn_norm"]), h["qkv"]), dtype)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_in_place_chain_equals_the_separate_ops_and_leaves_the_counters_at_zero(
    backend: HipBackend, dtype: str
) -> None:
    rows = 2
    layer = _layer(backend, np.random.default_rng(7), rows, dtype)
    d = layer["device"]
    x = backend.from_numpy(layer["host"]["x"])
    in_place = [  # a decode layer: the residual stream x updated in place twice
        GemvLink(d["context"], d["o"], x, residual=x),
        GemvLink(x, d["gate_up"], d["g"], norm=d["mlp_norm"], swiglu=True),
        GemvLink(d["g"], d["down"], x, residual=x),
        GemvLink(x, d["qkv"], d["q"], norm=d["attn_norm"]),
    ]
    for _ in range(3):  # the counters must be back at zero after each launch
        backend.gemv_chain(in_place, eps=EPS)
    chained = (x.to_numpy(), d["q"].to_numpy())
    x_alone = backend.from_numpy(layer["host"]["x"])
    q_alone = backend.empty(d["q"].shape, x.dtype)
    for _ in range(3):
        backend.linear(d["context"], d["o"], residual=x_alone, out=x_alone)
        g = backend.rmsnorm_swiglu(x_alone, d["mlp_norm"], d["gate_up"], eps=EPS)
        backend.linear(g, d["down"], residual=x_alone, out=x_alone)
        backend.rmsnorm_linear(x_alone, d["attn_norm"], d["qkv"], eps=EPS, out=q_alone)
    np.testing.assert_array_equal(chained[0], x_alone.to_numpy())  # the same kernel code
    np.testing.assert_array_equal(chained[1], q_alone.to_numpy())
    counters = backend._gemv_chain_counter_buffer.to_numpy()
    assert not counters.any(), counters


def test_more_links_than_one_launch_takes_run_as_several(
    backend: HipBackend, gemv_launches: list[str]
) -> None:
    rng = np.random.default_rng(3)
    w = backend.from_numpy(testing.random(rng, (HIDDEN, HIDDEN), "f32", scale=0.1))
    xs = [backend.from_numpy(testing.random(rng, (1, HIDDEN), "f32"))]
    xs += [backend.empty((1, HIDDEN), xs[0].dtype) for _ in range(6)]
    backend.gemv_chain([GemvLink(a, w, b) for a, b in itertools.pairwise(xs)])
    assert gemv_launches == ["gemv_chain_r1_f32"] * 2  # 4 links, then 2
    expected = xs[0].to_numpy().astype(np.float64)
    w64 = w.to_numpy().astype(np.float64)
    for out in xs[1:]:
        expected = expected @ w64.T
        np.testing.assert_allclose(out.to_numpy(), expected, rtol=1e-4, atol=1e-5)


def test_links_the_kernel_does_not_take_run_as_separate_ops(
    device: Device, program_cache: Path, gemv_launches: list[str]
) -> None:
    with HipBackend(device, gemv_rows=0) as unfused:
        layer = _layer(unfused, np.random.default_rng(5), 3, "f32")
        h, d = layer["host"], layer["device"]
        unfused.gemv_chain(_links(d), eps=EPS)
        assert not any(name.startswith("gemv_chain") for name in gemv_launches)
        expected = _product(h["context"].astype(np.float64), h["o"], h["x"])
        testing.assert_close(d["x1"].to_numpy(), expected, "f32")
        x2 = d["x2"].to_numpy().astype(np.float64)
        testing.assert_close(d["q"].to_numpy(), _product(_normed(x2, h["attn_norm"]), h["qkv"]),
                             "f32")  # fmt: skip


def test_bad_links_raise_before_any_launch(backend: HipBackend, gemv_launches: list[str]) -> None:
    layer = _layer(backend, np.random.default_rng(9), 1, "f32")
    d = layer["device"]
    good = _links(d)
    cases: list[tuple[list[Any], type[Exception], str]] = [
        ([good[0], "not a link"], TypeError, "link 1 is a str"),
        ([GemvLink(d["x1"], d["gate_up"], d["g"], swiglu=True)], ValueError, "needs a norm"),
        (
            [GemvLink(d["x1"], d["gate_up"], d["g"], norm=d["mlp_norm"], swiglu=True,
                      residual=d["g"])],
            ValueError, "takes no residual",
        ),
        ([GemvLink(d["x1"], d["down"], d["x2"])], ValueError, "weight is"),
        ([GemvLink(d["x1"], d["o"], d["x1"])], ValueError, "overlap"),
        (
            [good[0], GemvLink(backend.empty((2, HIDDEN), d["x"].dtype), d["o"],
                               backend.empty((2, HIDDEN), d["x"].dtype))],
            ValueError, "different row counts",
        ),
    ]  # fmt: skip
    for links, error, message in cases:
        with pytest.raises(error, match=message):
            backend.gemv_chain(links, eps=EPS)
    with pytest.raises(TypeError, match="eps"):
        backend.gemv_chain(good, eps="small")  # type: ignore[arg-type]
    assert gemv_launches == []
