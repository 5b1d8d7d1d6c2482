"""A BERT encoder forward: hip_runtime's BertEncoder (eager, and replayed as a ForwardGraph)
beside transformers' BertModel on torch eager, in one run (issue 16's encoder row: goal >= 1.5x
torch eager).

The model: BERT-base's shape (12 layers, hidden 768, 12 heads, intermediate 3072, vocabulary
30522) with random weights, made by transformers' BertModel from a config, saved in bf16 to a
temporary folder that BertEncoder.from_folder loads (dtype bfloat16): both sides run the same
weights. The batch: `--batch` sequences padded to `--seq` tokens (the first full, the others of
random lengths from half to all of it), with the attention mask and two token-type segments.

Per forward: host wall time of back-to-back forwards and one synchronize, divided by their
number (hip_backend.bench.per_call through _harness: median of 7 repeats after a warm-up), the
last hidden state [B, S, H] included and left on the device. torch runs `model(**inputs)` under
`inference_mode` with its default attention (SDPA) and with `attn_implementation="eager"`; no
compile; "torch CUDA graph (sdpa)" is the same forward captured once by torch.cuda.CUDAGraph on
static inputs and replayed (issue 15's anchor for graph replay). The speed-up printed is torch
eager (SDPA) time / this row's time, and hip's graph replay beside torch's CUDA graph. The run
also prints how far hip's bf16 hidden state is from torch's (max |difference| / max |torch|).
Issue 15's encoder: `--layers 6 --hidden 384 --heads 12` (batch 32 x 128, the default);
issue 38 asks for it at `--batch 32` and `128`, `--dtype bfloat16` and `float32` (the weights
are saved in bf16 and loaded as --dtype by both sides).

Anchors (torch) run only on the nvidia platform with torch and transformers importable;
otherwise each is a `skipped` row with the reason. Without transformers nothing makes the model,
so the run is a skipped row too. Prints JSON lines, then a table; writes bench_encoder.jsonl and
bench_encoder.md under --out.

    python bench/bench_encoder.py [--quick] [--out DIR] [--layers 12] [--hidden 768] [--heads 12]
                                  [--batch 32] [--seq 128] [--dtype bfloat16|float32]
                                  [--profile]
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from _harness import ROWS, cupti_kernels, emit, median_us, parser, run, save

from hip_core import hip_api

#: BERT-base's shape (random weights).
BASE = dict(
    vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
    intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2,
)  # fmt: skip
TINY = dict(BASE, vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128)  # fmt: skip
BUDGET_S = 1.0  # timed seconds per figure (about; the run stays under 90 s)
HIDDEN: dict[str, np.ndarray] = {}  # each side's last hidden state, for the difference line
DTYPE = ["bfloat16"]  # --dtype: what both sides load the saved bf16 weights as
PROFILE = [False]  # --profile: each graph replay's kernels from a CUPTI trace


def make_model(settings: dict[str, Any], folder: Path) -> None:
    """transformers' BertModel of `settings`, random, saved in bf16 to `folder`."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    BertModel(BertConfig(**settings)).to(torch.bfloat16).eval().save_pretrained(folder)


