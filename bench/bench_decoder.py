"""A Llama-style decoder generating: hip_runtime's LlamaDecoder beside transformers on torch eager,
in one run (issue 16's decoder row: goal >= 1.5x torch eager).

The model: a 1B-class Llama (Llama-3.2-1B's shape: 16 layers, hidden 2048, 32 query / 8
key-value heads of 64, SwiGLU 8192, vocabulary 128256, tied embeddings) with random weights in
bf16, made by transformers' LlamaForCausalLM from a config and saved to a temporary folder, which
LlamaDecoder.from_folder loads: both sides run the same weights. Prompts: `--prompt` random
tokens per sequence (no padding), at each batch of `--batches`.

Per batch: the prefill (one forward of batch x prompt tokens, logits included) in ms, and
`generate` of `--new` greedy tokens (prefill included, every step run: no stop token) as new
tokens per second over the whole call; the median of 3 after a warm-up. "hip graph" replays
each decode step as one captured graph (`generate(graph=True)`). torch runs
`model.generate(do_sample=False, min_new_tokens=new)` (its default attention, no compile, no
CUDA graphs) and `model(...)` for the prefill. The ratio printed is hip / torch tokens per
second (higher is better) and torch / hip prefill time.

Anchors (torch, transformers) run only on the nvidia platform with both importable; otherwise
each is a `skipped` row with the reason. Without transformers nothing can make the model, so
the run is a skipped row too. Prints JSON lines, then a table; writes bench_decoder.jsonl and
bench_decoder.md under --out.

`--step` (issue 15's row) times instead one decode step of a smaller Llama-style model (8
layers, hidden 1024, 16/4 heads of 64, SwiGLU 2816, vocabulary 32000) with a KV cache at 1024
tokens, batch 1: hip eager and hip's captured graph (`LlamaDecoder`'s decode step), beside
transformers on a StaticCache eager and captured by torch.cuda.CUDAGraph (issue 15's goal:
graph replay >= 1.0x torch CUDA graphs). µs per step: 100 back-to-back steps and one
synchronize, median of 3 after a prefill and 8 warm-up steps; writes bench_decoder_step.*.

    python bench/bench_decoder.py [--quick] [--out DIR] [--batches 1 16] [--prompt 512] [--new 128]
    python bench/bench_decoder.py --step [--quick] [--out DIR] [--batches 1] [--prompt 1024]
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from _harness import ROWS, emit, parser, run, save, seconds

from hip_core import hip_api

#: Llama-3.2-1B's shape (random weights).
ONE_B = dict(
    vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
    num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=8192,
    rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True, bos_token_id=1,
    eos_token_id=2, pad_token_id=0,
)  # fmt: skip
TINY = dict(ONE_B, vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32)  # fmt: skip
REPEATS = 3
#: Issue 15's decode-step model (`--step`): Llama-style, random weights.
STEP = dict(ONE_B, vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
            num_attention_heads=16, num_key_value_heads=4, head_dim=64)  # fmt: skip
STEP_WARMUP, STEP_CALLS = 8, 100  # decode steps before the timed ones, and timed per repeat


def make_model(settings: dict[str, Any], folder: Path) -> Any:
    """transformers' LlamaForCausalLM of `settings`, bf16, random, saved to `folder`; returned on
    CUDA when torch sees one (the anchor), else None."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cuda = torch.cuda.is_available()
    torch.manual_seed(0)
    with torch.device("cuda" if cuda else "cpu"):
        model = LlamaForCausalLM(LlamaConfig(**settings)).to(torch.bfloat16).eval()
    model.save_pretrained(folder)
    return model if cuda else None


def prompts(settings: dict[str, Any], batch: int, length: int) -> np.ndarray:
    rng = np.random.default_rng(batch)
    return rng.integers(3, settings["vocab_size"], (batch, length)).astype(np.int64)


def bench_hip(folder: Path, settings: dict[str, Any], batches: list[int], length: int,
              new: int) -> None:  # fmt: skip
    from hip_runtime.models import LlamaDecoder

    with LlamaDecoder.from_folder(folder, dtype="bfloat16", max_tokens=length + new) as decoder:
        sync = decoder.backend.synchronize
        for batch in batches:
            ids = prompts(settings, batch, length)

            def prefill(ids: np.ndarray = ids) -> None:
                decoder.forward(ids)
                sync()

            emit(bench="prefill", impl="hip", batch=batch, ms=seconds(prefill, REPEATS) * 1e3,
                 platform=hip_api().platform)  # fmt: skip
            for graph in (False, True):

                def generate(ids: np.ndarray = ids, graph: bool = graph) -> None:
                    decoder.generate(ids, max_new_tokens=new, eos_token_id=(), graph=graph)

                s = seconds(generate, REPEATS)
                emit(bench="generate", impl="hip graph" if graph else "hip", batch=batch,
                     tokens_per_s=batch * new / s)  # fmt: skip


