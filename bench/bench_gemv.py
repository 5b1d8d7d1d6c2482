"""The GEMV kernel (kernels/gemv.hip) at a 1B Llama's decode shapes beside cuBLAS (torch's
F.linear) and a copy of the same bytes, in one run (issue 38).

For each of the five products of a decode step (QKV with the attention norm fused, the output
product with the residual, gate/up with the MLP norm and SwiGLU, down with the residual, the
head with the final norm) and 1, 4 and 8 rows of x: device µs per call (bench_ops' event
timing), the weight's GB/s and that as a fraction of the copy rate of the same run (256 MiB,
read + write). Rows "hip ahead=A" build the kernel with HIPK_GEMV_AHEAD=A (16-byte chunks a
lane has in flight) to choose the shipped default; "hip" is the op as shipped; torch is the
same product without the fusions (cuBLAS). The variants split rows over teams as the op
does (`gemv_slices`). Kernel registers and spills are printed too. Needs
the nvidia platform and torch for the anchors (else skipped rows). Writes bench_gemv.jsonl and
.md under --out.

    python bench/bench_gemv.py [--quick] [--out DIR] [--rows 1 4 8] [--ahead 1 2 4 8]
"""

from __future__ import annotations

from typing import Any

from _harness import ROWS, emit, parser, run, save
from bench_ops import HipTimer, TorchTimer, bench_copy, import_torch, time_ms

from hip_core import Program, hip_api
from hip_runtime import HipBackend
from hip_runtime.libraries import kernel_sources
from hip_runtime.ops.gemv import gemv_slices

#: (name, fusion, out features n, in features k): a 1B Llama's decode-step products.
SHAPES = (
    ("qkv", "norm", 3072, 2048), ("o", "residual", 2048, 2048),
    ("gate_up", "swiglu", 8192, 2048), ("down", "residual", 2048, 8192),
    ("head", "norm", 128256, 2048),
)  # fmt: skip
REPEATS = 20


def variant_kernels(backend: HipBackend, ahead: int) -> Any:
    """gemv.hip built with HIPK_GEMV_AHEAD=ahead, loaded on the backend's device."""
    source = kernel_sources.sources()["gemv.hip"]
    program = Program(source, name="gemv.hip", options=[f"-DHIPK_GEMV_AHEAD={ahead}"],
                      headers=kernel_sources.headers())  # fmt: skip
    return program.load(backend.device)


def bench_shape(backend: HipBackend, torch: Any, shape: tuple[str, str, int, int], rows: int,
                aheads: list[int], copy: float) -> None:  # fmt: skip
    name, fusion, n, k = shape
    weight_rows = 2 * n if fusion == "swiglu" else n
    tw = torch.randn(weight_rows, k, device="cuda", dtype=torch.bfloat16) * 0.02
    tx = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    tg = torch.ones(k, device="cuda", dtype=torch.bfloat16)
    tr = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
    w, x, g, r = (backend.from_dlpack(t) for t in (tw, tx, tg, tr))
    nbytes = weight_rows * k * 2
    timer = HipTimer(backend)
    calls = {
        "norm": lambda: backend.rmsnorm_linear(x, g, w, eps=1e-5),
        "residual": lambda: backend.linear(x, w, residual=r, out=r),
        "swiglu": lambda: backend.rmsnorm_swiglu(x, g, w, eps=1e-5),
    }
    ms = time_ms(calls[fusion], timer.start, timer.stop, REPEATS)
    emit_row(name, rows, "hip", ms, nbytes, copy)
    y = backend.empty((rows, n), x.dtype)
    kernel_name = f"gemv_{'' if fusion == 'residual' else fusion + '_'}r{rows}_bf16"
    for ahead in aheads:
        kernel = variant_kernels(backend, ahead).get_kernel(kernel_name)
        columns = min(rows, 4)
        slices = gemv_slices(n, k, 2, columns, backend.device.properties.multiprocessors)
        args = (w, x, y if fusion != "residual" else r, r if fusion == "residual" else None,
                g if fusion != "residual" else None, n, k, rows, slices, 1e-5, k, n,
                n)  # fmt: skip
        grid = -(-n // (8 // slices * columns))
        ms = time_ms(lambda kernel=kernel, args=args, grid=grid: kernel.launch(grid, 256, *args,
                     stream=backend.stream), timer.start, timer.stop, REPEATS)  # fmt: skip
        emit_row(name, rows, f"hip ahead={ahead}", ms, nbytes, copy,
                 registers=kernel.attribute("NUM_REGS"),
                 spill_bytes=kernel.attribute("LOCAL_SIZE_BYTES"))  # fmt: skip
    functional = torch.nn.functional
    anchor = TorchTimer(torch)
    ms = time_ms(lambda: functional.linear(tx, tw), anchor.start, anchor.stop, REPEATS)
    emit_row(name, rows, "torch (cuBLAS)", ms, nbytes, copy)


def emit_row(name: str, rows: int, impl: str, ms: float, nbytes: int, copy: float,
             **more: Any) -> None:  # fmt: skip
    gb_s = nbytes / ms / 1e6
    emit(bench="gemv", shape=name, rows=rows, impl=impl, us=ms * 1e3, gb_s=gb_s,
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
    flags.add_argument("--rows", type=int, nargs="+", default=[1, 4, 8])
    flags.add_argument("--ahead", type=int, nargs="+", default=[1, 2, 4, 8])
    args = flags.parse_args()
    torch = import_torch(hip_api().platform)
    copy = [1.0]
    shapes = SHAPES[:2] if args.quick else SHAPES

    def bench() -> None:
        if torch is None:
            raise RuntimeError("needs the nvidia platform with torch (the anchors, the inputs)")
        with HipBackend() as backend:
            copy[0] = bench_copy(backend, torch, 256 << 20, 10)
            for shape in shapes:
                for rows in args.rows:
                    bench_shape(backend, torch, shape, rows, args.ahead, copy[0])

    run((("hip_runtime + torch", bench),))
    save(args.out, "bench_gemv", table(copy[0]))


if __name__ == "__main__":
    main()
