"""The GEMV kernel (kernels/gemv.hip) at a 1B Llama's decode shapes beside cuBLAS (torch's
F.linear) and a copy of the same bytes, in one run (issue 38).

For each of the five products of a decode step (QKV with the attention norm fused, the output
product with the residual, gate/up with the MLP norm and SwiGLU, down with the residual, the
head with the final norm) and 1, 2 (, 4, 8, 16) rows of x: device µs per call, the weight's GB/s
and that as a fraction of the copy rate of the same run (256 MiB, read + write).

How a call is timed (as a decode step runs it): `CALLS` calls captured into one graph and
replayed back to back, device events around `REPLAYS` replays; the calls cycle through
copies of the weight that together exceed the L2 cache (`ROTATE_BYTES`), so each call reads
its weight from device memory, as a decode step does (a product's weight is read once a step).
torch's rows are the same calls through torch.cuda.CUDAGraph.

Rows "hip ahead=A slices=S" build the kernel with HIPK_GEMV_AHEAD=A (16-byte chunks a lane
issues before using any; for 3-16 rows the 16-row tile's HIPK_GEMV_MMA_AHEAD, steps) and split
each output column over S teams (0: the op's own choice, `gemv_slices`, `TILE_SLICES`); "hip"
is the op as shipped (every row count up to 16 through the kernel); torch is the same product
without the fusions (cuBLAS). Kernel registers and spills are printed too. Needs the nvidia
platform and torch for the anchors (else a skipped row). Writes bench_gemv.jsonl and .md
under --out.

    python bench/bench_gemv.py [--quick] [--out DIR] [--rows 1 2] [--ahead 1 2 4 8]
                               [--slices 0]
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from _harness import ROWS, emit, parser, run, save
from bench_ops import HipTimer, TorchTimer, bench_copy, import_torch

from hip_core import Program, capture, hip_api
from hip_runtime import HipBackend
from hip_runtime.libraries import kernel_sources
from hip_runtime.ops import gemv as gemv_ops

#: (name, fusion, out features n, in features k): a 1B Llama's decode-step products.
SHAPES = (
    ("qkv", "norm", 3072, 2048), ("o", "residual", 2048, 2048),
    ("gate_up", "swiglu", 8192, 2048), ("down", "residual", 2048, 8192),
    ("head", "norm", 128256, 2048),
)  # fmt: skip
CALLS = 20  # calls a graph
REPLAYS = 10  # timed replays (median of REPEATS samples)
REPEATS = 5
ROTATE_BYTES = 256 << 20  # weight copies cycled through: beyond the H200's 50 MiB L2


def variant_kernels(backend: HipBackend, ahead: int) -> Any:
    """gemv.hip built with HIPK_GEMV_AHEAD=ahead (the scalar tiles) and
    HIPK_GEMV_MMA_AHEAD=ahead (the 16-row tile), loaded on the backend's device."""
    source = kernel_sources.sources()["gemv.hip"]
    options = [f"-DHIPK_GEMV_AHEAD={ahead}", f"-DHIPK_GEMV_MMA_AHEAD={ahead}"]
    program = Program(source, name="gemv.hip", options=options, headers=kernel_sources.headers())
    return program.load(backend.device)


def hip_graph_us(backend: HipBackend, calls: list[Callable[[], Any]]) -> float:
    """Device µs per call of `calls` (each once per graph), captured and replayed."""
    for call in calls:  # compile, plan and warm outside the capture
        call()
    with capture(backend.stream) as recording:
        for call in calls:
            call()
    assert recording.graph is not None
    replay = recording.graph.instantiate()
    timer = HipTimer(backend)
    replay.launch(backend.stream)
    samples = []
    for _ in range(REPEATS):
        replay.launch(backend.stream)  # keeps the device busy past the start event
        timer.start()
        for _ in range(REPLAYS):
            replay.launch(backend.stream)
        samples.append(timer.stop() / REPLAYS / len(calls) * 1e3)
    return statistics.median(samples)


def torch_graph_us(torch: Any, calls: list[Callable[[], Any]]) -> float:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    timer = TorchTimer(torch)
    graph.replay()
    samples = []
    for _ in range(REPEATS):
        graph.replay()
        timer.start()
        for _ in range(REPLAYS):
            graph.replay()
        samples.append(timer.stop() / REPLAYS / len(calls) * 1e3)
    return statistics.median(samples)