def bench_torch(model: Any, settings: dict[str, Any], batches: list[int], length: int,
                new: int) -> None:  # fmt: skip
    if hip_api().platform != "nvidia":
        raise RuntimeError(f"torch runs on CUDA only; this platform is {hip_api().platform}")
    if model is None:
        raise RuntimeError("torch sees no CUDA device")
    import torch

    with torch.inference_mode():
        for batch in batches:
            ids = torch.from_numpy(prompts(settings, batch, length)).cuda()

            def prefill(ids: Any = ids) -> None:
                model(input_ids=ids)
                torch.cuda.synchronize()

            def generate(ids: Any = ids) -> None:
                model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                               min_new_tokens=new, do_sample=False, pad_token_id=0)  # fmt: skip
                torch.cuda.synchronize()

            emit(bench="prefill", impl="torch eager", batch=batch,
                 ms=seconds(prefill, REPEATS) * 1e3)  # fmt: skip
            s = seconds(generate, REPEATS)
            emit(bench="generate", impl="torch eager", batch=batch, tokens_per_s=batch * new / s)


def step_hip(folder: Path, settings: dict[str, Any], batch: int, length: int) -> None:
    """`step` rows: µs per decode step of `batch` sequences whose KV cache holds `length`
    tokens (then up to STEP_WARMUP + STEP_CALLS more), eager and replayed as a graph; each
    repeat prefills again."""
    from hip_runtime.models import LlamaDecoder

    capacity = length + STEP_WARMUP + STEP_CALLS + 1
    ids = prompts(settings, batch, length)
    with LlamaDecoder.from_folder(folder, dtype="bfloat16", max_tokens=capacity) as decoder:
        backend = decoder.backend
        token = backend.from_numpy(np.full(batch, 5, np.int64))
        for graph in (False, True):
            times = []
            for _ in range(REPEATS):
                decoder.forward(ids)
                step = decoder.decode_step(graph)
                for _ in range(STEP_WARMUP):
                    step(token)
                backend.synchronize()
                times.append(timed_steps(lambda s=step: s(token), backend.synchronize))
            emit(bench="step", impl="hip graph replay" if graph else "hip eager", batch=batch,
                 us=float(np.median(times)), platform=hip_api().platform)  # fmt: skip


def timed_steps(step: Any, sync: Any) -> float:
    """µs per call of STEP_CALLS back-to-back `step()` calls and one `sync()`."""
    import time

    start = time.perf_counter()
    for _ in range(STEP_CALLS):
        step()
    sync()
    return (time.perf_counter() - start) / STEP_CALLS * 1e6


def step_torch(model: Any, settings: dict[str, Any], batch: int, length: int) -> None:
    """The same decode step in transformers on a StaticCache (fixed shapes, the cache position
    a device tensor): eager, and captured once by torch.cuda.CUDAGraph (the position's
    increment inside the graph) and replayed."""
    if hip_api().platform != "nvidia":
        raise RuntimeError(f"torch runs on CUDA only; this platform is {hip_api().platform}")
    if model is None:
        raise RuntimeError("torch sees no CUDA device")
    import torch
    from transformers import StaticCache

    capacity = length + STEP_WARMUP + STEP_CALLS + 1
    ids = torch.from_numpy(prompts(settings, batch, length)).cuda()
    token = torch.full((batch, 1), 5, dtype=torch.int64, device="cuda")
    position = torch.zeros(1, dtype=torch.int64, device="cuda")

    def step() -> None:
        model(input_ids=token, past_key_values=cache, cache_position=position, use_cache=True)
        position.add_(1)

    with torch.inference_mode():
        cache = StaticCache(config=model.config, max_cache_len=capacity)

        def prefill() -> None:
            # (transformers 5's static layers count their own length and ignore the cache
            # position given: a prefill again starts from a reset, in place)
            cache.reset()
            model(input_ids=ids, past_key_values=cache, use_cache=True,
                  cache_position=torch.arange(length, device="cuda"))  # fmt: skip
            position.fill_(length)
            for _ in range(STEP_WARMUP):
                step()
            torch.cuda.synchronize()

        times = []
        for _ in range(REPEATS):
            prefill()
            times.append(timed_steps(step, torch.cuda.synchronize))
        emit(bench="step", impl="torch eager", batch=batch, us=float(np.median(times)))
        try:
            prefill()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
        except Exception as error:  # the row says why; the eager rows stand
            emit(bench="skipped", impl="torch CUDA graph step",
                 reason=f"{type(error).__name__}: {error}")  # fmt: skip
            return
        times = []
        for _ in range(REPEATS):
            prefill()
            times.append(timed_steps(graph.replay, torch.cuda.synchronize))
        emit(bench="step", impl="torch CUDA graph", batch=batch, us=float(np.median(times)))


