"""Q8_0 / Q4_0 decode GEMV (quantized_linear) beside the copy rate and torch, in one run (bf16 x).

For each weight shape of a 1B/8B Llama ([N, K] = 4096x4096 attention, 14336x4096 gate/up,
4096x14336 down, 128256x4096 head) and rows 1 and 16 of x: ms per call of
`backend.quantized_linear` (kernels/gemv_quant.hip) for every threads-per-row choice of the
kernels (one row each: `tpr=32..256`), the same for other builds of the kernels (`bpt`: blocks
each thread decodes per piece, `minblocks`: launch bounds, `wr`: weight rows per thread, which
share their x loads; launched directly), and the
effective bandwidth of the weight bytes it reads (blocks: 34 bytes per 32 weights for Q8_0, 18
for Q4_0), as a fraction of the same run's
device-to-device copy rate (read + write bytes per second, the better of hipMemcpyAsync and
torch). Anchor: torch's bf16 matmul of the dequantized weight (`x @ Wᵀ`, cuBLAS), its time and
the bf16 weight bytes per second. The goal (issue 16): Q8_0 at rows 1 >= 80% of copy.

Weights are random blocks (random quants, f16 scales in [2^-8, 2^-6]): the kernels' speed does
not depend on the values. Each shape's result is checked against the torch product first.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from _harness import ROWS, emit, parser, save
from bench_ops import HipTimer, TorchTimer, bench_copy, import_torch, time_ms

from hip_core import hip_api
from hip_runtime import HipBackend, kernel_sources
from hip_runtime.ops import quantized_matmul
from hip_runtime.ops.quantized import BLOCK_ENCODINGS
from hip_runtime.ops.quantized_matmul import QuantizedWeight
from hip_runtime.tensor import DeviceTensor

SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096)]
QUICK_SHAPES = [(4096, 4096), (4096, 14336)]
ROW_COUNTS = (1, 16)
VARIANTS = (32, 64, 128, 256)  # threads per weight row
#: Other builds of the kernels timed beside the shipped one (HIPK_GEMV_BPT = 2, bounds 1, WR 1):
#: (blocks per thread per piece, __launch_bounds__ blocks per multiprocessor, weight rows per
#: thread).
BUILDS = ((1, 1, 1), (4, 1, 1), (2, 4, 1), (2, 1, 2))


def random_blocks(rng: np.random.Generator, n: int, k: int, encoding: str) -> np.ndarray:
    """uint8 [n, k / 32 * block bytes]: random quants, f16 scales in [2^-8, 2^-6]."""
    block_bytes = BLOCK_ENCODINGS[encoding][1]
    raw = np.frombuffer(rng.bytes(n * k // 32 * block_bytes), np.uint8).copy()
    blocks = raw.reshape(-1, block_bytes)
    scales = (2.0 ** rng.uniform(-8, -6, blocks.shape[0])).astype("<f2")
    blocks[:, :2] = scales.view(np.uint8).reshape(-1, 2)
    return raw.reshape(n, -1)


def bench_shape(
    backend: HipBackend, torch: Any, shape: tuple[int, int], encoding: str, repeats: int,
    copy: float, rng: np.random.Generator,
) -> None:  # fmt: skip
    n, k = shape
    blocks = backend.from_numpy(random_blocks(rng, n, k, encoding))
    weight = QuantizedWeight(blocks, shape, encoding)
    dense = backend.dequantize(weight, "bfloat16") if torch is not None else None
    for rows in ROW_COUNTS:
        host = rng.standard_normal((rows, k), np.float32)
        x = backend.cast(backend.from_numpy(host), "bfloat16")
        y = backend.empty((rows, n), "bfloat16")
        name = f"{encoding} {n}x{k} rows{rows}"
        torch_ms = None
        if dense is not None:
            torch_ms = bench_torch(backend, torch, name, x, weight, dense, y, repeats, copy)
        bench_variants(backend, name, x, weight, y, repeats, copy, torch_ms)


def bench_torch(
    backend: HipBackend, torch: Any, name: str, x: DeviceTensor, weight: QuantizedWeight,
    dense: DeviceTensor, y: DeviceTensor, repeats: int, copy: float,
) -> float:  # fmt: skip
    """torch's bf16 matmul of the dequantized weight (ms), after checking ours against it."""
    tx, tw = torch.from_dlpack(x), torch.from_dlpack(dense)
    backend.synchronize()
    ty = torch.empty((x.shape[0], dense.shape[0]), dtype=torch.bfloat16, device="cuda")
    timer = TorchTimer(torch)
    ms = time_ms(lambda: torch.matmul(tx, tw.t(), out=ty), timer.start, timer.stop, repeats)
    rate = dense.nbytes / ms / 1e6
    emit(bench=name, impl="torch bf16 matmul", ms=ms, gb_s=rate, of_copy=rate / copy)
    backend.quantized_linear(x, weight, out=y)
    backend.synchronize()
    ours, theirs = torch.from_dlpack(y).float(), ty.float()
    error = (ours - theirs).abs().max() / theirs.abs().max().clamp_min(1e-30)
    emit(bench=name, impl="check: max |hip - torch| / max |torch|", max_rel_err=float(error))
    return ms


