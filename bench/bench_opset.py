"""Issue 14's op set beside torch eager and the copy rate, in one run.

On N x N tensors (N = 8192) in f32 and bf16, each op's device time per call (bench_ops's
event timing) and its effective bandwidth = the bytes it must move (each input read once, the
output written once) / time, as a share of the same run's device-to-device copy rate:
- add with a broadcast row (x + r, r of N elements) and mul with a broadcast column;
- unary exp; where(cond, x, g);
- sum and max over the last axis and over the first axis;
- `copy_` of a transposed view into a contiguous tensor (what `contiguous()` runs);
and batched matmul bf16 (64 x 2048 x 2048 @ 64 x 2048 x 128) in TFLOP/s. Torch eager runs the
same op on the same memory (zero-copy through DLPack); each row prints hip / torch (time
ratio, > 1 is faster). An op that does not exist or fails here is a `skipped` row, not a
stop. Writes bench_opset.jsonl, .md and .png (when matplotlib imports) under --out.

--sweep adds `sweep` rows (JSON lines only, after the table's rows): the reduction kernels at
other geometries than the ops pick (last axis: threads per row, loads in flight per thread
through a -DHIPK_REDUCE_LOADS compile; first axis: the FIRST_AXIS builds at 32, 16 or 64 lanes,
splits in waves, finished by the last block or not: one_launch false times the first pass
alone) and the transposing copy's paths (copy.hip's modes: element tiles, 16-byte tiles,
element-pair tiles (2-byte units), V x V register blocks with 4 or 8 threads along the read
axis) at three grid sizes, to tune them on the device. --only TEXT keeps the cases and sweep
parts whose name contains TEXT ("first": the first-axis reductions alone).

    PYTHONPATH=... python3 bench/bench_opset.py [--quick] [--out DIR] [--size N] [--repeats R]
        [--sweep] [--only TEXT]
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from _harness import ROWS, emit, parser, save
from bench_ops import HipTimer, TorchTimer, bench_copy, import_torch, plot, time_ms

from hip_core import hip_api
from hip_runtime import HipBackend
from hip_runtime.tensors.dtypes import as_dtype

#: op -> (what HipBackend runs, what torch runs, N x N tensors moved, N-vectors moved, bool N^2)
Case = tuple[Callable[[], Any], Callable[[], Any] | None, int, int, int]
SWEEPS = ("last axis", "first axis", "transpose copy")  # the sweep's parts, as its rows' case
#: First-axis reductions: compile options of reduce.hip / reduce_max.hip (reduce_split.h's
#: finish: the fence that orders the partials, loads in flight reading them; reduce.h's cols
#: loop: loads in flight), each at other column groups per block (lanes) and splits (waves).
FIRST_AXIS = {
    "default": (),
    "fence.sc": ("-DHIPK_REDUCE_FENCE=0",),
    "finish loads 2": ("-DHIPK_REDUCE_FINISH_LOADS=2",),
    "cols loads 4": ("-DHIPK_REDUCE_COLS_LOADS=4",),
}


def cases(backend: HipBackend, ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Case]:
    x, g, r, c, cond, y, v = (ours[k] for k in ("x", "g", "r", "c", "cond", "y", "v"))
    torch = theirs.get("torch")
    t = theirs

    def maybe(make: Callable[[], Callable[[], Any]]) -> Callable[[], Any] | None:
        return make() if torch is not None else None

    return {
        "add row": (lambda: backend.add(x, r, out=y),
                    maybe(lambda: lambda: torch.add(t["x"], t["r"], out=t["y"])), 2, 1, 0),
        "mul column": (lambda: backend.mul(x, c, out=y),
                       maybe(lambda: lambda: torch.mul(t["x"], t["c"], out=t["y"])), 2, 1, 0),
        "exp": (lambda: backend.exp(x, out=y),
                maybe(lambda: lambda: torch.exp(t["x"], out=t["y"])), 2, 0, 0),
        "where": (lambda: backend.where(cond, x, g, out=y),
                  maybe(lambda: lambda: torch.where(t["cond"], t["x"], t["g"], out=t["y"])),
                  3, 0, 1),
        "sum last": (lambda: backend.sum(x, axis=-1, out=v),
                     maybe(lambda: lambda: torch.sum(t["x"], -1, out=t["v"])), 1, 1, 0),
        "sum first": (lambda: backend.sum(x, axis=0, out=v),
                      maybe(lambda: lambda: torch.sum(t["x"], 0, out=t["v"])), 1, 1, 0),
        "max last": (lambda: backend.max(x, axis=-1, out=v),
                     maybe(lambda: lambda: torch.amax(t["x"], -1, out=t["v"])), 1, 1, 0),
        "max first": (lambda: backend.max(x, axis=0, out=v),
                      maybe(lambda: lambda: torch.amax(t["x"], 0, out=t["v"])), 1, 1, 0),
        "transpose copy": (lambda: y.copy_(x.T),
                           maybe(lambda: lambda: t["y"].copy_(t["x"].T)), 2, 0, 0),
    }  # fmt: skip


def inputs(backend: HipBackend, torch: Any, n: int, dtype: str) -> tuple[dict[str, Any], ...]:
    """The tensors of every case as DeviceTensors, and the same memory as torch tensors."""
    shapes = {"x": (n, n), "g": (n, n), "r": (n,), "c": (n, 1), "y": (n, n), "v": (n,)}
    if torch is not None:
        tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
        theirs: dict[str, Any] = {k: torch.randn(s, device="cuda", dtype=tdtype)
                                  for k, s in shapes.items()}  # fmt: skip
        theirs["cond"] = torch.rand((n, n), device="cuda") > 0.5
        torch.cuda.synchronize()
        ours = {k: backend.from_dlpack(v) for k, v in theirs.items()}
        theirs["torch"] = torch
        return ours, theirs
    rng = np.random.default_rng(0)
    storage = as_dtype(dtype)
    ours = {k: backend.from_numpy(rng.standard_normal(s, dtype=np.float32).astype(storage))
            for k, s in shapes.items()}  # fmt: skip
    ours["cond"] = backend.from_numpy(rng.random((n, n)) > 0.5)
    return ours, {}


def bench_cases(
    backend: HipBackend, torch: Any, n: int, repeats: int, copy_gb_s: float, only: str = ""
) -> None:
    """The table's rows: every case whose name contains `only` (all by default)."""
    for dtype in ("f32", "bf16"):
        ours, theirs = inputs(backend, torch, n, dtype)
        item = as_dtype(dtype).itemsize
        timer = HipTimer(backend)
        for op, (run, anchor, full, vectors, masks) in cases(backend, ours, theirs).items():
            if only not in op:
                continue
            nbytes = (full * n * n + vectors * n) * item + masks * n * n
            try:
                ms = time_ms(run, timer.start, timer.stop, repeats)
            except Exception as error:  # an op this tree lacks is a row, not a stop
                emit(bench="skipped", op=op, dtype=dtype, reason=f"{type(error).__name__}: "
                     f"{error}"[:200])  # fmt: skip
                continue
            gb_s = nbytes / ms / 1e6
            row: dict[str, Any] = dict(bench="op", op=op, dtype=dtype, n=n, impl="hip", ms=ms,
                                       gb_s=gb_s, of_copy=gb_s / copy_gb_s)  # fmt: skip
            if anchor is not None:
                tt = TorchTimer(torch)
                torch_ms = time_ms(anchor, tt.start, tt.stop, repeats)
                emit(
                    bench="op",
                    op=op,
                    dtype=dtype,
                    n=n,
                    impl="torch",
                    ms=torch_ms,
                    gb_s=nbytes / torch_ms / 1e6,
                    of_copy=nbytes / torch_ms / 1e6 / copy_gb_s,
                )
                row["vs_torch"] = torch_ms / ms
            emit(**row)
        del ours, theirs


