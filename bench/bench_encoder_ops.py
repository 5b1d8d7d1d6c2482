"""The elementwise and row ops of one MiniLM-shaped encoder layer beside torch's, in one run
(issue 38: the encoder's non-GEMM passes are where hip lost to torch's CUDA graph at batch 128).

Shapes: tokens = --batch x --seq rows (128 x 128), hidden 384, QKV 3 x 384, FFN 4 x 384:
- `layernorm` [tokens, hidden] with weight and bias;
- `layernorm(x + residual + bias)`: a post-LN layer's residual add and its product's bias fused
  into the norm (hip: one pass; torch: the two adds, then layer_norm);
- `linear + bias` (QKV): x @ wᵀ + b, hip's BLAS call and its bias add against torch's
  F.linear (cuBLAS with the bias in its epilogue);
- `gelu(x + bias)` [tokens, 4 hidden] (hip: one pass; torch: the bias add then GELU, as its
  F.linear epilogue leaves GELU alone: `F.gelu(x + b)`);
- `residual + bias` [tokens, hidden] (the addends hip's linear writes before the product).
Device µs per call (bench_ops' event timing: repeated batches, median), the minimum bytes each
moves / time as a fraction of the same run's copy rate, and torch / hip. Needs the nvidia
platform with torch for the anchors (hip rows alone elsewhere). Writes bench_encoder_ops.jsonl
and .md under --out.

    python bench/bench_encoder_ops.py [--quick] [--out DIR] [--batch 128] [--seq 128]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from _harness import ROWS, emit, parser, run, save
from bench_ops import HipTimer, TorchTimer, bench_copy, import_torch, time_ms

from hip_core import hip_api
from hip_runtime import HipBackend

HIDDEN = 384
REPEATS = 15


def bench(backend: HipBackend, torch: Any, tokens: int, dtype: str, copy: float) -> None:
    rng = np.random.default_rng(0)

    def tensor(*shape: int) -> Any:
        host = rng.standard_normal(shape, dtype=np.float32)
        x = backend.from_numpy(host)
        return x if dtype == "f32" else backend.cast(x, "bfloat16")

    x, w_qkv = tensor(tokens, HIDDEN), tensor(3 * HIDDEN, HIDDEN)
    g, b, b_qkv, b_ffn = tensor(HIDDEN), tensor(HIDDEN), tensor(3 * HIDDEN), tensor(4 * HIDDEN)
    inner, residual = tensor(tokens, 4 * HIDDEN), tensor(tokens, HIDDEN)
    y, y_qkv = backend.empty(x.shape, x.dtype), backend.empty((tokens, 3 * HIDDEN), x.dtype)
    ours: dict[str, tuple[Callable[[], Any], int]] = {
        "layernorm": (lambda: backend.layernorm(x, g, b, eps=1e-12, out=y), 2 * x.nbytes),
        "layernorm(x + residual + bias)": (
            lambda: backend.layernorm(x, g, b, eps=1e-12, residual=residual, input_bias=b, out=y),
            3 * x.nbytes,
        ),
        "linear + bias (QKV)": (
            lambda: backend.linear(x, w_qkv, b_qkv, out=y_qkv),
            x.nbytes + w_qkv.nbytes + y_qkv.nbytes,
        ),
        "gelu(x + bias)": (lambda: backend.gelu(inner, bias=b_ffn, out=inner), 2 * inner.nbytes),
        "residual + bias": (lambda: backend.add(residual, b, out=y), 2 * x.nbytes),
    }
    theirs: dict[str, Callable[[], Any]] = {}
    if torch is not None:
        functional = torch.nn.functional
        tx, tw, tg, tb, tbq, tbf, ti, tr = (
            torch.from_dlpack(t) for t in (x, w_qkv, g, b, b_qkv, b_ffn, inner, residual)
        )  # fmt: skip
        theirs = {
            "layernorm": lambda: functional.layer_norm(tx, (HIDDEN,), tg, tb, 1e-12),
            "layernorm(x + residual + bias)": lambda: functional.layer_norm(
                tx + tr + tb, (HIDDEN,), tg, tb, 1e-12
            ),
            "linear + bias (QKV)": lambda: functional.linear(tx, tw, tbq),
            "gelu(x + bias)": lambda: functional.gelu(ti + tbf),
            "residual + bias": lambda: tr + tb,
        }
    timer = HipTimer(backend)
    for op, (call, nbytes) in ours.items():
        ms = time_ms(call, timer.start, timer.stop, REPEATS)
        row: dict[str, Any] = dict(bench="op", op=op, dtype=dtype, tokens=tokens, us=ms * 1e3,
                                   of_copy=nbytes / ms / 1e6 / copy)  # fmt: skip
        if op in theirs:
            anchor = TorchTimer(torch)
            torch_ms = time_ms(theirs[op], anchor.start, anchor.stop, REPEATS)
            row.update(torch_us=torch_ms * 1e3, torch_of_copy=nbytes / torch_ms / 1e6 / copy,
                       vs_torch=torch_ms / ms)  # fmt: skip
        emit(**row)


def table(copy: float) -> str:
    lines = [f"copy rate {copy:.0f} GB/s; hidden {HIDDEN}", "",
             "| op | dtype | tokens | hip µs | of copy | torch µs | of copy | torch / hip |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for r in ROWS:
        if r["bench"] == "op":
            theirs = (f"{r['torch_us']:.1f} | {r['torch_of_copy']:.3f} | {r['vs_torch']:.2f}"
                      if "torch_us" in r else "- | - | -")  # fmt: skip
            lines.append(f"| {r['op']} | {r['dtype']} | {r['tokens']} | {r['us']:.1f} | "
                         f"{r['of_copy']:.3f} | {theirs} |")  # fmt: skip
        elif r["bench"] == "skipped":
            lines.append(f"| {r['impl']} | skipped: {r['reason'][:80]} | | | | | | |")
    return "\n".join(lines)


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--batch", type=int, default=128)
    flags.add_argument("--seq", type=int, default=128)
    args = flags.parse_args()
    tokens = 64 if args.quick else args.batch * args.seq
    torch = import_torch(hip_api().platform)
    copy = [1.0]

    def measure() -> None:
        with HipBackend() as backend:
            copy[0] = bench_copy(backend, torch, 256 << 20, 10)
            for dtype in ("f32", "bf16"):
                bench(backend, torch, tokens, dtype, copy[0])

    run((("hip_runtime + torch", measure),))
    save(args.out, "bench_encoder_ops", table(copy[0]))


if __name__ == "__main__":
    main()