def inputs(settings: dict[str, Any], batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(16)
    lengths = rng.integers(seq // 2, seq + 1, batch)
    lengths[0] = seq
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
    ids = rng.integers(1, settings["vocab_size"], (batch, seq)) * mask
    types = (np.arange(seq)[None, :] >= lengths[:, None] // 2) * mask
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def calls_for(guess_us: float, budget_s: float) -> int:
    return max(3, min(200, int(budget_s * 1e6 / max(guess_us, 1.0))))


def timed(impl: str, forward: Any, sync: Any, budget_s: float, **extra: Any) -> None:
    def call() -> None:  # the result is dropped (the timing loop reads a return as a status)
        forward()

    call()
    sync()
    guess = median_us(call, 2, sync)
    emit(bench="forward", impl=impl, us=median_us(call, calls_for(guess, budget_s), sync),
         **extra)  # fmt: skip


def bench_hip(folder: Path, feeds: dict[str, np.ndarray], budget_s: float) -> None:
    from hip_runtime import ForwardGraph
    from hip_runtime.models import BertEncoder

    with BertEncoder.from_folder(folder, dtype=DTYPE[0]) as encoder:
        backend = encoder.backend
        on_device = [backend.from_numpy(feeds[name]) for name in feeds]
        timed("hip eager", lambda: encoder.forward(*on_device), backend.synchronize, budget_s,
              platform=hip_api().platform)  # fmt: skip
        HIDDEN["hip"] = encoder.forward(*on_device).to_numpy().astype(np.float32)
        with ForwardGraph(backend, encoder.forward, *on_device) as graph:
            timed("hip graph replay", graph.replay, backend.synchronize, budget_s)
            if PROFILE[0]:
                kernels_of("hip graph replay", graph.replay, backend.synchronize)


def bench_torch(folder: Path, feeds: dict[str, np.ndarray], budget_s: float) -> None:
    if hip_api().platform != "nvidia":
        raise RuntimeError(f"torch runs on CUDA only; this platform is {hip_api().platform}")
    import torch
    from transformers import BertModel

    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    on_cuda = {name: torch.from_numpy(value).cuda() for name, value in feeds.items()}
    with torch.inference_mode():
        for attention in ("sdpa", "eager"):
            model = BertModel.from_pretrained(
                folder, dtype=getattr(torch, DTYPE[0]), attn_implementation=attention
            ).cuda().eval()  # fmt: skip
            timed(f"torch eager ({attention})", lambda m=model: m(**on_cuda),
                  torch.cuda.synchronize, budget_s)  # fmt: skip
            if attention == "sdpa":
                HIDDEN["torch"] = model(**on_cuda).last_hidden_state.float().cpu().numpy()
                timed_torch_graph(torch, model, on_cuda, budget_s)
            del model


def timed_torch_graph(torch: Any, model: Any, on_cuda: dict[str, Any], budget_s: float) -> None:
    """`torch CUDA graph (sdpa)`: the same forward captured by torch.cuda.CUDAGraph on static
    inputs (warmed up on a side stream first, as torch's docs do it) and replayed, as hip's
    graph replays its captured inputs. A model whose forward cannot be captured (a host sync
    inside it) is a `skipped` row."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(**on_cuda)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(**on_cuda)
    except Exception as error:  # the row says why; the eager rows stand
        emit(bench="skipped", impl="torch CUDA graph (sdpa)",
             reason=f"{type(error).__name__}: {error}")  # fmt: skip
        return
    timed("torch CUDA graph (sdpa)", graph.replay, torch.cuda.synchronize, budget_s)
    if PROFILE[0]:
        kernels_of("torch CUDA graph (sdpa)", graph.replay, torch.cuda.synchronize)


def kernels_of(impl: str, forward: Any, sync: Any, forwards: int = 5, top: int = 10) -> None:
    """`kernel` rows: the `top` kernels of one forward by device µs (CUPTI, torch.profiler)."""
    import torch

    launches, kernel_us, by_name = cupti_kernels(torch, forward, forwards, sync)
    emit(bench="kernels", impl=impl, launches=launches, us=kernel_us)
    for name, (count, total) in sorted(by_name.items(), key=lambda e: -e[1][1])[:top]:
        emit(bench="kernel", impl=impl, kernel=name[:70], per_forward=count / forwards,
             us=total / forwards)  # fmt: skip


def table(settings: dict[str, Any], batch: int, seq: int) -> str:
    forwards = {r["impl"]: r["us"] for r in ROWS if r["bench"] == "forward"}
    torch_us = forwards.get("torch eager (sdpa)")
    lines = [
        f"encoder: {settings['num_hidden_layers']} layers, hidden {settings['hidden_size']}, "
        f"{settings['num_attention_heads']} heads, batch {batch} x {seq} tokens (padded), "
        f"{DTYPE[0]}",
        "",
        "| forward | ms | speed-up vs torch eager (sdpa) |",
        "| --- | ---: | ---: |",
    ]
    for impl, us in forwards.items():
        speed = f"{torch_us / us:.2f}" if torch_us else "-"
        lines.append(f"| {impl} | {us / 1e3:.3f} | {speed} |")
    ours, theirs = forwards.get("hip graph replay"), forwards.get("torch CUDA graph (sdpa)")
    if ours and theirs:  # issue 15: graph replay >= 1.0x torch CUDA graphs
        lines.append(f"\nhip graph replay vs torch CUDA graph: speed-up {theirs / ours:.2f}")
    lines += [f"skipped {r['impl']}: {r['reason']}" for r in ROWS if r["bench"] == "skipped"]
    for r in ROWS:
        if r["bench"] == "kernels":
            lines.append(f"\n{r['impl']}: {r['launches']:.0f} kernels, {r['us']:.0f} µs a forward")
        elif r["bench"] == "kernel":
            lines.append(f"- `{r['kernel']}` x{r['per_forward']:.0f}: {r['us']:.0f} µs")
    if "hip" in HIDDEN and "torch" in HIDDEN:
        ours, theirs = HIDDEN["hip"], HIDDEN["torch"]
        lines.append(
            f"hip vs torch {DTYPE[0]} last hidden state: max |difference| / max |torch| = "
            f"{np.abs(ours - theirs).max() / np.abs(theirs).max():.4f}"
        )
    return "\n".join(lines)


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--layers", type=int, default=12)
    flags.add_argument("--hidden", type=int, default=768, help="hidden size (FFN: 4x)")
    flags.add_argument("--heads", type=int, default=12)
    flags.add_argument("--batch", type=int, default=32)
    flags.add_argument("--seq", type=int, default=128)
    flags.add_argument(
        "--dtype",
        choices=("bfloat16", "float32"),
        default="bfloat16",
        help="what both sides load the (bf16-saved) weights as",
    )
    flags.add_argument("--profile", action="store_true", help="kernels of each graph replay")
    flags.add_argument("--budget", type=float, default=BUDGET_S, help="timed seconds per row")
    args = flags.parse_args()
    DTYPE[0], PROFILE[0] = args.dtype, args.profile
    settings, batch, seq, budget = (
        dict(
            BASE,
            num_hidden_layers=args.layers,
            hidden_size=args.hidden,
            num_attention_heads=args.heads,
            intermediate_size=4 * args.hidden,
        ),
        args.batch,
        args.seq,
        args.budget,
    )
    if args.quick:
        settings, batch, seq, budget = TINY, 2, 16, 0.2
    feeds = inputs(settings, batch, seq)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        made: list[bool] = []
        run((("transformers (makes the model)",
              lambda: made.append(make_model(settings, folder) is None)),))  # fmt: skip
        if made:
            run(
                (
                    ("hip_runtime", lambda: bench_hip(folder, feeds, budget)),
                    ("torch", lambda: bench_torch(folder, feeds, budget)),
                )
            )
    save(args.out, "bench_encoder", table(settings, batch, seq))


if __name__ == "__main__":
    main()