def step_table(settings: dict[str, Any], length: int) -> str:
    steps = {(r["batch"], r["impl"]): r["us"] for r in ROWS if r["bench"] == "step"}
    lines = [
        f"decode step: {settings['num_hidden_layers']} layers, hidden {settings['hidden_size']}, "
        f"heads {settings['num_attention_heads']}/{settings['num_key_value_heads']}, vocab "
        f"{settings['vocab_size']}, bf16; KV cache at {length} tokens",
        "",
        "| batch | impl | µs per step | speed-up vs torch eager | vs torch CUDA graph |",
        "| ---: | --- | ---: | ---: | ---: |",
    ]
    for (batch, impl), us in sorted(steps.items()):
        eager, graph = steps.get((batch, "torch eager")), steps.get((batch, "torch CUDA graph"))
        vs_eager = f"{eager / us:.2f}" if eager else "-"
        vs_graph = f"{graph / us:.2f}" if graph else "-"
        lines.append(f"| {batch} | {impl} | {us:.1f} | {vs_eager} | {vs_graph} |")
    lines += [f"skipped {r['impl']}: {r['reason']}" for r in ROWS if r["bench"] == "skipped"]
    return "\n".join(lines)


def table(settings: dict[str, Any], length: int, new: int) -> str:
    lines = [
        f"decoder: {settings['num_hidden_layers']} layers, hidden {settings['hidden_size']}, "
        f"heads {settings['num_attention_heads']}/{settings['num_key_value_heads']}, vocab "
        f"{settings['vocab_size']}, bf16; prompt {length}, {new} greedy tokens",
        "",
        "| batch | impl | prefill ms | generate tokens/s | prefill speed-up | tokens/s ratio |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    found: dict[tuple[int, str], dict[str, float]] = {}
    for r in ROWS:
        if r["bench"] in ("prefill", "generate"):
            found.setdefault((r["batch"], r["impl"]), {}).update(
                {k: v for k, v in r.items() if k in ("ms", "tokens_per_s")}
            )
    for (batch, impl), got in sorted(found.items()):
        torch = found.get((batch, "torch eager"), {})
        speed = f"{torch['ms'] / got['ms']:.2f}" if "ms" in torch and "ms" in got else "-"
        ratio = (f"{got['tokens_per_s'] / torch['tokens_per_s']:.2f}"
                 if "tokens_per_s" in torch and "tokens_per_s" in got else "-")  # fmt: skip
        ms, rate = got.get("ms", float("nan")), got.get("tokens_per_s", float("nan"))
        lines.append(f"| {batch} | {impl} | {ms:.1f} | {rate:.0f} | {speed} | {ratio} |")
    lines += [f"skipped {r['impl']}: {r['reason']}" for r in ROWS if r["bench"] == "skipped"]
    return "\n".join(lines)


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    flags.add_argument("--prompt", type=int, default=512)
    flags.add_argument("--new", type=int, default=128)
    flags.add_argument(
        "--step",
        action="store_true",
        help="issue 15's decode-step rows instead (8 layers, hidden 1024, GQA 16/4, KV cache "
        "at --prompt tokens, default 1024; batch: --batches, default 1)",
    )
    args = flags.parse_args()
    if args.step:
        return main_step(args)
    settings, batches, length, new = ONE_B, args.batches, args.prompt, args.new
    if args.quick:
        settings, batches, length, new = TINY, [1, 2], 32, 8
    with tempfile.TemporaryDirectory() as tmp:
        model: list[Any] = []
        run((("transformers (makes the model)",
              lambda: model.append(make_model(settings, Path(tmp)))),))  # fmt: skip
        if model:
            run(
                (
                    ("hip_runtime", lambda: bench_hip(Path(tmp), settings, batches, length, new)),
                    ("torch", lambda: bench_torch(model[0], settings, batches, length, new)),
                )
            )
    save(args.out, "bench_decoder", table(settings, length, new))


def main_step(args: Any) -> None:
    settings = TINY if args.quick else STEP
    length = 32 if args.quick else (1024 if args.prompt == 512 else args.prompt)
    batches = [1] if args.batches == [1, 16] else args.batches
    with tempfile.TemporaryDirectory() as tmp:
        model: list[Any] = []
        run((("transformers (makes the model)",
              lambda: model.append(make_model(settings, Path(tmp)))),))  # fmt: skip
        for batch in batches if model else []:
            run(
                (
                    ("hip_runtime", lambda b=batch: step_hip(Path(tmp), settings, b, length)),
                    ("torch", lambda b=batch: step_torch(model[0], settings, b, length)),
                )
            )
    save(args.out, "bench_decoder_step", step_table(settings, length))


if __name__ == "__main__":
    main()
