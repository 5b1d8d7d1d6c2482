"""Every resource class of hip-runtime is a hip_core.Resource: `closed`, `close()` twice, `with`,
and hip_core.ClosedError (a ValueError) from every public method once closed. The call tables
must name every public method, so a new method without a closed-state test fails here."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import ClosedError, Device, Resource
from hip_ffi.constants import HIP_R_32F
from hip_runtime import Blas, Gemm, HipBackend, KVCache, ModelRuntime, ScratchArena
from hip_runtime.ops.gemv_chain import GemvLink
from hip_runtime.ops.quantized_matmul import QuantizedWeight


@pytest.fixture(scope="module")
def tensors(device: Device, program_cache: Path) -> Iterator[dict[str, Any]]:
    """Valid arguments, from a backend that stays open (closed objects must refuse them)."""
    with HipBackend(device) as backend:
        f32 = backend.from_numpy(np.ones((4, 8), np.float32))
        yield {
            "x": f32,
            "row": backend.from_numpy(np.ones(8, np.float32)),
            "ids": backend.from_numpy(np.zeros(3, np.int32)),
            "heads": backend.from_numpy(np.ones((2, 1, 8), np.float32)),
            "heads2": backend.from_numpy(np.ones((2, 1, 8), np.float32)),
            "kv_table": backend.from_numpy(np.ones((3, 1, 8), np.float32)),
            "kv_table2": backend.from_numpy(np.ones((3, 1, 8), np.float32)),
            "table": backend.from_numpy(np.ones((4, 4), np.float32)),
            "cache": backend.from_numpy(np.ones((1, 2, 4), np.float16)),
            # a [4, 32] q8_0 weight: 4 rows of one 34-byte block (zero scales)
            "q8": QuantizedWeight(backend.from_numpy(np.zeros((4, 34), np.uint8)), (4, 32), "q8_0"),
        }


Call = Callable[[Any, dict[str, Any]], Any]

BACKEND: dict[str, Call] = {
    "add": lambda b, t: b.add(t["x"], t["x"]),
    "mul": lambda b, t: b.mul(t["x"], t["x"]),
    "scale": lambda b, t: b.scale(t["x"], 2.0),
    "add_row_bias": lambda b, t: b.add_row_bias(t["x"], t["row"]),
    "cast": lambda b, t: b.cast(t["x"], np.float16),
    "silu": lambda b, t: b.silu(t["x"]),
    "gelu": lambda b, t: b.gelu(t["x"]),
    "swiglu": lambda b, t: b.swiglu(t["x"], t["x"]),
    "layernorm": lambda b, t: b.layernorm(t["x"]),
    "rmsnorm": lambda b, t: b.rmsnorm(t["x"]),
    "rmsnorm_linear": lambda b, t: b.rmsnorm_linear(t["x"], t["row"], t["x"]),
    "rmsnorm_swiglu": lambda b, t: b.rmsnorm_swiglu(t["x"], t["row"], t["x"]),
    "gemv_chain": lambda b, t: b.gemv_chain([GemvLink(t["x"], t["x"], t["table"])]),
    "softmax": lambda b, t: b.softmax(t["x"]),
    "matmul": lambda b, t: b.matmul(t["x"], t["x"], transpose_b=True),
    "linear": lambda b, t: b.linear(t["x"], t["x"]),
    "mlp_swiglu": lambda b, t: b.mlp_swiglu(t["x"], t["x"], t["x"], t["x"].reshape(8, 4)),
    "rope": lambda b, t: b.rope(t["heads"], t["table"], t["table"]),
    "rope_and_cache": lambda b, t: b.rope_and_cache(
        t["heads"], t["heads2"], t["heads2"], t["table"], t["table"], None, t["kv_table"],
        t["kv_table2"], t["ids"][:2]),
    "embedding": lambda b, t: b.embedding(t["ids"], t["table"]),
    "transpose": lambda b, t: b.transpose(t["x"]),
    "empty": lambda b, t: b.empty(3),
    "zeros": lambda b, t: b.zeros(3),
    "from_numpy": lambda b, t: b.from_numpy(np.ones(3, np.float32)),
    "from_dlpack": lambda b, t: b.from_dlpack(t["x"]),
    "synchronize": lambda b, t: b.synchronize(),
    "quantized_linear": lambda b, t: b.quantized_linear(t["x"].reshape(1, 32), t["q8"]),
    "dequantize": lambda b, t: b.dequantize(t["q8"]),
    "split_quantized": lambda b, t: b.split_quantized(t["q8"]),
    # issue 14's op set
    "where": lambda b, t: b.where(t["x"] > 0, t["x"], 0.0),
    "affine": lambda b, t: b.affine(t["x"], 2.0, 1.0),
    "clamp": lambda b, t: b.clamp(t["x"], 0.0, 1.0),
    "elu": lambda b, t: b.elu(t["x"], 1.0),
    "powf": lambda b, t: b.powf(t["x"], 2.0),
    "sum": lambda b, t: b.sum(t["x"], 1),
    "mean": lambda b, t: b.mean(t["x"], 1),
    "max": lambda b, t: b.max(t["x"], 1),
    "min": lambda b, t: b.min(t["x"], 1),
    "argmax": lambda b, t: b.argmax(t["x"], 1),
    "argmin": lambda b, t: b.argmin(t["x"], 1),
    "log_softmax": lambda b, t: b.log_softmax(t["x"], axis=0),
    "l2_normalize": lambda b, t: b.l2_normalize(t["x"]),
    "scaled_dot_product_attention": lambda b, t: b.scaled_dot_product_attention(
        t["x"][None, None], t["x"][None, None], t["x"][None, None]
    ),
    "attention_decode": lambda b, t: b.attention_decode(
        t["x"][None, None, :1], t["x"][None, None], t["x"][None, None], t["ids"][:1]
    ),
    "index_select": lambda b, t: b.index_select(t["x"], 1, t["ids"]),
    "gather": lambda b, t: b.gather(t["x"], 1, t["x"][:, :2].view(np.int32)),
    "scatter_add": lambda b, t: b.scatter_add(t["x"], 0, t["ids"][None], t["x"]),
    "index_add": lambda b, t: b.index_add(t["x"], 1, t["ids"], t["x"][:, :3]),
    "argsort": lambda b, t: b.argsort(t["x"]),
    "topk": lambda b, t: b.topk(t["x"], 2),
    "arange": lambda b, t: b.arange(5),
    "full": lambda b, t: b.full(3, 1.5),
    "fill_": lambda b, t: b.fill_(t["x"][0], 1.0),
    "tril": lambda b, t: b.tril(t["x"]),
    "triu": lambda b, t: b.triu(t["x"], 1),
    "causal_mask": lambda b, t: b.causal_mask(4),
    "cat": lambda b, t: b.cat([t["x"], t["x"]], 1),
    "stack": lambda b, t: b.stack([t["x"], t["x"]]),
    "split": lambda b, t: b.split(t["x"], 2, 1),
    "chunk": lambda b, t: b.chunk(t["x"], 3),
    "pad": lambda b, t: b.pad(t["x"], 1),
    # the spatial ops (issue 19), one call shape each: an image [1, 1, 4, 8] and a window of it
    **{name: (lambda op: lambda b, t: getattr(b, op)(t["x"].reshape(1, 1, 4, 8), t["x"].reshape(1, 1, 4, 8)))(name) for name in ("conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "upsample_nearest2d", "upsample_bilinear2d", "group_norm")}, **{name: (lambda op: lambda b, t: getattr(b, op)(t["x"].reshape(1, 4, 8), t["x"].reshape(1, 4, 8)))(name) for name in ("conv1d", "conv_transpose1d")}, "batch_norm": lambda b, t: b.batch_norm(t["x"], t["row"], t["row"]),  # noqa: E501
    # the binary and unary ops of the pointwise family, one call shape each
    **{name: (lambda op: lambda b, t: getattr(b, op)(t["x"], t["row"]))(name) for name in (
        "sub", "div", "maximum", "minimum", "pow", "eq", "ne", "lt", "le", "gt", "ge")},
    **{name: (lambda op: lambda b, t: getattr(b, op)(t["x"]))(name) for name in (
        "abs", "neg", "sign", "sqr", "relu", "recip", "floor", "ceil", "round", "exp", "log",
        "sin", "cos", "tanh", "sqrt", "rsqrt", "sigmoid", "erf")},
}  # fmt: skip
BLAS: dict[str, Call] = {
    "gemm": lambda blas, t: blas.gemm(Gemm(m=4, n=4, k=8), *[t["x"].ptr] * 3, HIP_R_32F),
    "prepare": lambda blas, t: blas.prepare(Gemm(m=4, n=4, k=8), HIP_R_32F),
}
KV_CACHE: dict[str, Call] = {
    "append": lambda c, t: c.append(0, t["cache"], t["cache"]),
    "view": lambda c, t: c.view(0),
    "tables": lambda c, t: c.tables(0),
    "reserve": lambda c, t: c.reserve(0, 1),
    "kv_lengths": lambda c, t: c.kv_lengths(0),
    "write": lambda c, t: c.write(0, t["cache"], t["cache"], t["ids"]),
    "advance": lambda c, t: c.advance(),
    "reset": lambda c, t: c.reset(),
}
SCRATCH: dict[str, Call] = {
    "tensor": lambda s, t: s.tensor((4,)),
    "reset": lambda s, t: s.reset(),
}
RUNTIME: dict[str, Call] = {
    "load_weights": lambda r, t: r.load_weights("nowhere.safetensors"),
    "reserve_scratch": lambda r, t: r.reserve_scratch(256),
    "allocate_kv_cache": lambda r, t: r.allocate_kv_cache(
        layers=1, max_tokens=2, kv_heads=2, head_dim=4
    ),
    "memory": lambda r, t: r.memory(),
}

MAKERS: dict[str, Callable[[Device], Any]] = {
    "HipBackend": HipBackend,
    "Blas": lambda device: Blas(device.create_stream()),
    "KVCache": lambda device: KVCache(
        device, device.default_stream, layers=1, max_tokens=2, kv_heads=2, head_dim=4
    ),
    "ScratchArena": lambda device: ScratchArena(device, device.default_stream, 1024),
    "ModelRuntime": lambda device: ModelRuntime(device=device),
}
CALLS: dict[str, dict[str, Call]] = {
    "HipBackend": BACKEND,
    "Blas": BLAS,
    "KVCache": KV_CACHE,
    "ScratchArena": SCRATCH,
    "ModelRuntime": RUNTIME,
}


def public_methods(cls: type) -> set[str]:
    """The instance methods a user calls (close and what Resource itself defines excepted)."""
    return {
        name
        for name, _ in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
        and not isinstance(inspect.getattr_static(cls, name), staticmethod)
        and name not in vars(Resource)
    }


@pytest.mark.parametrize("kind", MAKERS)
def test_closed_objects_raise_closed_error_from_every_method(
    device: Device, tensors: dict[str, Any], kind: str
) -> None:
    made = MAKERS[kind](device)
    assert isinstance(made, Resource) and not made.closed
    assert public_methods(type(made)) == set(CALLS[kind])
    made.close()
    made.close()  # twice is harmless
    assert made.closed
    for call in CALLS[kind].values():
        with pytest.raises(ClosedError, match=f"{kind} is closed"):
            call(made, tensors)
    assert made.closed
    if kind in ("HipBackend", "ModelRuntime"):
        assert "closed" in repr(made)


@pytest.mark.parametrize("kind", MAKERS)
def test_with_closes(device: Device, kind: str) -> None:
    with MAKERS[kind](device) as made:
        assert not made.closed
    assert made.closed


def test_a_runtime_closes_what_it_holds(device: Device) -> None:
    with ModelRuntime(device=device) as runtime:
        scratch = runtime.reserve_scratch(256)
        cache = runtime.allocate_kv_cache(layers=1, max_tokens=2, kv_heads=2, head_dim=4)
        backend = runtime.backend
        replaced = runtime.reserve_scratch(512)  # the old arena is closed on replacement
        assert scratch.closed and not replaced.closed
    assert replaced.closed and cache.closed and backend.closed and backend.blas.closed
    kept = HipBackend(device)  # a backend handed in is the caller's: left open
    with ModelRuntime(kept):
        pass
    assert not kept.closed
    kept.close()