def bench_shape(backend: HipBackend, torch: Any, shape: tuple[str, str, int, int], rows: int,
                aheads: list[int], slice_counts: list[int], copy: float) -> None:  # fmt: skip
    name, fusion, n, k = shape
    weight_rows = 2 * n if fusion == "swiglu" else n
    nbytes = weight_rows * k * 2
    copies = max(1, min(CALLS, -(-ROTATE_BYTES // nbytes)))
    tws = [torch.randn(weight_rows, k, device="cuda", dtype=torch.bfloat16) * 0.02
           for _ in range(copies)]  # fmt: skip
    tx = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    tg = torch.ones(k, device="cuda", dtype=torch.bfloat16)
    tr = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
    ws = [backend.from_dlpack(t) for t in tws]
    x, g, r = (backend.from_dlpack(t) for t in (tx, tg, tr))
    weights = [ws[i % copies] for i in range(CALLS)]
    y = backend.empty((rows, n), x.dtype)  # every output preallocated: a graph replays them
    ops = {
        "norm": lambda w: backend.rmsnorm_linear(x, g, w, eps=1e-5, out=y),
        "residual": lambda w: backend.linear(x, w, residual=r, out=r),
        "swiglu": lambda w: backend.rmsnorm_swiglu(x, g, w, eps=1e-5, out=y),
    }
    op = ops[fusion]
    us = hip_graph_us(backend, [lambda w=w: op(w) for w in weights])
    emit_row(name, rows, "hip", us, nbytes, copy)
    tile = gemv_ops.gemv_tile(rows, 2)
    kernel_name = f"gemv_{'' if fusion == 'residual' else fusion + '_'}r{tile}_bf16"
    processors = backend.device.properties.multiprocessors
    for ahead in aheads:
        kernel = variant_kernels(backend, ahead).get_kernel(kernel_name)
        for chosen in slice_counts:
            if tile == gemv_ops.GEMV_TENSOR_TILE:  # (ops/gemv.py's _gemv_launch)
                slices = chosen or gemv_ops.TILE_SLICES
                grid = gemv_ops.tile_blocks(n, slices)
            else:
                columns = min(rows, 4)
                slices = chosen or gemv_ops.gemv_slices(n, k, 2, columns, processors)
                grid = -(-n // (8 // slices * columns))

            def call(w: Any, kernel: Any = kernel, slices: int = slices, grid: int = grid) -> None:
                args = (w, x, y if fusion != "residual" else r,
                        r if fusion == "residual" else None, g if fusion != "residual" else None,
                        n, k, rows, slices, 1e-5, k, n, n)  # fmt: skip
                kernel.launch(grid, 256, *args, stream=backend.stream)

            us = hip_graph_us(backend, [lambda w=w: call(w) for w in weights])
            emit_row(name, rows, f"hip ahead={ahead} slices={chosen or f'{slices} (auto)'}", us,
                     nbytes, copy, registers=kernel.attribute("NUM_REGS"),
                     spill_bytes=kernel.attribute("LOCAL_SIZE_BYTES"))  # fmt: skip
    ty = torch.empty(rows, weight_rows, device="cuda", dtype=torch.bfloat16)
    us = torch_graph_us(torch, [lambda w=w: torch.matmul(tx, w.t(), out=ty)
                                for w in (tws[i % copies] for i in range(CALLS))])  # fmt: skip
    emit_row(name, rows, "torch (cuBLAS)", us, nbytes, copy)


def emit_row(name: str, rows: int, impl: str, us: float, nbytes: int, copy: float,
             **more: Any) -> None:  # fmt: skip
    gb_s = nbytes / us / 1e3
    emit(bench="gemv", shape=name, rows=rows, impl=impl, us=us, gb_s=gb_s,
         of_copy=gb_s / copy, **more)  # fmt: skip


def table(copy: float) -> str:
    lines = [f"copy rate {copy:.0f} GB/s", "",
             "| product | rows | impl | µs | GB/s | of copy | registers / spills |",
             "| --- | ---: | --- | ---: | ---: | ---: | --- |"]  # fmt: skip
    for r in ROWS:
        if r["bench"] == "gemv":
            regs = f"{r['registers']} / {r['spill_bytes']}" if "registers" in r else ""
            lines.append(f"| {r['shape']} | {r['rows']} | {r['impl']} | {r['us']:.1f} | "
                         f"{r['gb_s']:.0f} | {r['of_copy']:.3f} | {regs} |")  # fmt: skip
        elif r["bench"] == "skipped":
            lines.append(f"| {r['impl']} | skipped: {r['reason'][:80]} | | | | | |")
    return "\n".join(lines)


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--rows", type=int, nargs="+", default=[1, 2])
    flags.add_argument("--ahead", type=int, nargs="+", default=[1, 2, 4, 8])
    flags.add_argument("--slices", type=int, nargs="+", default=[0], choices=[0, 1, 2, 4, 8])
    args = flags.parse_args()
    torch = import_torch(hip_api().platform)
    copy = [1.0]
    shapes = SHAPES[:2] if args.quick else SHAPES

    def bench() -> None:
        if torch is None:
            raise RuntimeError("needs the nvidia platform with torch (the anchors, the inputs)")
        with HipBackend(gemv_rows=gemv_ops.GEMV_MAX_ROWS) as backend:
            copy[0] = bench_copy(backend, torch, 256 << 20, 10)
            for shape in shapes:
                for rows in args.rows:
                    bench_shape(backend, torch, shape, rows, args.ahead, args.slices, copy[0])

    run((("hip_runtime + torch", bench),))
    save(args.out, "bench_gemv", table(copy[0]))


if __name__ == "__main__":
    main()
