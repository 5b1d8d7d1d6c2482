"""HipBackend ops beside torch eager, in one run: effective bandwidth and bf16 matmul.

Measures on the current platform (the H200 through the nvidia platform):
- layernorm, rmsnorm, softmax, swiglu and add on N x N tensors (N = 8192) in f32 and bf16:
  time per call with device events (warm-up, then the median of repeated batches), and the
  effective bandwidth = the minimum bytes the op must move (each input read once, the output
  written once) / time;
- the device-to-device copy rate of the same run (hipMemcpyAsync, and torch's `copy_`),
  counted as read + write: the reference the ops are held to (>= 85 % of the better one);
- torch eager on the same inputs (zero-copy through DLPack), and the ratios hip / torch;
- bf16 matmul N^3 beside torch.matmul, in TFLOP/s.
8192^2 inputs (128-256 MiB) are far larger than L2, so no input rotation is needed.
Prints JSON lines and a table; writes bench_ops.jsonl, bench_ops.md and bench_ops.png (when
matplotlib imports) under --out.

    PYTHONPATH=... python3 bench/bench_ops.py [--quick] [--out DIR] [--size N] [--repeats R]
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _harness import ROWS, emit, parser, pyplot, save

from hip_core import hip_api
from hip_runtime import DeviceTensor, HipBackend
from hip_runtime.tensors.dtypes import as_dtype

OPS = ("layernorm", "rmsnorm", "softmax", "swiglu", "add")
#: N x N tensors each op must read or write at least once (weights of size N are negligible).
TENSORS_MOVED = {"layernorm": 2, "rmsnorm": 2, "softmax": 2, "swiglu": 3, "add": 3}
EPS = 1e-5


def time_ms(
    run: Callable[[], Any], start: Callable[[], Any], stop: Callable[[], float], repeats: int
) -> float:
    """Median milliseconds per call: 3 warm-up calls, then `repeats` batches of 5 calls, each
    timed by device events around the batch. Each batch is queued behind one more, untimed call,
    so the device is busy when the start event passes and the host's time to launch the
    batch's first call stays out of it (for every implementation alike). Device time, not
    hip_backend.bench.per_call's host wall time: the ops are held to the device's copy rate."""
    for _ in range(3):
        run()
    samples = []
    for _ in range(repeats):
        run()
        start()
        for _ in range(5):
            run()
        samples.append(stop() / 5)
    return statistics.median(samples)


class HipTimer:
    def __init__(self, backend: HipBackend) -> None:
        self.stream = backend.stream
        self.begin = backend.device.create_event()
        self.end = backend.device.create_event()

    def start(self) -> None:
        self.begin.record(self.stream)

    def stop(self) -> float:
        self.end.record(self.stream)
        self.end.sync()
        return self.begin.elapsed_ms(self.end)


class TorchTimer:
    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.begin = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self.begin.record()

    def stop(self) -> float:
        self.end.record()
        self.end.synchronize()
        return float(self.begin.elapsed_time(self.end))


def import_torch(platform: str) -> Any:
    if platform != "nvidia":
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def hip_ops(backend: HipBackend, x: DeviceTensor, g: DeviceTensor, w: DeviceTensor,
            y: DeviceTensor) -> dict[str, Callable[[], Any]]:  # fmt: skip
    return {
        "layernorm": lambda: backend.layernorm(x, w, w, eps=EPS, out=y),
        "rmsnorm": lambda: backend.rmsnorm(x, w, eps=EPS, out=y),
        "softmax": lambda: backend.softmax(x, out=y),
        "swiglu": lambda: backend.swiglu(g, x, out=y),
        "add": lambda: backend.add(x, g, out=y),
    }


def torch_ops(torch: Any, x: Any, g: Any, w: Any, y: Any) -> dict[str, Callable[[], Any]]:
    functional = torch.nn.functional
    n = x.shape[-1]
    if hasattr(functional, "rms_norm"):
        rms = lambda: functional.rms_norm(x, (n,), w, EPS)  # noqa: E731
    else:
        rms = lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w  # noqa: E731
    return {
        "layernorm": lambda: functional.layer_norm(x, (n,), w, w, EPS),
        "rmsnorm": rms,
        "softmax": lambda: torch.softmax(x, -1),
        "swiglu": lambda: functional.silu(g) * x,
        "add": lambda: torch.add(x, g, out=y),
    }


def bench_copy(backend: HipBackend, torch: Any, nbytes: int, repeats: int) -> float:
    """D2D copy rate (GB/s, read + write) of hipMemcpyAsync and torch; returns the better."""
    source, target = backend.empty(nbytes, np.uint8), backend.empty(nbytes, np.uint8)
    timer = HipTimer(backend)
    ms = time_ms(lambda: target.copy_from(source), timer.start, timer.stop, repeats)
    best = 2 * nbytes / ms / 1e6
    emit(bench="d2d_copy", impl="hip", bytes=nbytes, ms=ms, gb_s=best)
    if torch is not None:
        a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        t = TorchTimer(torch)
        ms = time_ms(lambda: b.copy_(a), t.start, t.stop, repeats)
        emit(bench="d2d_copy", impl="torch", bytes=nbytes, ms=ms, gb_s=2 * nbytes / ms / 1e6)
        best = max(best, 2 * nbytes / ms / 1e6)
    return best


def make_inputs(backend: HipBackend, torch: Any, n: int, dtype: str) -> tuple[Any, ...]:
    """(x, g, w) as DeviceTensors, and the same memory as torch tensors when torch is there."""
    if torch is not None:
        tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
        tx = torch.randn(n, n, device="cuda", dtype=tdtype)
        tg = torch.randn(n, n, device="cuda", dtype=tdtype)
        tw = torch.randn(n, device="cuda", dtype=tdtype)
        torch.cuda.synchronize()
        return tuple(map(backend.from_dlpack, (tx, tg, tw))), (tx, tg, tw)
    rng = np.random.default_rng(0)
    storage = as_dtype(dtype)
    host = [rng.standard_normal(s, dtype=np.float32).astype(storage) for s in ((n, n), (n, n), n)]
    return tuple(map(backend.from_numpy, host)), None


def bench_ops(backend: HipBackend, torch: Any, n: int, repeats: int, copy_gb_s: float) -> None:
    for dtype in ("f32", "bf16"):
        (x, g, w), torch_inputs = make_inputs(backend, torch, n, dtype)
        y = backend.empty((n, n), x.dtype)
        timer = HipTimer(backend)
        ours = hip_ops(backend, x, g, w, y)
        theirs = (
            torch_ops(torch, *torch_inputs, torch.empty_like(torch_inputs[0]))
            if torch_inputs
            else {}
        )
        for op in OPS:
            nbytes = TENSORS_MOVED[op] * n * n * x.dtype.itemsize
            ms = time_ms(ours[op], timer.start, timer.stop, repeats)
            gb_s = nbytes / ms / 1e6
            record: dict[str, Any] = dict(
                bench="op", op=op, dtype=dtype, n=n, impl="hip", ms=ms, gb_s=gb_s,
                of_copy=gb_s / copy_gb_s,
            )  # fmt: skip
            if op in theirs:
                t = TorchTimer(torch)
                torch_ms = time_ms(theirs[op], t.start, t.stop, repeats)
                torch_gb_s = nbytes / torch_ms / 1e6
                emit(bench="op", op=op, dtype=dtype, n=n, impl="torch", ms=torch_ms,
                     gb_s=torch_gb_s, of_copy=torch_gb_s / copy_gb_s)  # fmt: skip
                record["vs_torch"] = torch_ms / ms
            emit(**record)
        del x, g, w, y, torch_inputs


ROW_KERNELS = {"layernorm": "norms.hip", "rmsnorm": "norms.hip", "softmax": "softmax.hip"}
SWEEP_BLOCKS = (128, 256, 512, 1024)


def bench_row_blocks(backend: HipBackend, n: int, repeats: int, copy_gb_s: float) -> None:
    """The row kernels launched directly with each block size (the backend picks one by a
    rule: this shows what the rule leaves on the table)."""
    for dtype in ("f32", "bf16"):
        (x, _, w), _ = make_inputs(backend, None, n, dtype)
        y = backend.empty((n, n), x.dtype)
        timer = HipTimer(backend)
        for op, source in ROW_KERNELS.items():
            kernel = backend.kernels.get(source, f"{op}_{dtype}")
            contiguous_rows = (1, n, 0)  # RowStrides (inner, outer, step) of a C-contiguous x
            tail: tuple[Any, ...] = {
                "layernorm": (x, w, w, y, n, n, EPS, *contiguous_rows),
                "rmsnorm": (x, w, y, n, n, EPS, *contiguous_rows),
                "softmax": (x, y, n, n, 1.0, 0, *contiguous_rows),
            }[op]
            for block in SWEEP_BLOCKS:
                run = lambda k=kernel, b=block, t=tail: k.launch(n, b, *t, stream=backend.stream)  # noqa: E731
                ms = time_ms(run, timer.start, timer.stop, repeats)
                gb_s = 2 * n * n * x.dtype.itemsize / ms / 1e6
                emit(bench="row_block", op=op, dtype=dtype, block=block, ms=ms, gb_s=gb_s,
                     of_copy=gb_s / copy_gb_s)  # fmt: skip


def bench_matmul(backend: HipBackend, torch: Any, n: int, repeats: int) -> None:
    flops = 2 * n**3
    (a, b, _), torch_inputs = make_inputs(backend, torch, n, "bf16")
    c = backend.empty((n, n), a.dtype)
    timer = HipTimer(backend)
    ms = time_ms(lambda: backend.matmul(a, b, out=c), timer.start, timer.stop, repeats)
    record: dict[str, Any] = dict(bench="matmul", dtype="bf16", n=n, impl="hip", ms=ms,
                                  tflop_s=flops / ms / 1e9)  # fmt: skip
    if torch_inputs is not None:
        ta, tb, _ = torch_inputs
        tc = torch.empty_like(ta)
        t = TorchTimer(torch)
        torch_ms = time_ms(lambda: torch.matmul(ta, tb, out=tc), t.start, t.stop, repeats)
        emit(bench="matmul", dtype="bf16", n=n, impl="torch", ms=torch_ms,
             tflop_s=flops / torch_ms / 1e9)  # fmt: skip
        record["vs_torch"] = torch_ms / ms
    emit(**record)


def table(copy_gb_s: float) -> str:
    lines = [
        f"D2D copy (read + write, best of hip/torch): {copy_gb_s:.0f} GB/s",
        "",
        "| op | dtype | hip ms | hip GB/s | % of copy | torch GB/s | hip / torch |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    torch_rate = {
        (r["op"], r["dtype"]): r for r in ROWS if r.get("impl") == "torch" and r["bench"] == "op"
    }
    for r in ROWS:
        if r["bench"] == "op" and r["impl"] == "hip":
            other = torch_rate.get((r["op"], r["dtype"]))
            lines.append(
                f"| {r['op']} | {r['dtype']} | {r['ms']:.3f} | {r['gb_s']:.0f} | "
                f"{100 * r['of_copy']:.1f} | {other['gb_s']:.0f} | {r['vs_torch']:.2f} |"
                if other
                else f"| {r['op']} | {r['dtype']} | {r['ms']:.3f} | {r['gb_s']:.0f} | "
                f"{100 * r['of_copy']:.1f} | skipped | - |"
            )
    sweep = [r for r in ROWS if r["bench"] == "row_block"]
    if sweep:
        lines += ["", "row kernels by block size, % of copy:", "",
                  "| op | dtype | " + " | ".join(str(b) for b in SWEEP_BLOCKS) + " |",
                  "| --- | --- |" + " --- |" * len(SWEEP_BLOCKS)]  # fmt: skip
        for op in ROW_KERNELS:
            for dtype in ("f32", "bf16"):
                cells = [f"{100 * r['of_copy']:.1f}" for r in sweep
                         if r["op"] == op and r["dtype"] == dtype]  # fmt: skip
                lines.append(f"| {op} | {dtype} | " + " | ".join(cells) + " |")
    for r in ROWS:
        if r["bench"] == "matmul":
            ratio = f", {r['vs_torch']:.3f}x torch" if "vs_torch" in r else ""
            lines.append(f"\nmatmul bf16 {r['n']}^3 {r['impl']}: {r['tflop_s']:.0f} TFLOP/s{ratio}")
    return "\n".join(lines)


def plot(path: Path, copy_gb_s: float, title: str, goal: float = 0.85) -> None:
    """Bars of every `op` row's GB/s, ours beside torch's, with the copy rate and the `goal`
    share of it as lines (bench_opset draws its rows with this too)."""
    plt = pyplot()
    if plt is None:
        return
    ops = [r for r in ROWS if r["bench"] == "op"]
    labels = [f"{r['op']}\n{r['dtype']}" for r in ops if r["impl"] == "hip"]
    hip = [r["gb_s"] for r in ops if r["impl"] == "hip"]
    torch_rates = {(r["op"], r["dtype"]): r["gb_s"] for r in ops if r["impl"] == "torch"}
    torch = [torch_rates.get((r["op"], r["dtype"]), 0.0) for r in ops if r["impl"] == "hip"]
    xs = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(max(11, 0.75 * len(labels)), 4.5))
    ax.bar(xs - 0.2, hip, 0.4, label="hip-runtime")
    ax.bar(xs + 0.2, torch, 0.4, label="torch eager")
    ax.axhline(copy_gb_s, color="k", linestyle="--", label="D2D copy (read + write)")
    ax.axhline(goal * copy_gb_s, color="gray", linestyle=":", label=f"{goal:.0%} of copy")
    ax.set_xticks(xs, labels, fontsize=8 if len(labels) > 12 else None)
    ax.set_ylabel("effective bandwidth, GB/s")
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--size", type=int, help="N of the N x N inputs (8192; --quick: 256)")
    flags.add_argument("--repeats", type=int, help="timed batches per figure (15; --quick: 3)")
    args = flags.parse_args()
    n = args.size or (256 if args.quick else 8192)
    repeats = args.repeats or (3 if args.quick else 15)
    backend = HipBackend(preload=True)
    platform = hip_api().platform
    torch = import_torch(platform)
    emit(bench="setup", platform=platform, device=backend.device.name, n=n,
         torch=getattr(torch, "__version__", "skipped: not importable with a GPU"))  # fmt: skip
    copy_gb_s = bench_copy(backend, torch, n * n * 4, repeats)
    bench_ops(backend, torch, n, repeats, copy_gb_s)
    bench_matmul(backend, torch, n, repeats)
    bench_row_blocks(backend, n, repeats, copy_gb_s)
    backend.close()
    save(args.out, "bench_ops", table(copy_gb_s))
    title = f"HipBackend ops at {n} x {n}: minimum bytes moved / time"
    plot(args.out / "bench_ops.png", copy_gb_s, title)


if __name__ == "__main__":
    main()