def bench_batched_matmul(backend: HipBackend, torch: Any, quick: bool, repeats: int) -> None:
    batch, m, k, n = (4, 256, 256, 64) if quick else (64, 2048, 2048, 128)
    flops = 2 * batch * m * k * n
    if torch is not None:
        ta = torch.randn(batch, m, k, device="cuda", dtype=torch.bfloat16)
        tb = torch.randn(batch, k, n, device="cuda", dtype=torch.bfloat16)
        tc = torch.empty(batch, m, n, device="cuda", dtype=torch.bfloat16)
        a, b, c = map(backend.from_dlpack, (ta, tb, tc))
    else:
        a = backend.zeros((batch, m, k), "bfloat16")
        b = backend.zeros((batch, k, n), "bfloat16")
        c = backend.empty((batch, m, n), "bfloat16")
    timer = HipTimer(backend)
    ms = time_ms(lambda: backend.matmul(a, b, out=c), timer.start, timer.stop, repeats)
    row: dict[str, Any] = dict(bench="bmm", shape=[batch, m, k, n], impl="hip", ms=ms,
                               tflop_s=flops / ms / 1e9)  # fmt: skip
    if torch is not None:
        tt = TorchTimer(torch)
        torch_ms = time_ms(lambda: torch.matmul(ta, tb, out=tc), tt.start, tt.stop, repeats)
        emit(bench="bmm", shape=[batch, m, k, n], impl="torch", ms=torch_ms,
             tflop_s=flops / torch_ms / 1e9)  # fmt: skip
        row["vs_torch"] = torch_ms / ms
    emit(**row)


