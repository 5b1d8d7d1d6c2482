"""A 1B Llama's decode step against the GPU's memory rate (issue 38's row), batch 1-64.

The model is bench_decoder's: Llama-3.2-1B's shape, random bf16 weights made and saved by
transformers. For each batch and engine, LlamaDecoder prefills `--prompt` random tokens a
sequence, then replays its captured decode step (`generate(graph=True)`'s graph): µs per step
from device events around `--steps` back-to-back replays, and a CUPTI profile of the same
replays (torch.profiler's trace, which sees every kernel of the process, ours included):

- kernels a token: kernel launches per decode step;
- kernel µs a token: their device time per step (the rest of the step is gaps between them);
- tokens/s: batch / step time;
- of copy: the weight bytes a step reads (every parameter once; tied embeddings once) per
  second, as a fraction of the same run's device-to-device copy rate (256 MiB, read + write,
  the better of hipMemcpyAsync and torch). Issue 38's goal: >= 0.80 at batch 1.

Engines: "gemv" (`HipBackend(gemv_rows=16)`: batches of up to 16 rows through hip-runtime's
GEMV kernel with the norms, SwiGLU and residual adds fused in, hip_runtime.ops.gemv, its
16-row tile from 3 rows of bf16; the default is 2 rows), "gemv-chained" (the same, each
layer's products after attention chained into one launch: `LlamaDecoder.chain_products`,
hip_runtime.ops.gemv_chain, up to 2 rows of bf16) and "blas"
(`HipBackend(gemv_rows=0)`: rmsnorm, BLAS, swiglu as separate ops), in the same run. An
engine's name with "-ordered" after it ("gemv-ordered") runs it with every launch waiting for
the kernel ahead (no early start: hip_runtime.libraries.kernel_cache.EARLY_START emptied), the
anchor of the early-start kernels; such engines run first (a kernel, once started early, stays
so for the process). "-unfolded" after a name ("blas-unfolded") loads the model without its
norm weights folded into the QKV and gate/up weights (models.llama_weights.fold_norms): BLAS
batches then run their rmsnorm launches, the anchor of the folded norms. `--without rope
attention rmsnorm` runs every engine a second time with
those ops of the step replaced by no-ops (`REMOVABLE`; the step's results are then wrong):
an ablation that bounds what fusing them away could save, in the same run. `--variant
SOURCE:OPTIONS` (e.g. `attention_decode.hip:-DHIPK_DECODE_EARLY_LOADS=0`) runs every engine
once more with that kernel source built with those compiler options (`kernel_cache.
extra_options`): a kernel switch's A/B in one run. Needs the
nvidia platform with torch and transformers (the profile and the model); otherwise one skipped
row. Writes bench_roofline.jsonl, .md and a plot (.png, matplotlib) under --out.

    python bench/bench_roofline.py [--quick] [--out DIR] [--batches 1 2 4 8 16 32 64]
        [--prompt 32] [--steps 50] [--engines gemv gemv-chained blas] [--max-tokens N]
        [--without rope attention rmsnorm] [--variant SOURCE:OPTIONS ...]
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from _harness import ROWS, cupti_kernels, emit, parser, run, save
from bench_decoder import ONE_B, TINY, make_model, prompts
from bench_ops import HipTimer, bench_copy, import_torch

from hip_core import hip_api
from hip_runtime.libraries import kernel_cache

COPY_BYTES = 256 << 20
WARMUP = 8
#: --without's choices: the HipBackend method each names and its stand-in (timing only).
REMOVABLE = {
    "rope": ("rope_and_cache", lambda self, *args, **kwargs: None),
    "attention": ("attention_decode", lambda self, q, *args, **kwargs: q),
    "rmsnorm": ("rmsnorm", lambda self, x, *args, **kwargs: x),
}


def weight_bytes(model: Any) -> int:
    """Bytes of every parameter once (`parameters()` yields a tied weight once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


@contextlib.contextmanager
def early_start_off(off: bool) -> Iterator[None]:
    """Inside, when `off`, no kernel the cache hands out starts early (an ordered engine; run
    before the others: a kernel once started early stays so for the process)."""
    saved = kernel_cache.EARLY_START
    if off:
        kernel_cache.EARLY_START = frozenset()
    try:
        yield
    finally:
        kernel_cache.EARLY_START = saved


@contextlib.contextmanager
def ops_removed(names: tuple[str, ...]) -> Iterator[None]:
    """Inside, HipBackend's methods named by `names` (REMOVABLE's keys) are no-ops."""
    from hip_runtime import HipBackend

    saved = {}
    for name in names:
        method, stand_in = REMOVABLE[name]
        saved[method] = HipBackend.__dict__.get(method)
        setattr(HipBackend, method, stand_in)
    try:
        yield
    finally:
        for method, own in saved.items():
            if own is None:
                delattr(HipBackend, method)  # the inherited op again
            else:
                setattr(HipBackend, method, own)


@contextlib.contextmanager
def norms_unfolded(unfolded: bool) -> Iterator[None]:
    """Inside, when `unfolded`, LlamaDecoder loads keep each norm's weight apart (no layer is
    `foldable`)."""
    from hip_runtime.models import llama_weights

    saved = llama_weights.foldable
    if unfolded:
        llama_weights.foldable = lambda layer: False
    try:
        yield
    finally:
        llama_weights.foldable = saved


def engine_label(engine: str, without: tuple[str, ...], variant: str) -> str:
    """The engine's name in the rows: e.g. "gemv without rope+attention [norms.hip:-DX=1]"."""
    label = f"{engine} without {'+'.join(without)}" if without else engine
    return f"{label} [{variant}]" if variant else label


def bench_engine(folder: Path, settings: dict[str, Any], torch: Any, engine: str,
                 batches: list[int], length: int, steps: int, nbytes: int, copy: float,
                 max_tokens: int | None, without: tuple[str, ...] = (),
                 variant: str = "") -> None:  # fmt: skip
    from hip_runtime import HipBackend
    from hip_runtime.models import LlamaDecoder
    from hip_runtime.ops.gemv import GEMV_MAX_ROWS

    label = engine_label(engine, without, variant)
    source, _, options = variant.partition(":")
    folded = engine.removesuffix("-unfolded")
    base = folded.removesuffix("-ordered")
    rows = 0 if base == "blas" else GEMV_MAX_ROWS
    capacity = max_tokens or length + WARMUP + 2 * steps + 2
    backend = HipBackend(gemv_rows=rows)
    built = (
        kernel_cache.extra_options(source, options.split()) if variant else contextlib.nullcontext()
    )
    with ops_removed(without), early_start_off(base != folded), built, \
            norms_unfolded(folded != engine), backend, \
            LlamaDecoder.from_folder(folder, backend, dtype="bfloat16",
                                     max_tokens=capacity) as decoder:  # fmt: skip
        decoder.chain_products = base == "gemv-chained"
        timer = HipTimer(backend)
        for batch in batches:
            decoder.forward(prompts(settings, batch, length))
            step = decoder.decode_step(graph=True)
            token = backend.from_numpy(np.full(batch, 5, np.int64))
            for _ in range(WARMUP):
                step(token)
            timer.start()
            for _ in range(steps):
                step(token)
            us = timer.stop() * 1e3 / steps
            kernels, kernel_us, by_name = cupti_kernels(
                torch, lambda s=step, t=token: s(t), steps, backend.synchronize
            )
            for name, (count, total) in sorted(by_name.items(), key=lambda e: -e[1][1])[:8]:
                emit(bench="kernel", engine=label, batch=batch, kernel=name[:60],
                     per_token=count / steps, us=total / steps)  # fmt: skip
            emit(bench="roofline", engine=label, batch=batch, us=us, tokens_s=batch / us * 1e6,
                 kernels=kernels, kernel_us=kernel_us, gb_s=nbytes / us / 1e3,
                 of_copy=nbytes / us / 1e3 / copy, platform=hip_api().platform)  # fmt: skip


def table(nbytes: int, copy: float) -> str:
    lines = [
        f"weights {nbytes / 1e9:.2f} GB; copy rate {copy:.0f} GB/s", "",
        "| engine | batch | µs / step | tokens/s | kernels / token | kernel µs / token | "
        "GB/s of weights | of copy |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]  # fmt: skip
    for r in ROWS:
        if r["bench"] == "roofline":
            lines.append(
                f"| {r['engine']} | {r['batch']} | {r['us']:.1f} | {r['tokens_s']:.0f} | "
                f"{r['kernels']:.0f} | {r['kernel_us']:.1f} | {r['gb_s']:.0f} | "
                f"{r['of_copy']:.3f} |"
            )
        elif r["bench"] == "skipped":
            lines.append(f"| {r.get('impl', '')} | skipped: {r['reason'][:80]} | | | | | | |")
    lines += [
        "",
        "Batch 1's kernels (the 8 longest by µs a token):",
        "",
        "| engine | kernel | launches / token | µs / token |",
        "| --- | --- | ---: | ---: |",
    ]
    for r in ROWS:
        if r["bench"] == "kernel" and r["batch"] == 1:
            lines.append(f"| {r['engine']} | `{r['kernel']}` | {r['per_token']:.0f} | "
                         f"{r['us']:.1f} |")  # fmt: skip
    return "\n".join(lines)


def plot(out: Path) -> None:
    """of copy and tokens/s over batch, one line per engine (skipped without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for engine in sorted({r["engine"] for r in ROWS if r["bench"] == "roofline"}):
        rows = [r for r in ROWS if r["bench"] == "roofline" and r["engine"] == engine]
        batches = [r["batch"] for r in rows]
        left.plot(batches, [r["of_copy"] for r in rows], marker="o", label=engine)
        right.plot(batches, [r["tokens_s"] for r in rows], marker="o", label=engine)
    for axis, label in ((left, "weight bytes/s ÷ copy rate"), (right, "tokens/s")):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("batch")
        axis.set_ylabel(label)
        axis.grid(True, alpha=0.3)
        axis.legend()
    left.axhline(0.8, color="gray", linestyle="--", linewidth=1)
    figure.suptitle("1B Llama decode step (bf16, graph replay)")
    figure.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    figure.savefig(out / "bench_roofline.png", dpi=120)


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    flags.add_argument("--prompt", type=int, default=32)
    flags.add_argument("--steps", type=int, default=50)
    flags.add_argument("--engines", nargs="+", default=["gemv", "gemv-chained", "blas"])
    flags.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="the KV cache's capacity a sequence (default: what the run needs)",
    )
    flags.add_argument(
        "--without",
        nargs="+",
        choices=sorted(REMOVABLE),
        default=[],
        help="also run each engine with these ops as no-ops (timing only)",
    )
    flags.add_argument(
        "--variant",
        nargs="+",
        default=[],
        metavar="SOURCE:OPTIONS",
        help="also run each engine with SOURCE built with OPTIONS added (space-separated)",
    )
    args = flags.parse_args()
    settings, batches, steps = (TINY, [1, 2], 5) if args.quick else (ONE_B, args.batches,
                                                                      args.steps)  # fmt: skip
    torch = import_torch(hip_api().platform)
    facts: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:

        def setup() -> None:
            if torch is None:
                raise RuntimeError("needs the nvidia platform with torch (the profile)")
            from hip_runtime import HipBackend

            model = make_model(settings, Path(tmp))
            facts["bytes"] = weight_bytes(model)
            del model
            torch.cuda.empty_cache()
            with HipBackend() as backend:
                facts["copy"] = bench_copy(backend, torch, COPY_BYTES, 10)

        run((("transformers + torch (model, profile)", setup),))
        engines = sorted(args.engines, key=lambda e: "-ordered" not in e)
        ablations = [(), tuple(args.without)] if args.without else [()]
        runs = [(e, w, v) for e in engines for w in ablations for v in ["", *args.variant]]
        for engine, without, variant in runs if facts else []:
            run(((f"hip_runtime {engine_label(engine, without, variant)}",
                  lambda e=engine, w=without, v=variant: bench_engine(
                      Path(tmp), settings, torch, e, batches, args.prompt, steps, facts["bytes"],
                      facts["copy"], args.max_tokens, w, v)),))  # fmt: skip
    save(args.out, "bench_roofline", table(facts.get("bytes", 0), facts.get("copy", 1.0)))
    plot(args.out)


if __name__ == "__main__":
    main()
