"""A BERT-style encoder forward: HipBackend eager and as a ForwardGraph replay, beside torch
eager and torch CUDA graphs, in one run.

The model (random weights, f32): `--layers` encoder layers of hidden size `--hidden`, `--heads`
attention heads and a 4x feed-forward, on a batch of `--batch` sequences of `--seq` tokens
(defaults: 6 layers, hidden 384, 12 heads, batch 32 x 128, issue 15's BERT row). Each layer:
QKV projection (matmul + add_row_bias), per-head scores (batched matmul with transpose_b and
alpha = 1/sqrt(head dim)), softmax, context (batched matmul written straight into the
[B, S, heads, head dim] layout), output projection, residual add + layernorm, GELU feed-forward,
residual add + layernorm. Only ops that exist in HipBackend today.

Per forward: host wall time of back-to-back forwards and one synchronize, divided by their
number (hip_backend.bench.per_call through _harness: median of 7 repeats after a warm-up).
This is what a serving loop pays: host cost and device time together. A replay includes
copying the input in (host array -> device for ours; a device tensor `copy_` for torch's
static input, as the torch docs do it, so ours is given the device input too).

Anchors (torch) run only on the nvidia platform with torch importable; otherwise each is a
`skipped` row with the reason, printed. Prints JSON lines, then a table; writes
bench_forward.jsonl and bench_forward.md under --out.

    python bench/bench_forward.py [--quick] [--out DIR] [--layers L] [--batch B] [--seq S]
"""

from __future__ import annotations

from typing import Any

import numpy as np
from _harness import ROWS, emit, median_us, parser, run, save

from hip_core import hip_api
from hip_runtime import DeviceTensor, ForwardGraph, HipBackend

EPS = 1e-5


class Config:
    def __init__(self, layers: int, hidden: int, heads: int, batch: int, seq: int) -> None:
        self.layers, self.hidden, self.heads, self.batch, self.seq = (
            layers, hidden, heads, batch, seq
        )  # fmt: skip
        self.head_dim = hidden // heads
        self.ffn = 4 * hidden

    def weights(self) -> list[dict[str, np.ndarray]]:
        """Random f32 weights per layer (scaled so activations stay of order 1)."""
        rng = np.random.default_rng(15)
        h, f = self.hidden, self.ffn

        def w(*shape: int) -> np.ndarray:
            return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

        shapes = {"wqkv": (h, 3 * h), "bqkv": (3 * h,), "wo": (h, h), "bo": (h,), "g1": (h,),
                  "b1": (h,), "w1": (h, f), "bf1": (f,), "w2": (f, h), "bf2": (h,), "g2": (h,),
                  "b2": (h,)}  # fmt: skip
        layers = [{name: w(*shape) for name, shape in shapes.items()} for _ in range(self.layers)]
        for layer in layers:  # layernorm scales near 1
            layer["g1"] += 1
            layer["g2"] += 1
        return layers

    def input(self) -> np.ndarray:
        rng = np.random.default_rng(16)
        return rng.standard_normal((self.batch * self.seq, self.hidden)).astype(np.float32)


def hip_forward(backend: HipBackend, cfg: Config, host_weights: list[dict[str, np.ndarray]]) -> Any:
    """The encoder as a function of x [B*S, hidden] on `backend`."""
    layers = [{k: backend.from_numpy(v) for k, v in w.items()} for w in host_weights]
    b, s, nh, hd, h = cfg.batch, cfg.seq, cfg.heads, cfg.head_dim, cfg.hidden
    alpha = 1.0 / float(np.sqrt(hd))

    def layer(x: DeviceTensor, w: dict[str, DeviceTensor]) -> DeviceTensor:
        qkv = backend.add_row_bias(backend.matmul(x, w["wqkv"]), w["bqkv"])
        heads = qkv.reshape(b, s, 3, nh, hd).permute(2, 0, 3, 1, 4)  # [3, B, nh, S, hd] view
        q, k, v = heads[0], heads[1], heads[2]
        probs = backend.softmax(backend.matmul(q, k, transpose_b=True, alpha=alpha))
        context = backend.empty((b, s, nh, hd))
        backend.matmul(probs, v, out=context.permute(0, 2, 1, 3))  # heads written in place
        attn = backend.add_row_bias(backend.matmul(context.reshape(b * s, h), w["wo"]), w["bo"])
        x = backend.layernorm(backend.add(attn, x), w["g1"], w["b1"], eps=EPS)
        f = backend.gelu(backend.add_row_bias(backend.matmul(x, w["w1"]), w["bf1"]))
        f = backend.add_row_bias(backend.matmul(f, w["w2"]), w["bf2"])
        return backend.layernorm(backend.add(f, x), w["g2"], w["b2"], eps=EPS)

    def forward(x: DeviceTensor) -> DeviceTensor:
        for w in layers:
            x = layer(x, w)
        return x

    return forward