def sweep(
    backend: HipBackend, n: int, repeats: int, copy_gb_s: float, parts: tuple[str, ...] = SWEEPS
) -> None:
    """The `sweep` rows (see the module's doc): device time of single kernels, launched with
    the geometries named in each row, on N x N inputs (zeros: the time does not depend on the
    values)."""
    timer = HipTimer(backend)

    def row(case: str, run: Callable[[], Any], nbytes: int, **what: Any) -> None:
        try:
            ms = time_ms(run, timer.start, timer.stop, repeats)
        except Exception as error:  # a variant that fails to build or launch is a row
            emit(bench="sweep", case=case, **what, reason=f"{type(error).__name__}: {error}"[:200])
            return
        emit(bench="sweep", case=case, **what, ms=ms, gb_s=nbytes / ms / 1e6,
             of_copy=nbytes / ms / 1e6 / copy_gb_s)  # fmt: skip

    for dtype in ("bf16", "f32"):  # (bf16 first: the rows a run cut short needs most)
        sweep_dtype(backend, n, dtype, row, parts)


def sweep_dtype(
    backend: Any, n: int, dtype: str, row: Callable[..., None], parts: tuple[str, ...] = SWEEPS
) -> None:
    """One dtype's sweep rows (`row(case, run, bytes, **what)` times and records one) of the
    `parts` named (SWEEPS)."""
    from hip_runtime.libraries import kernel_sources
    from hip_runtime.ops.reduce_layout import Merged
    from hip_runtime.tensors.strided_copy import tile_edges

    x, y, v = backend.zeros((n, n), dtype), backend.empty((n, n), dtype), backend.empty(n, dtype)
    nbytes = n * n * as_dtype(dtype).itemsize
    rows = Merged(n, n, 1, n, 1, 0)
    if "first axis" in parts:
        sweep_first_axis(backend, x, v, dtype, row)
    for loads in (2, 4, 8) if "last axis" in parts else ():
        options = (f"-DHIPK_REDUCE_LOADS={loads}",)
        for op, source, name in (("sum", "reduce.hip", "reduce_sum_"),
                                 ("max", "reduce_max.hip", "reduce_max_")):  # fmt: skip
            kernel = kernel_sources.program(source, options=options).load(backend.device)
            kernel = kernel.get_kernel(name + dtype)
            extra = (n, 0) if op == "sum" else (0,)
            what = dict(op=op, dtype=dtype, loads=loads)
            for lanes in (32, 64, 128, 256):
                blocks = -(-n // (256 // lanes if lanes < 64 else 1))
                run = partial(backend._launch, kernel, x, rows, (blocks, 1, n, lanes, 1, 0),
                              (v, None, None), extra)  # fmt: skip
                row("last axis", run, nbytes, **what, lanes=lanes)
    if "transpose copy" not in parts:
        return
    item = as_dtype(dtype).itemsize
    tiles = backend.kernels.get("copy.hip", f"copy_tiles_u{8 * item}")
    for mode in (0, 1, 2, 3, 4) if item == 2 else (0, 1, 3, 4):  # copy.hip's paths (TILE_MODES)
        edge_a, edge_b = tile_edges(mode, item)
        for cap in (4, 16, 64):  # blocks per multiprocessor; blocks stride over the tiles
            grid = min(-(-n // edge_a) * -(-n // edge_b),
                       backend.device.properties.multiprocessors * cap)  # fmt: skip
            run = partial(tiles.launch, grid, 256, x, y, n, n, 1, n, n, 1, 1, 1, 0, 0, 0, 0,
                          mode, stream=backend.stream)  # fmt: skip
            row("transpose copy", run, 2 * nbytes, dtype=dtype, mode=mode, grid=grid)


def sweep_first_axis(backend: Any, x: Any, v: Any, dtype: str, row: Callable[..., None]) -> None:
    """x (N x N) reduced over its first axis into v by sum and max at every FIRST_AXIS build,
    16-byte columns, 32, 16 or 64 lanes a row of threads (256 threads), the split filling 0.5,
    1 or 2 waves of the build's resident blocks; each finished by its last block (one_launch) and,
    to tell the finish's cost, the first pass alone (partials only)."""
    from hip_runtime.libraries import kernel_sources
    from hip_runtime.ops.reduce_layout import Merged

    n, item = x.shape[0], x.dtype.itemsize
    cols, width = Merged(1, n, n, 0, n, 1), 16 // item  # columns a thread reads per load
    for variant, options in FIRST_AXIS.items():
        for op, source, name in (("sum", "reduce.hip", "reduce_sum_"),
                                 ("max", "reduce_max.hip", "reduce_max_")):  # fmt: skip
            kernel = kernel_sources.program(source, options=options).load(backend.device)
            kernel = kernel.get_kernel(name + dtype)
            extra = (n, 0) if op == "sum" else (0,)
            wave = backend._reduce_wave(kernel, 256)
            for lanes in (32, 16, 64):
                blocks = -(-n // (lanes * width))
                for waves in (0.5, 1, 2):
                    chunk = -(-n // max(int(wave * waves) // blocks, 1))
                    splits = -(-n // chunk)
                    part = backend.empty((1, splits, n), "float32" if op == "sum" else dtype)
                    counters = backend._reduce_counters(blocks, x.dtype)
                    geometry = (blocks, splits, chunk, lanes, 1, 1)
                    for ptrs in ((v, part, counters), (None if op == "sum" else v, part, None)):
                        run = partial(backend._launch, kernel, x, cols, geometry, ptrs, extra)
                        row("first axis", run, n * n * item + n * item, op=op, dtype=dtype,
                            variant=variant, lanes=lanes, waves=waves, splits=splits,
                            resident=wave, one_launch=ptrs[2] is not None)  # fmt: skip


def table(copy_gb_s: float) -> str:
    lines = [
        f"D2D copy (read + write, best of hip/torch): {copy_gb_s:.0f} GB/s",
        "",
        "| op | dtype | hip ms | hip GB/s | % of copy | torch GB/s | hip / torch |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    torch_rows = {(r["op"], r["dtype"]): r for r in ROWS
                  if r["bench"] == "op" and r["impl"] == "torch"}  # fmt: skip
    for r in ROWS:
        if r["bench"] == "op" and r["impl"] == "hip":
            other = torch_rows.get((r["op"], r["dtype"]))
            theirs = f"{other['gb_s']:.0f} | {r['vs_torch']:.2f}" if other else "skipped | -"
            lines.append(f"| {r['op']} | {r['dtype']} | {r['ms']:.3f} | {r['gb_s']:.0f} | "
                         f"{100 * r['of_copy']:.1f} | {theirs} |")  # fmt: skip
        elif r["bench"] == "skipped":
            lines.append(f"| {r.get('op', '-')} | {r.get('dtype', '-')} | skipped: "
                         f"{r['reason']} | | | | |")  # fmt: skip
    for r in ROWS:
        if r["bench"] == "bmm":
            ratio = f", {r['vs_torch']:.3f}x torch" if "vs_torch" in r else ""
            lines.append(f"\nbatched matmul bf16 {r['shape']} {r['impl']}: "
                         f"{r['tflop_s']:.0f} TFLOP/s{ratio}")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--size", type=int, help="N of the N x N inputs (8192; --quick: 256)")
    flags.add_argument("--repeats", type=int, help="timed batches per figure (15; --quick: 3)")
    flags.add_argument("--sweep", action="store_true", help="add the kernels' tuning rows")
    flags.add_argument("--only", default="", metavar="TEXT",
                       help="only the cases and sweep parts whose name contains TEXT (e.g. "
                       "'first': the first-axis reductions; no batched matmul)")  # fmt: skip
    args = flags.parse_args()
    n = args.size or (256 if args.quick else 8192)
    repeats = args.repeats or (3 if args.quick else 15)
    backend = HipBackend()
    platform = hip_api().platform
    torch = import_torch(platform)
    emit(bench="setup", platform=platform, device=backend.device.name, n=n,
         torch=getattr(torch, "__version__", "skipped: not importable with a GPU"))  # fmt: skip
    copy_gb_s = bench_copy(backend, torch, n * n * 4, repeats)
    bench_cases(backend, torch, n, repeats, copy_gb_s, args.only)
    if not args.only:
        bench_batched_matmul(backend, torch, args.quick, repeats)
    if args.sweep:
        parts = tuple(part for part in SWEEPS if args.only in part)
        sweep(backend, n, min(repeats, 5), copy_gb_s, parts)
    backend.close()
    save(args.out, "bench_opset", table(copy_gb_s))
    title = f"issue 14's ops at {n} x {n}: minimum bytes moved / time"
    plot(args.out / "bench_opset.png", copy_gb_s, title, goal=0.9)


if __name__ == "__main__":
    main()
