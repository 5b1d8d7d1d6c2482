"""Q8_0 / Q4_0 decode GEMV (quantized_linear) beside the copy rate and torch, in one run (bf16 x).

For each weight shape of a 1B/8B Llama ([N, K] = 4096x4096 attention, 14336x4096 gate/up,
4096x14336 down, 128256x4096 head) and rows 1, 2, 4, 8 and 16 of x: ms per call of
`backend.quantized_linear` as shipped (`hip split`: the weight in the split layout, as the Llama
loader keeps it, kernels/gemv_quant_split.hip with LANE_CHUNKS's teams per row, or dequantize +
GEMM past GEMV_MAX_ROWS), then the GEMV at every row count: every teams-per-row choice of the
split kernels (`split slices=1..8`) and the weight in GGUF's layout (`hip gguf`:
kernels/gemv_quant.hip's shared-memory staging), and the path beyond
GEMV_MAX_ROWS (`dequantize + GEMM`: the weight expanded to bf16, then BLAS), each checked
against the shipped result first. Figures: the effective bandwidth of the weight bytes read
(34 bytes per 32 weights for Q8_0, 18 for Q4_0, in either layout) as a fraction of the same run's
device-to-device copy rate (read + write bytes per second, the better of hipMemcpyAsync and
torch). Anchor: torch's bf16 matmul of the dequantized weight (`x @ Wᵀ`, cuBLAS), its time and
the bf16 weight bytes per second. The goal (issue 16): Q8_0 at rows 1 >= 80% of copy.
`--summary` prints one line per case instead of the table.

Weights are random blocks (random quants, f16 scales in [2^-8, 2^-6]): the kernels' speed does
not depend on the values. Each shape's result is checked against the torch product first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from _harness import ROWS, emit, parser, save
from bench_ops import HipTimer, TorchTimer, bench_copy, import_torch, time_ms

from hip_core import hip_api
from hip_runtime import HipBackend
from hip_runtime.ops import quantized_matmul
from hip_runtime.ops.quantized import BLOCK_ENCODINGS
from hip_runtime.ops.quantized_matmul import QuantizedWeight
from hip_runtime.tensors.tensor import DeviceTensor

SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096)]
QUICK_SHAPES = [(4096, 4096), (4096, 14336)]
ROW_COUNTS = (1, 2, 4, 8, 16)
SLICES = (1, 2, 4, 8)  # the split kernels' teams per weight row


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
    gguf_weight = QuantizedWeight(blocks, shape, encoding)
    weight = backend.split_quantized(gguf_weight)
    dense = backend.dequantize(weight, "bfloat16") if torch is not None else None
    for rows in ROW_COUNTS:
        host = rng.standard_normal((rows, k), np.float32)
        x = backend.cast(backend.from_numpy(host), "bfloat16")
        y = backend.empty((rows, n), "bfloat16")
        name = f"{encoding} {n}x{k} rows{rows}"
        torch_ms = None
        if dense is not None:
            torch_ms = bench_torch(backend, torch, name, x, weight, dense, y, repeats, copy)
        bench_variants(backend, name, x, (weight, gguf_weight), y, repeats, copy, torch_ms)


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
    backend: HipBackend, name: str, x: DeviceTensor, weights: tuple[QuantizedWeight, ...],
    y: DeviceTensor, repeats: int, copy: float, torch_ms: float | None,
) -> None:  # fmt: skip
    """The shipped choice (the split weight, LANE_CHUNKS's teams per row), each teams-per-row
    choice, then the GGUF-layout weight, all through quantized_linear, each checked against the
    shipped result first."""
    timer = HipTimer(backend)
    weight, gguf_weight = weights

    def record(impl: str, ms: float) -> None:
        rate = weight.nbytes / ms / 1e6
        row: dict[str, Any] = dict(bench=name, impl=impl, ms=ms, gb_s=rate, of_copy=rate / copy)
        if torch_ms is not None:
            row["vs_torch"] = torch_ms / ms
        emit(**row)

    def timed(impl: str, run: Any) -> None:
        run()
        got = y.to_numpy().astype(np.float32)
        error = np.abs(got - shipped).max() / max(np.abs(shipped).max(), 1e-30)
        if error > 1e-2:  # a wrong kernel's speed means nothing
            emit(bench=name, impl=f"check: {impl} vs shipped", max_rel_err=float(error))
            return
        record(impl, time_ms(run, timer.start, timer.stop, repeats))

    def product(stored: QuantizedWeight) -> Any:
        return lambda: backend.quantized_linear(x, stored, out=y)

    def expand_and_multiply() -> None:  # what quantized_linear does beyond GEMV_MAX_ROWS
        backend.linear(x, backend.dequantize(weight, x.dtype), out=y)

    slices = quantized_matmul.split_slices(weight.encoding, weight.shape[1])
    shipped = backend.quantized_linear(x, weight).to_numpy().astype(np.float32)
    gemv = "" if x.shape[0] <= quantized_matmul.GEMV_MAX_ROWS else ", as dequantize + GEMM"
    timed(f"hip split (slices={slices}){gemv}", product(weight))
    saved = quantized_matmul.SPLIT_SLICES, quantized_matmul.GEMV_MAX_ROWS
    try:  # the GEMV itself at every row count, past GEMV_MAX_ROWS too (to place it)
        quantized_matmul.GEMV_MAX_ROWS = max(ROW_COUNTS)
        for choice in SLICES:
            quantized_matmul.SPLIT_SLICES = choice
            backend._plans = None  # (plans keep the choice they were made with)
            timed(f"split slices={choice}", product(weight))
        timed("hip gguf (staging)", product(gguf_weight))
    finally:
        quantized_matmul.SPLIT_SLICES, quantized_matmul.GEMV_MAX_ROWS = saved
        backend._plans = None
    timed("dequantize + GEMM", expand_and_multiply)


#: The summary's abbreviations: s<S> = split slices=S, gguf = the GGUF-layout weight.
SHORT_NAMES = (
    ("hip split (slices=", "shipped(s"), ("split slices=", "s"), ("hip gguf (staging)", "gguf"),
    ("torch bf16 matmul", "torch"), ("dequantize + GEMM", "dq+gemm"),
)  # fmt: skip


def summary(copy: float) -> str:
    """One line per case: each impl's fraction of the copy rate (checks and skips after)."""
    cases: dict[str, list[str]] = {}
    notes = []
    worst: float | None = None  # the largest max |hip - torch| / max |torch| over the cases
    for r in ROWS:
        if "of_copy" in r and r["bench"] != "d2d_copy":
            impl = r["impl"]
            for long, short in SHORT_NAMES:
                impl = impl.replace(long, short)
            cases.setdefault(r["bench"], []).append(f"{impl} {r['of_copy']:.2f}")
        elif "max_rel_err" in r and "torch" in r["impl"]:
            worst = max(worst or 0.0, r["max_rel_err"])
        elif "max_rel_err" in r:
            notes.append(f"{r['bench']}: {r['impl']} {r['max_rel_err']:.2e}")
        elif r["bench"] == "skipped":
            notes.append(f"skipped {r['case']}: {r['reason']}")
    head = (
        f"D2D copy (read + write): {copy:.0f} GB/s; figures: weight bytes/s of copy (s<S>: "
        "split layout, S teams per row; gguf: GGUF layout, staging kernels)"
    )
    lines = [f"{c}: " + ", ".join(v) for c, v in cases.items()]
    check = "no torch" if worst is None else f"{worst:.2e}"
    return "\n".join([head, *lines, f"worst shipped vs torch (relative): {check}", *notes])


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
    flags.add_argument("--summary", action="store_true", help="one line per case, not the table")
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
    if args.summary:
        print(summary(copy))


if __name__ == "__main__":
    main()