def torch_forward(torch: Any, cfg: Config, host_weights: list[dict[str, np.ndarray]]) -> Any:
    functional = torch.nn.functional
    layers = [{k: torch.from_numpy(v).cuda() for k, v in w.items()} for w in host_weights]
    b, s, nh, hd, h = cfg.batch, cfg.seq, cfg.heads, cfg.head_dim, cfg.hidden
    alpha = 1.0 / float(np.sqrt(hd))

    def layer(x: Any, w: dict[str, Any]) -> Any:
        qkv = torch.addmm(w["bqkv"], x, w["wqkv"])
        q, k, v = qkv.view(b, s, 3, nh, hd).permute(2, 0, 3, 1, 4)
        probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * alpha, -1)
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b * s, h)
        x = functional.layer_norm(torch.addmm(w["bo"], context, w["wo"]) + x, (h,), w["g1"],
                                  w["b1"], EPS)  # fmt: skip
        f = torch.addmm(w["bf2"], functional.gelu(torch.addmm(w["bf1"], x, w["w1"])), w["w2"])
        return functional.layer_norm(f + x, (h,), w["g2"], w["b2"], EPS)

    def forward(x: Any) -> Any:
        for w in layers:
            x = layer(x, w)
        return x

    return forward


def calls_for(per_forward_us_guess: float, budget_s: float) -> int:
    return max(3, min(200, int(budget_s * 1e6 / max(per_forward_us_guess, 1.0))))


def bench_hip(cfg: Config, weights: list[dict[str, np.ndarray]], budget_s: float) -> None:
    backend = HipBackend()
    forward = hip_forward(backend, cfg, weights)
    host = cfg.input()
    x = backend.from_numpy(host)
    sync = backend.synchronize

    def eager() -> None:
        forward(x)

    eager()
    sync()
    guess = median_us(eager, 2, sync)
    us = median_us(eager, calls_for(guess, budget_s), sync)
    emit(bench="forward", impl="hip eager", us=us, platform=hip_api().platform)

    graph = ForwardGraph(backend, forward, x)
    replayed = graph(x).to_numpy()
    expected = forward(x).to_numpy()
    same = bool(np.array_equal(replayed.view(np.uint32), expected.view(np.uint32)))

    def replay() -> None:
        graph(x)  # the device input copied in, then the replay

    replay()
    us = median_us(replay, calls_for(guess, budget_s), sync)
    emit(bench="forward", impl="hip graph replay", us=us, bit_exact_vs_eager=same)


def bench_torch(cfg: Config, weights: list[dict[str, np.ndarray]], budget_s: float) -> None:
    if hip_api().platform != "nvidia":
        raise RuntimeError(f"torch runs on CUDA only; this platform is {hip_api().platform}")
    try:
        import torch
    except ImportError:
        raise RuntimeError("torch is not installed") from None
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    forward = torch_forward(torch, cfg, weights)
    x = torch.from_numpy(cfg.input()).cuda()
    sync = torch.cuda.synchronize

    def eager() -> None:
        forward(x)

    with torch.inference_mode():
        eager()
        sync()
        guess = median_us(eager, 2, sync)
        us = median_us(eager, calls_for(guess, budget_s), sync)
        emit(bench="forward", impl="torch eager", us=us)

        static_in = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm-up on a side stream, as torch's CUDA graphs docs do
                forward(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = forward(static_in)

        def replay() -> None:
            static_in.copy_(x)
            graph.replay()

        replay()
        sync()
        assert static_out.shape == x.shape
        us = median_us(replay, calls_for(guess, budget_s), sync)
        emit(bench="forward", impl="torch CUDA graph", us=us)


def table(cfg: Config) -> str:
    forwards = {r["impl"]: r["us"] for r in ROWS if r["bench"] == "forward"}
    torch_eager, torch_graph = forwards.get("torch eager"), forwards.get("torch CUDA graph")
    lines = [
        f"encoder: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads, batch "
        f"{cfg.batch} x {cfg.seq} tokens, f32",
        "",
        "| forward | µs | vs torch eager | vs torch CUDA graph |",
        "| --- | ---: | ---: | ---: |",
    ]
    for impl, us in forwards.items():
        eager = f"{us / torch_eager:.2f}" if torch_eager else "-"
        graph = f"{us / torch_graph:.2f}" if torch_graph else "-"
        lines.append(f"| {impl} | {us:.1f} | {eager} | {graph} |")
    lines += [f"skipped {r['impl']}: {r['reason']}" for r in ROWS if r["bench"] == "skipped"]
    exact = [r for r in ROWS if "bit_exact_vs_eager" in r]
    if exact:
        lines.append(f"graph replay == eager bit for bit: {exact[0]['bit_exact_vs_eager']}")
    return "\n".join(lines)


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--layers", type=int, default=6)
    flags.add_argument("--hidden", type=int, default=384)
    flags.add_argument("--heads", type=int, default=12)
    flags.add_argument("--batch", type=int, default=32)
    flags.add_argument("--seq", type=int, default=128)
    args = flags.parse_args()
    if args.quick:
        cfg, budget = Config(2, 64, 4, 2, 16), 0.5
    else:
        cfg, budget = Config(args.layers, args.hidden, args.heads, args.batch, args.seq), 3.0
    weights = cfg.weights()
    run(
        (
            ("hip_runtime", lambda: bench_hip(cfg, weights, budget)),
            ("torch", lambda: bench_torch(cfg, weights, budget)),
        )
    )
    save(args.out, "bench_forward", table(cfg))


if __name__ == "__main__":
    main()