def bench_variants(
    backend: HipBackend, name: str, x: DeviceTensor, weight: QuantizedWeight, y: DeviceTensor,
    repeats: int, copy: float, torch_ms: float | None,
) -> None:  # fmt: skip
    """One row per threads-per-row choice of the shipped kernels (through quantized_linear),
    then the same for each build of BUILDS (the kernels compiled with other pieces and
    launch bounds, launched directly)."""
    timer = HipTimer(backend)
    rows, k = x.shape
    n = weight.shape[0]
    tile = next(r for r in (1, 4, 16) if r >= rows)
    suffix = "bf16"

    def record(impl: str, ms: float) -> None:
        rate = weight.nbytes / ms / 1e6
        row: dict[str, Any] = dict(bench=name, impl=impl, ms=ms, gb_s=rate, of_copy=rate / copy)
        if torch_ms is not None:
            row["vs_torch"] = torch_ms / ms
        emit(**row)

    saved = quantized_matmul.THREADS_PER_ROW
    try:
        for tpr in VARIANTS:
            quantized_matmul.THREADS_PER_ROW = ((1 << 62, tpr),)
            backend._plans = None  # (plans keep the choice they were made with)
            ms = time_ms(lambda: backend.quantized_linear(x, weight, out=y), timer.start,
                         timer.stop, repeats)  # fmt: skip
            record(f"hip tpr={tpr}", ms)
    finally:
        quantized_matmul.THREADS_PER_ROW = saved
        backend._plans = None
    shipped = backend.quantized_linear(x, weight).to_numpy().astype(np.float32)
    for bpt, min_blocks, wr in BUILDS:
        kernel = build(backend, bpt, min_blocks, wr).get_kernel(
            f"gemv_{weight.encoding}_r{tile}_{suffix}"
        )
        kernel.launch(-(-n // (4 * wr)), 256, weight.blocks, x, y, n, k, rows, 64, k, n,
                      stream=backend.stream)  # fmt: skip
        error = np.abs(y.to_numpy().astype(np.float32) - shipped).max() / np.abs(shipped).max()
        emit(bench=name, impl=f"check: bpt={bpt} minblocks={min_blocks} wr={wr} vs shipped",
             max_rel_err=float(error))  # fmt: skip
        for tpr in VARIANTS:
            grid = -(-n // (wr * 256 // tpr))

            def launch(kernel: Any = kernel, grid: int = grid, tpr: int = tpr) -> None:
                kernel.launch(grid, 256, weight.blocks, x, y, n, k, rows, tpr, k, n,
                              stream=backend.stream)  # fmt: skip

            record(f"hip tpr={tpr} bpt={bpt} minblocks={min_blocks} wr={wr}",
                   time_ms(launch, timer.start, timer.stop, repeats))  # fmt: skip


@functools.cache
def build(backend: HipBackend, bpt: int, min_blocks: int, wr: int) -> Any:
    """gemv_quant.hip compiled with HIPK_GEMV_BPT / _MIN_BLOCKS / _WR, loaded on the device."""
    options = (f"-DHIPK_GEMV_BPT={bpt}", f"-DHIPK_GEMV_MIN_BLOCKS={min_blocks}",
               f"-DHIPK_GEMV_WR={wr}")  # fmt: skip
    return kernel_sources.program("gemv_quant.hip", options=options).load(backend.device)


def table(copy: float) -> str:
    """The rows as a markdown table under the copy rate (checks and skips as their own lines)."""
    head = [
        "| case | impl | ms | weight GB/s | of copy | torch / hip |",
        "|---|---|---|---|---|---|",
    ]
    body, notes = [], []
    for r in ROWS:
        if "gb_s" in r and r["bench"] != "d2d_copy":
            ratio = f"{r['vs_torch']:.2f}" if "vs_torch" in r else ""
            cells = (r["bench"], r["impl"], f"{r['ms']:.4f}", f"{r['gb_s']:.0f}",
                     f"{r['of_copy']:.2f}", ratio)  # fmt: skip
            body.append("| " + " | ".join(cells) + " |")
        elif "max_rel_err" in r or r["bench"] == "skipped":
            notes.append(f"- {r.get('case', r['bench'])}: {r['impl']} "
                         f"{r.get('max_rel_err', r.get('reason', ''))}")  # fmt: skip
    return "\n".join([f"D2D copy (read + write): {copy:.0f} GB/s", "", *head, *body, "", *notes])


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--repeats", type=int, help="timed batches per figure (10; --quick: 3)")
    args = flags.parse_args()
    shapes = QUICK_SHAPES if args.quick else SHAPES
    with HipBackend() as backend:
        torch = import_torch(hip_api().platform)
        version = getattr(torch, "__version__", "skipped: not importable with a GPU")
        emit(bench="setup", device=backend.device.name, torch=version)
        repeats = args.repeats or (3 if args.quick else 10)
        copy = bench_copy(backend, torch, 1 << 28, repeats)
        rng = np.random.default_rng(0)
        for encoding, shape in ((e, s) for e in ("q8_0", "q4_0") for s in shapes):
            try:
                bench_shape(backend, torch, shape, encoding, repeats, copy, rng)
            except Exception as error:  # one failing case must not hide the others
                emit(bench="skipped", case=f"{encoding} {shape}", impl="hip",
                     reason=f"{type(error).__name__}: {error}"[:300])  # fmt: skip
    save(args.out, "bench_quant", table(copy))


if __name__ == "__main__":
    main()
